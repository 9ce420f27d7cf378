package hypervisorproxy

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// vm is a VM the agent manages: its spec as recorded, and the operation
// that holds it.
type vm struct {
	spec   VMSpec        // Host, VCPUs and MemoryMiB follow the VM
	busy   string        // operation in progress, "" when idle
	moving string        // destination host of a migration in progress
	boot   time.Duration // from the create call to the guest's readiness; 0: not booted by the agent
	agent  time.Duration // from the create call to the guest agent's first answer
	addr   netip.Addr    // its address on the site's network; invalid: none
}

// record is what the agent knows of its VMs and hosts beyond what the
// hypervisors report: which VMs it manages (and their specs, so that a
// file-based test host that lost its state can be given them back) and
// each host's pool. After every change what changed is appended to
// DATA_DIR/agent.journal, and DATA_DIR/agent.json is rewritten whole only
// when the journal grows long (see recordLog), when the site has a
// data_dir.
type record struct {
	VMs   []VMSpec          `json:"vms"`   // Host and the current sizes are kept up to date
	Pools map[string]string `json:"pools"` // host -> pool
	// Boot is the boot time of each VM that booted an image, in seconds:
	// to its readiness (Agent: to its guest agent's first answer).
	Boot  map[string]float64 `json:"boot_seconds,omitempty"`
	Agent map[string]float64 `json:"agent_seconds,omitempty"`
	// Addresses is the address each VM holds on the site's network.
	Addresses map[string]netip.Addr `json:"addresses,omitempty"`
	// LeaderEpoch is the highest leader epoch a request carried
	// (LeaderEpochHeader): a request of a lower one is refused.
	LeaderEpoch int64 `json:"leader_epoch,omitempty"`
}

const recordFile = "agent.json"

func loadRecord(dir string) (*record, error) {
	r := &record{Pools: map[string]string{}}
	if dir == "" {
		return r, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if os.IsNotExist(err) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the agent's record: %w", err)
	}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("read the agent's record %s: %w", filepath.Join(dir, recordFile), err)
	}
	if r.Pools == nil {
		r.Pools = map[string]string{}
	}
	return r, nil
}

