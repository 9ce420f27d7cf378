package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// TestAppendLogAt: a chunk of an attempt's output sent again, whole or in
// part (a restart reads the output file again from the start), adds
// nothing twice; another attempt starts from its beginning; the position
// is kept with the log.
func TestAppendLogAt(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true})
	j, err := s.SubmitJob(ctx, "sim", json.RawMessage(`{}`), "")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		attempt int
		offset  int64
		chunk   string
		log     string
		taken   int64
	}{
		{1, 0, "hello ", "hello ", 6},
		{1, 6, "world\n", "hello world\n", 12},
		{1, 0, "hello world\n", "hello world\n", 12},              // all again: nothing
		{1, 6, "world\nmore\n", "hello world\nmore\n", 17},        // overlapping: the new part
		{1, 20, "gap\n", "hello world\nmore\ngap\n", 24},          // beyond: as it is
		{2, 0, "second\n", "hello world\nmore\ngap\nsecond\n", 7}, // another attempt
		{2, 0, "second\n", "hello world\nmore\ngap\nsecond\n", 7},
	}
	for i, st := range steps {
		if err := s.AppendLogAt(ctx, j.ID, st.attempt, st.offset, []byte(st.chunk)); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		log, err := s.Logs(ctx, j.ID)
		if err != nil || string(log) != st.log {
			t.Fatalf("step %d: log %q (%v), want %q", i, log, err, st.log)
		}
		if n, err := s.OutputTaken(ctx, j.ID, st.attempt); err != nil || n != st.taken {
			t.Errorf("step %d: taken %d (%v), want %d", i, n, err, st.taken)
		}
	}
	n, err := s.OutputTaken(ctx, j.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("attempt 1 after attempt 2 began: taken %d, want 0", n)
	}
	if err := s.AppendLogAt(ctx, "j-9", 1, 0, []byte("x")); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: %v, want ErrNotFound", err)
	}
	if err := s.AppendLogAt(ctx, j.ID, 1, -1, []byte("x")); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative offset: %v, want ErrInvalid", err)
	}
}
