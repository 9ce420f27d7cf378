package hypervisorproxy

import (
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// addrs compares addresses.
var addrs = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

// state is a record's VMs and pools, to compare.
func state(t *testing.T, dir string) (map[string]vmEntry, map[string]string, int64) {
	t.Helper()
	rec, l, err := openRecordLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, journalFile)); !os.IsNotExist(err) {
		t.Errorf("the journal is still there after the record was read: %v", err)
	}
	if diff := cmp.Diff(rec.entries(), l.vms, addrs); diff != "" {
		t.Errorf("the log's state is not the record read (-read +log):\n%s", diff)
	}
	return rec.entries(), rec.Pools, rec.LeaderEpoch
}

func entry(name, host string, vcpus int) vmEntry {
	return vmEntry{Spec: VMSpec{Name: name, Host: host, VCPUs: vcpus, MemoryMiB: 512}}
}

// TestRecordJournal: a change is a line of what changed (one VM among
// 500 is one entry), the record read back is the last written, through
// compactions, a last line cut short by a crash, and a crash between a
// compaction's snapshot and its emptied journal; a bad line before the
// last is an error naming it.
func TestRecordJournal(t *testing.T) {
	dir := t.TempDir()
	_, l, err := openRecordLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	vms, pools := map[string]vmEntry{}, map[string]string{"h0": "render", "h1": "sim"}
	for i := range 500 {
		vms[fmt.Sprint("vm-", i)] = entry(fmt.Sprint("vm-", i), "h0", 1)
	}
	if _, err := writeAll(l, live(vms), hostsOf(pools), 0); err != nil {
		t.Fatal(err)
	}
	// One more VM, one resized, one gone, a pool switched, a new epoch.
	addr := netip.MustParseAddr("10.77.1.12")
	vms["new"] = vmEntry{Spec: VMSpec{Name: "new", Host: "h1", VCPUs: 2, MemoryMiB: 512}, Boot: 3.5, Address: &addr}
	vms["vm-7"] = entry("vm-7", "h0", 4)
	delete(vms, "vm-9")
	pools["h1"] = "render"
	size := journalSize(t, dir)
	if _, err := writeAll(l, live(vms), hostsOf(pools), 3); err != nil {
		t.Fatal(err)
	}
	line := readLines(t, dir)[1]
	want := `{"put":[{"spec":{"name":"new","host":"h1","vcpus":2,"memory_mib":512},"boot_seconds":3.5,"address":"10.77.1.12"},` +
		`{"spec":{"name":"vm-7","host":"h0","vcpus":4,"memory_mib":512}}],"gone":["vm-9"],"pools":{"h1":"render"},"leader_epoch":3}`
	if line != want || journalSize(t, dir)-size != int64(len(want)+1) {
		t.Errorf("the line of the change: %s\nwant %s", line, want)
	}
	if n, err := writeAll(l, live(vms), hostsOf(pools), 3); err != nil || n != 0 || len(readLines(t, dir)) != 2 {
		t.Errorf("a write with no change: %v, %d lines", err, len(readLines(t, dir)))
	}

	// A line cut short by a crash is dropped.
	appendTo(t, dir, `{"put":[{"spec":`)
	got, gotPools, epoch := state(t, dir)
	if diff := cmp.Diff(vms, got, addrs); diff != "" || gotPools["h1"] != "render" || epoch != 3 {
		t.Errorf("the record read back (-want +got):\n%s\npools %v, epoch %d", diff, gotPools, epoch)
	}

	// Many changes: compactions keep the journal short.
	_, l, err = openRecordLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		vms[fmt.Sprint("vm-", i%500)] = entry(fmt.Sprint("vm-", i%500), "h1", 1+i%3)
		if _, err := writeAll(l, live(vms), hostsOf(pools), 3); err != nil {
			t.Fatal(err)
		}
		if n := len(readLines(t, dir)); n > len(vms)+len(pools) {
			t.Fatalf("write %d: %d lines in the journal, more than the record's %d VMs and hosts", i, n, len(vms)+len(pools))
		}
	}
	// A crash between a compaction's snapshot and its emptied journal:
	// the journal replays over a snapshot that has it.
	journal := strings.Join(readLines(t, dir), "\n") + "\n"
	if err := l.compact(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, journalFile), []byte(journal), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := state(t, dir); !cmp.Equal(vms, got, addrs) {
		t.Errorf("after a crash in a compaction: %s", cmp.Diff(vms, got, addrs))
	}

	// A bad line that is not the last is an error.
	if err := os.WriteFile(filepath.Join(dir, journalFile), []byte("{}\nnot json\n{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := openRecordLog(dir); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad line 2: %v", err)
	}
}

// live is the agent's VMs that the entries record.
func live(vms map[string]vmEntry) map[string]*vm {
	out := make(map[string]*vm, len(vms))
	for name, e := range vms {
		v := &vm{spec: e.Spec, boot: time.Duration(e.Boot * float64(time.Second))}
		if e.Address != nil {
			v.addr = *e.Address
		}
		out[name] = v
	}
	return out
}