// save writes the record atomically (temporary file, fsync, rename).
func (r *record) save(dir string) error {
	if dir == "" {
		return nil
	}
	c := record{VMs: slices.Clone(r.VMs), Pools: r.Pools, Boot: r.Boot, Agent: r.Agent, Addresses: r.Addresses, LeaderEpoch: r.LeaderEpoch}
	slices.SortFunc(c.VMs, func(a, b VMSpec) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, recordFile+".*")
	if err != nil {
		return fmt.Errorf("save the agent's record: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("save the agent's record: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save the agent's record: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save the agent's record: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, recordFile)); err != nil {
		return fmt.Errorf("save the agent's record: %w", err)
	}
	return nil
}

// The record is kept as a snapshot (agent.json, written whole and
// atomically) and a journal (agent.journal) of what changed since, a JSON
// line per change, appended and fsync'd: a change costs what it changed,
// not the whole record. When the journal holds more lines than the record
// has VMs and hosts (and at least journalMin), the snapshot is written
// again and the journal emptied. Every line holds values, not steps, so a
// line replayed over a snapshot that has it already changes nothing: a
// crash between the two writes of a compaction loses nothing. A last line
// cut short by a crash is dropped when the record is read.
const (
	journalFile = "agent.journal"
	journalMin  = 64
)

// vmEntry is what the record keeps of one VM.
type vmEntry struct {
	Spec    VMSpec      `json:"spec"`
	Boot    float64     `json:"boot_seconds,omitempty"`
	Agent   float64     `json:"agent_seconds,omitempty"`
	Address *netip.Addr `json:"address,omitempty"`
}

// recordDelta is a line of the journal: the VMs put (whole) and gone, the
// hosts' pools that changed, and the leader epoch when it changed.
type recordDelta struct {
	Put         []vmEntry         `json:"put,omitempty"`
	Gone        []string          `json:"gone,omitempty"`
	Pools       map[string]string `json:"pools,omitempty"`
	LeaderEpoch int64             `json:"leader_epoch,omitempty"`
}

// entries are the record's VMs by name.
func (r *record) entries() map[string]vmEntry {
	out := make(map[string]vmEntry, len(r.VMs))
	for _, s := range r.VMs {
		e := vmEntry{Spec: s, Boot: r.Boot[s.Name], Agent: r.Agent[s.Name]}
		if a, ok := r.Addresses[s.Name]; ok && a.IsValid() {
			e.Address = &a
		}
		out[s.Name] = e
	}
	return out
}

// recordOf is the record of the entries, pools and epoch.
func recordOf(vms map[string]vmEntry, pools map[string]string, epoch int64) *record {
	r := &record{Pools: maps.Clone(pools), LeaderEpoch: epoch}
	for _, e := range vms {
		r.VMs = append(r.VMs, e.Spec)
		if e.Boot > 0 {
			if r.Boot == nil {
				r.Boot = map[string]float64{}
			}
			r.Boot[e.Spec.Name] = e.Boot
		}
		if e.Agent > 0 {
			if r.Agent == nil {
				r.Agent = map[string]float64{}
			}
			r.Agent[e.Spec.Name] = e.Agent
		}
		if e.Address != nil {
			if r.Addresses == nil {
				r.Addresses = map[string]netip.Addr{}
			}
			r.Addresses[e.Spec.Name] = *e.Address
		}
	}
	return r
}

// readJournal applies the journal's lines in dir to r; a last line cut
// short is dropped. It returns the lines applied.
func readJournal(dir string, r *record) (int, error) {
	data, err := os.ReadFile(filepath.Join(dir, journalFile))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the agent's journal: %w", err)
	}
	lines := strings.Split(string(data), "\n")
	vms, pools, epoch := r.entries(), r.Pools, r.LeaderEpoch
	n := 0
	for i, line := range lines {
		if line == "" {
			continue
		}
		var d recordDelta
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			if i == len(lines)-1 { // cut short by a crash: never acknowledged
				break
			}
			return 0, fmt.Errorf("read the agent's journal %s: line %d: %w", filepath.Join(dir, journalFile), i+1, err)
		}
		for _, name := range d.Gone {
			delete(vms, name)
		}
		for _, e := range d.Put {
			vms[e.Spec.Name] = e
		}
		maps.Copy(pools, d.Pools)
		epoch = max(epoch, d.LeaderEpoch)
		n++
	}
	*r = *recordOf(vms, pools, epoch)
	return n, nil
}

// recordLog is the record as last written, and the journal it is written
// to. Its lines are appended under the agent's lock and made durable
// outside it (sync), one fsync for the lines of every operation waiting
// then (group commit): the VMs of one job, created at once, share it.
type recordLog struct {
	dir   string
	vms   map[string]vmEntry
	pools map[string]string
	epoch int64
	lines int // in the journal
	// touched are the VMs that may have changed since the last write (the
	// agent's touchLocked): a write compares those alone with the record.
	touched map[string]struct{}

	// f is the journal, open while lines are appended to it: changed
	// under the agent's lock and smu both.
	f *os.File
	// written counts the lines appended since the log was opened; synced
	// (under smu) those known durable.
	written atomic.Uint64
	smu     sync.Mutex
	synced  uint64
	syncs   int // fsyncs of the journal
}

// openRecordLog reads the record of dir (snapshot and journal) and
// compacts it, so that the journal starts empty.
func openRecordLog(dir string) (*record, *recordLog, error) {
	rec, err := loadRecord(dir)
	if err != nil {
		return nil, nil, err
	}
	l := &recordLog{dir: dir, vms: rec.entries(), pools: maps.Clone(rec.Pools), epoch: rec.LeaderEpoch}
	if dir == "" {
		return rec, l, nil
	}
	n, err := readJournal(dir, rec)
	if err != nil {
		return nil, nil, err
	}
	if n > 0 {
		l.vms, l.pools, l.epoch = rec.entries(), maps.Clone(rec.Pools), rec.LeaderEpoch
		if err := l.compact(); err != nil {
			return nil, nil, err
		}
	}
	return rec, l, nil
}

