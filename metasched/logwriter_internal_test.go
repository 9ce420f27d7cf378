package metasched

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/store"
)

// TestLogWriterAsItStops: a job's output the store refuses once the daemon
// stops is the daemon's stop (executor.ErrDetached, which the executors
// log as such), and a plain failure of the store otherwise.
func TestLogWriterAsItStops(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "metasched.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{st: st}
	w := &logWriter{d: d, id: "j-000000000001", attempt: 1}
	if _, err := w.Write([]byte("out\n")); err == nil || errors.Is(err, executor.ErrDetached) {
		t.Errorf("a write the store refuses while the daemon runs: %v, want the store's error alone", err)
	}
	d.jobs.closing = true
	if _, err := w.Write([]byte("out\n")); !errors.Is(err, executor.ErrDetached) {
		t.Errorf("a write the store refuses as the daemon stops: %v, want executor.ErrDetached", err)
	}
	if w.at != 0 {
		t.Errorf("the writer moved to %d after refused writes, want 0", w.at)
	}
}