// hostsOf is the agent's hosts in the pools, in name order.
func hostsOf(pools map[string]string) []*host {
	var out []*host
	for _, name := range slices.Sorted(maps.Keys(pools)) {
		out = append(out, &host{cfg: SiteHost{Name: name}, pool: pools[name]})
	}
	return out
}

func readLines(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, journalFile))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func journalSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, journalFile))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func appendTo(t *testing.T, dir, s string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, journalFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRecordGroupSync: lines written before a sync are made durable by
// one fsync, which the later syncs of those lines share; a line written
// after it needs another; a compaction makes every line durable.
func TestRecordGroupSync(t *testing.T) {
	dir := t.TempDir()
	_, l, err := openRecordLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	pools := map[string]string{"h0": "render"}
	vms := map[string]vmEntry{}
	var ns []uint64
	for i := range 3 {
		vms[fmt.Sprint("vm-", i)] = entry(fmt.Sprint("vm-", i), "h0", 1)
		n, err := writeAll(l, live(vms), hostsOf(pools), 0)
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	for _, n := range []uint64{ns[0], ns[2], ns[1]} {
		if err := l.sync(n); err != nil {
			t.Fatal(err)
		}
	}
	if l.syncs != 1 {
		t.Errorf("three lines synced in any order: %d fsyncs, want 1", l.syncs)
	}
	vms["late"] = entry("late", "h0", 1)
	n, err := writeAll(l, live(vms), hostsOf(pools), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.sync(n); err != nil || l.syncs != 2 {
		t.Errorf("a line written after the sync: %v, %d fsyncs, want 2", err, l.syncs)
	}
	vms["again"] = entry("again", "h0", 1)
	if n, err = writeAll(l, live(vms), hostsOf(pools), 0); err != nil {
		t.Fatal(err)
	}
	if err := l.compact(); err != nil {
		t.Fatal(err)
	}
	if err := l.sync(n); err != nil || l.syncs != 2 {
		t.Errorf("a line compacted into the snapshot: %v, %d fsyncs, want 2 (none more)", err, l.syncs)
	}
	if got, _, _ := state(t, dir); !cmp.Equal(vms, got, addrs) {
		t.Errorf("the record read back: %s", cmp.Diff(vms, got, addrs))
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRecordWrite: a change of one VM on a site of 50 hosts holding
// 100 VMs, written to the journal (no fsync): the write compares the
// agent's state with the record entry by entry.
func BenchmarkRecordWrite(b *testing.B) {
	_, l, err := openRecordLog(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	vms, pools := map[string]vmEntry{}, map[string]string{}
	for i := range 50 {
		pools[fmt.Sprint("h", i)] = "render"
	}
	for i := range 100 {
		vms[fmt.Sprint("vm-", i)] = entry(fmt.Sprint("vm-", i), fmt.Sprint("h", i%50), 1)
	}
	agent, hosts := live(vms), hostsOf(pools)
	if _, err := writeAll(l, agent, hosts, 0); err != nil {
		b.Fatal(err)
	}
	verifyRecord = false // what is measured is the write of what was touched
	defer func() { verifyRecord = true }()
	names := slices.Sorted(maps.Keys(agent))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		name := names[i%len(names)]
		agent[name].spec.VCPUs = 1 + i%3
		l.touch(name)
		if _, err := l.write(agent, hosts, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// writeAll writes the record with every VM touched (those of vms and of
// the record), as if each had changed.
func writeAll(l *recordLog, vms map[string]*vm, hosts []*host, epoch int64) (uint64, error) {
	for name := range vms {
		l.touch(name)
	}
	for name := range l.vms {
		l.touch(name)
	}
	return l.write(vms, hosts, epoch)
}

func TestMain(m *testing.M) {
	verifyRecord = true // a VM changed without touchLocked panics
	os.Exit(m.Run())
}

// A write compares only the VMs touched since the last: the package's
// tests check each write against all the VMs, and a change nobody
// touched is a panic there (and, outside the tests, a change the record
// would miss until the VM is touched again).
func TestRecordTouched(t *testing.T) {
	_, l, err := openRecordLog(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	agent, hosts := live(map[string]vmEntry{"a": entry("a", "h0", 1), "b": entry("b", "h0", 1)}), hostsOf(map[string]string{"h0": "render"})
	if _, err := writeAll(l, agent, hosts, 0); err != nil {
		t.Fatal(err)
	}
	agent["a"].spec.VCPUs = 2
	l.touch("a")
	if _, err := l.write(agent, hosts, 0); err != nil || l.vms["a"].Spec.VCPUs != 2 {
		t.Fatalf("a touched change: %v, recorded %+v", err, l.vms["a"])
	}
	agent["b"].spec.VCPUs = 3
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "without touchLocked") {
				t.Errorf("an untouched change: %v, want the check's panic", r)
			}
		}()
		_, _ = l.write(agent, hosts, 0) // it panics before it returns
	}()
	verifyRecord = false
	defer func() { verifyRecord = true }()
	delete(agent, "a")
	l.touch("a")
	if n, err := l.write(agent, hosts, 0); err != nil || n == 0 || len(l.vms) != 1 || l.vms["b"].Spec.VCPUs != 1 {
		t.Errorf("a touched removal beside an untouched change: line %d, %v, recorded %+v", n, err, l.vms)
	}
}