// compact writes the snapshot and empties the journal: every line
// written is then durable.
func (l *recordLog) compact() error {
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	if err := recordOf(l.vms, l.pools, l.epoch).save(l.dir); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(l.dir, journalFile)); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("empty the agent's journal: %w", err)
	}
	l.lines = 0
	l.synced = l.written.Load()
	return nil
}

// write records the agent's VMs, its hosts' pools and epoch: the line of
// what changed since the last write, appended (not yet durable: sync its
// number), or a compaction when the journal is long (durable: number 0).
// It compares the VMs touched since the last write with the record as last
// written, entry by entry, and the hosts' pools: a change of one VM of a
// site of many costs neither a copy nor a look at the others. The agent's
// lock must be held.
func (l *recordLog) write(vms map[string]*vm, hosts []*host, epoch int64) (uint64, error) {
	d := l.delta(vms, l.touched)
	clear(l.touched)
	if verifyRecord {
		if full := l.delta(vms, nil); !full.sameVMs(d) {
			panic(fmt.Sprintf("agent record: a VM changed without touchLocked: the touched ones give %+v, all of them %+v", d, full))
		}
	}
	for _, h := range hosts {
		if p, ok := l.pools[h.cfg.Name]; !ok || p != h.pool {
			if d.Pools == nil {
				d.Pools = map[string]string{}
			}
			d.Pools[h.cfg.Name] = h.pool
		}
	}
	if len(l.pools) > len(hosts) { // hosts the site file no longer has
		for name := range l.pools {
			if !slices.ContainsFunc(hosts, func(h *host) bool { return h.cfg.Name == name }) {
				delete(l.pools, name)
			}
		}
	}
	if epoch != l.epoch {
		d.LeaderEpoch = epoch
	}
	if d.Put == nil && d.Gone == nil && d.Pools == nil && d.LeaderEpoch == 0 {
		return 0, nil
	}
	for _, e := range d.Put {
		l.vms[e.Spec.Name] = e
	}
	for _, name := range d.Gone {
		delete(l.vms, name)
	}
	maps.Copy(l.pools, d.Pools)
	l.epoch = epoch
	if l.dir == "" {
		return 0, nil
	}
	if l.lines >= max(journalMin, len(l.vms)+len(l.pools)) {
		return 0, l.compact()
	}
	slices.SortFunc(d.Put, func(a, b vmEntry) int { return strings.Compare(a.Spec.Name, b.Spec.Name) })
	slices.Sort(d.Gone)
	line, err := json.Marshal(d)
	if err != nil {
		return 0, err
	}
	if l.f == nil {
		f, err := os.OpenFile(filepath.Join(l.dir, journalFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return 0, fmt.Errorf("save the agent's record: %w", err)
		}
		l.smu.Lock()
		l.f = f
		l.smu.Unlock()
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		return 0, fmt.Errorf("save the agent's record: %w", err)
	}
	l.lines++
	return l.written.Add(1), nil
}

// verifyRecord makes every write also compare all the VMs with the
// record, and panic when the VMs touched missed a change: the package's
// tests set it.
var verifyRecord bool

// delta is what changed of the VMs since the record was written: of the
// names given, or of all the VMs when names is nil.
func (l *recordLog) delta(vms map[string]*vm, names map[string]struct{}) recordDelta {
	var d recordDelta
	diff := func(name string) {
		v, ok := vms[name]
		old, was := l.vms[name]
		switch {
		case ok && (!was || !v.recorded(old)):
			d.Put = append(d.Put, v.entry())
		case !ok && was:
			d.Gone = append(d.Gone, name)
		}
	}
	if names != nil {
		for name := range names {
			diff(name)
		}
		return d
	}
	for name := range vms {
		diff(name)
	}
	for name := range l.vms {
		if _, ok := vms[name]; !ok {
			diff(name)
		}
	}
	return d
}

// sameVMs says d and e change the same VMs the same way.
func (d recordDelta) sameVMs(e recordDelta) bool {
	key := func(x recordDelta) []string {
		var out []string
		for _, p := range x.Put {
			b, _ := json.Marshal(p)
			out = append(out, "put "+string(b))
		}
		for _, g := range x.Gone {
			out = append(out, "gone "+g)
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(d), key(e))
}

// touchLocked notes that the VM may have changed (created, destroyed, or
// what the record keeps of it): the next write compares it with the
// record. Every change of a.vms that the record keeps calls it; a.mu must
// be held.
func (a *Agent) touchLocked(name string) { a.records.touch(name) }

// touch notes that the VM may have changed since the last write.
func (l *recordLog) touch(name string) {
	if l.touched == nil {
		l.touched = map[string]struct{}{}
	}
	l.touched[name] = struct{}{}
}

// entry is what the record keeps of v.
func (v *vm) entry() vmEntry {
	e := vmEntry{Spec: v.spec, Boot: v.boot.Seconds(), Agent: v.agent.Seconds()}
	if v.addr.IsValid() {
		addr := v.addr
		e.Address = &addr
	}
	return e
}

// recorded reports whether e records v as it is.
func (v *vm) recorded(e vmEntry) bool {
	return v.spec.Equal(e.Spec) && v.boot.Seconds() == e.Boot && v.agent.Seconds() == e.Agent &&
		v.addr.IsValid() == (e.Address != nil) && (e.Address == nil || *e.Address == v.addr)
}

// sync makes the lines up to n durable, with those written since (one
// fsync for all the operations waiting); 0 is nothing to sync.
func (l *recordLog) sync(n uint64) error {
	if n == 0 {
		return nil
	}
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.synced >= n {
		return nil
	}
	upTo := l.written.Load()
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("save the agent's record: %w", err)
	}
	l.synced = upTo
	l.syncs++
	return nil
}

// close closes the journal.
func (l *recordLog) close() error {
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// saveLocked records the agent's VMs, its hosts' pools and the leader
// epoch (what changed since the last save) and returns the number to
// sync; a.mu must be held. Call saveAndUnlock, or sync the number after
// unlocking a.mu, before answering: the change is durable then.
func (a *Agent) saveLocked() uint64 {
	n, err := a.writeRecordLocked()
	if err != nil {
		a.log.Error().Err(err).Msg("save record")
	}
	return n
}

// writeRecordLocked appends what changed to the record.
func (a *Agent) writeRecordLocked() (uint64, error) {
	return a.records.write(a.vms, a.hosts, a.epoch)
}

// saveAndUnlock saves the record, unlocks a.mu and waits until the change
// is durable (sharing the fsync of the operations waiting with it).
func (a *Agent) saveAndUnlock() {
	n := a.saveLocked()
	a.mu.Unlock()
	a.syncRecord(n)
}

// syncRecord waits until the record's line n is durable.
func (a *Agent) syncRecord(n uint64) {
	if err := a.records.sync(n); err != nil {
		a.log.Error().Err(err).Msg("save record")
	}
}

// saveSyncedLocked saves the record and waits until it is durable, a.mu
// held: for what must be on disk before anything else happens (a new
// leader's epoch).
func (a *Agent) saveSyncedLocked() error {
	n, err := a.writeRecordLocked()
	if err != nil {
		return err
	}
	return a.records.sync(n)
}

// RecordedVMs reads the record an agent keeps in dataDir (its snapshot
// and journal): the VMs it manages and their addresses, for a check from
// outside the agent (nothing left behind).
func RecordedVMs(dataDir string) ([]VMSpec, map[string]netip.Addr, error) {
	r, err := loadRecord(dataDir)
	if err != nil {
		return nil, nil, err
	}
	if _, err := readJournal(dataDir, r); err != nil {
		return nil, nil, err
	}
	return r.VMs, r.Addresses, nil
}
