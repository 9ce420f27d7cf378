package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/store/kv"
)

// Errors returned by the store, to be tested with errors.Is.
var (
	// ErrNotFound: no job with that ID.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a compare-and-set found the job in another state.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request itself is malformed or not allowed, such as a
	// transition the job lifecycle does not permit.
	ErrInvalid = errors.New("invalid")
	// ErrCorrupt: a job's record on file cannot be decoded. Listings skip
	// such a record and report it to Options.OnCorrupt.
	ErrCorrupt = errors.New("corrupt record")
)

// JobState is a step of the job lifecycle (lifecycle.State).
type JobState = lifecycle.State

// Transition is one recorded change of a job's state (lifecycle.Transition).
type Transition = lifecycle.Transition

// The job states, as the lifecycle package defines them.
const (
	Queued       = lifecycle.Queued
	Planned      = lifecycle.Planned
	Provisioning = lifecycle.Provisioning
	Running      = lifecycle.Running
	Done         = lifecycle.Done
	Failed       = lifecycle.Failed
	Cancelled    = lifecycle.Cancelled
)

// States lists every job state in lifecycle order.
var States = lifecycle.States

// CanTransition reports whether the lifecycle allows a job to go from one
// state to the other.
func CanTransition(from, to JobState) bool { return lifecycle.CanTransition(from, to) }

// Job is a submitted job and its history.
type Job struct {
	// ID is assigned at submission: "j-" and 12 zero-padded digits, so IDs
	// sort in submission order.
	ID string `json:"id"`
	// Type is the job type, which names the pool that runs it.
	Type string `json:"type"`
	// Owner is who submitted the job: the name of the API token (or
	// client certificate) it came with; "" for the daemon's own (the
	// demo's).
	Owner string `json:"owner,omitempty"`
	// Spec is the job file as submitted.
	Spec json.RawMessage `json:"spec"`
	// State is the current state, the To of the last transition.
	State JobState `json:"state"`
	// Submitted is when the job was accepted.
	Submitted time.Time `json:"submitted"`
	// Transitions is every state change, oldest first.
	Transitions []Transition `json:"transitions"`
	// ExitCode is the command's exit code, once known.
	ExitCode *int `json:"exit_code,omitempty"`
	// Data is the daemon's own record for the job (plan, VMs, hosts),
	// opaque to the store, set with SetJobData.
	Data json.RawMessage `json:"data,omitempty"`
}

// Options tunes a Store. The zero value is the production setting.
type Options struct {
	// NoSync skips fsync: faster, but a crash loses acknowledged writes.
	// For tests only.
	NoSync bool
	// Now is the clock for transition times; nil means time.Now.
	Now func() time.Time
	// MaxLogBytes bounds each job's kept output; 0 means 1 MiB.
	MaxLogBytes int
	// MaxBatchDelay is how long a write waits for others to share its
	// commit; 0 means DefaultMaxBatchDelay. Measured on a 2-core VM:
	// 1 ms gives about 700 serial and 50,000 concurrent submissions/s;
	// bbolt's own 10 ms default caps a lone caller at 90/s and concurrent
	// callers at 11,000/s, while below 1 ms Go's timer granularity gains
	// nothing and shrinks the batches.
	MaxBatchDelay time.Duration
	// MaxBatchSize commits a batch early once that many writes wait; 0
	// means DefaultMaxBatchSize.
	MaxBatchSize int
	// OnCorrupt hears of each job record a listing skipped because it
	// cannot be decoded (the error wraps ErrCorrupt); nil: nobody.
	OnCorrupt func(id string, err error)
	// KeyRetention is how long an idempotency key of a submission is
	// kept; 0 means DefaultKeyRetention.
	KeyRetention time.Duration
}

// Defaults for Options.
const (
	DefaultMaxLogBytes   = 1 << 20
	DefaultMaxBatchDelay = time.Millisecond
	DefaultMaxBatchSize  = 1000
)

// Store is the daemon's database. Its methods are safe for concurrent use.
type Store struct {
	// db is the engine; file is the bbolt file under it (nil for another
	// engine), for what only a file has: its path, size, copy and check.
	db   kv.DB
	file *bolt.DB
	name string // what the store is, for errors: its file, or its engine's address
	// txnItems bounds the records one housekeeping transaction drops
	// (switches, keys): thousands in a file, a few dozen in etcd, whose
	// transactions hold at most 128 operations by default.
	txnItems  int
	now       func() time.Time
	maxLog    int
	onCorrupt func(id string, err error)
	// keyRetention is how long idempotency keys are kept.
	keyRetention time.Duration

	countMu sync.Mutex
	counts  map[JobState]int // jobs per state, kept with every committed change

	// visits counts the index keys and records the listings read: what a
	// page costs, for the tests that hold it to the page's size.
	visits atomic.Uint64
}

var (
	bucketJobs    = []byte("jobs")
	bucketStates  = []byte("states")
	bucketLogs    = []byte("logs")
	bucketJournal = []byte("journal")
	bucketHosts   = []byte("hosts")
	bucketMeta    = []byte("meta")
	bucketTypes   = []byte("types")    // layout 2: "TYPE/ID" for every job
	bucketRevoked = []byte("sessions") // revoked session ID → its expiry (8 bytes, Unix seconds)
	// layout 3: "STATE/TYPE/ID" for every job, and the switches (switches.go)
	bucketStateTypes = []byte("statetypes")
	// "OWNER/ID" for every job with an owner, and the API tokens
	// (tokens.go): buckets older code ignores, which need no new layout.
	bucketOwners = []byte("owners")
	keyToken     = []byte("token")
	keyLayout    = []byte("layout")
	keyLogSize   = []byte("size")
)

// Open opens the store at path, creating the file (mode 0600) and its
// buckets if needed. Only one process may have the file open: a second Open
// waits up to a few seconds for the lock and then fails.
func Open(path string, opt Options) (*Store, error) {
	// bbolt makes a new database of an empty file: an existing file that
	// is empty is a damaged store, never one to start again in.
	if fi, err := os.Stat(path); err == nil && fi.Size() == 0 {
		return nil, damaged(path, "the file is empty (0 bytes)")
	}
	if why := truncated(path); why != "" {
		return nil, damaged(path, why)
	}
	db, err := openBolt(path, opt)
	if err != nil {
		if errors.Is(err, bolterrors.ErrInvalid) || errors.Is(err, bolterrors.ErrChecksum) || errors.Is(err, bolterrors.ErrVersionMismatch) {
			return nil, damaged(path, "it is not a database this store can read: "+err.Error())
		}
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := check(db); err != nil {
		db.Close()
		return nil, damaged(path, err.Error())
	}
	db.MaxBatchDelay = opt.MaxBatchDelay
	if db.MaxBatchDelay <= 0 {
		db.MaxBatchDelay = DefaultMaxBatchDelay
	}
	db.MaxBatchSize = opt.MaxBatchSize
	if db.MaxBatchSize <= 0 {
		db.MaxBatchSize = DefaultMaxBatchSize
	}
	s, err := openOn(kv.NewBolt(db), path, opt)
	if err != nil {
		db.Close()
		return nil, err
	}
	s.file = db
	s.txnItems = 5000
	return s, nil
}

// openOn makes the store on an engine's database: it creates the buckets of
// a new store or migrates an older layout, in one transaction, and counts
// the jobs per state.
func openOn(db kv.DB, name string, opt Options) (*Store, error) {
	ctx := context.Background()
	if err := db.Update(ctx, upgrade); err != nil {
		return nil, fmt.Errorf("open store %s: %w", name, err)
	}
	s := &Store{db: db, name: name, now: opt.Now, maxLog: opt.MaxLogBytes, onCorrupt: opt.OnCorrupt, keyRetention: opt.KeyRetention, counts: map[JobState]int{}}
	if err := db.View(ctx, func(tx kv.Tx) error {
		return tx.Bucket(bucketStates).ForEach(func(k, _ []byte) error {
			st, _, _ := bytes.Cut(k, []byte("/"))
			s.counts[JobState(st)]++
			return nil
		})
	}); err != nil {
		return nil, fmt.Errorf("open store %s: count jobs: %w", name, err)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxLog <= 0 {
		s.maxLog = DefaultMaxLogBytes
	}
	return s, nil
}

// Close closes the store. Writes in flight finish first.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// Path is the store's file, or what the engine is (its address) for a
// store that is no file.
func (s *Store) Path() string { return s.name }

// Commits counts the write transactions the store committed since it
// opened (a group commit is one).
func (s *Store) Commits() int64 { return s.db.Commits() }

// Size is the store's file's size in bytes (0 for a store that is no
// file).
func (s *Store) Size() int64 {
	if s.file == nil {
		return 0
	}
	fi, err := os.Stat(s.file.Path())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// batch runs fn in a group-committed transaction after checking ctx; fn
// may run more than once.
func (s *Store) batch(ctx context.Context, fn func(kv.Tx) error) error {
	return s.db.Batch(ctx, fn)
}

// update runs fn in a transaction of its own; fn may run more than once.
func (s *Store) update(ctx context.Context, fn func(kv.Tx) error) error {
	return s.db.Update(ctx, fn)
}

// view runs fn in a read-only transaction after checking ctx.
func (s *Store) view(ctx context.Context, fn func(kv.Tx) error) error {
	return s.db.View(ctx, fn)
}

// ErrDamaged is returned by Open for a file that is not a metasched store
// or that fails its check: Open never starts a new store over it.
var ErrDamaged = errors.New("damaged store")

func damaged(path, why string) error {
	return fmt.Errorf("open store %s: %s: %w; the daemon does not start on it: restore the file from a backup, "+
		"or move it away to start with an empty store (every job, host record and the API token would be new)", path, why, ErrDamaged)
}

// openBolt opens the file with bbolt, which panics on some damaged files.
func openBolt(path string, opt Options) (db *bolt.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: bbolt cannot read it: %v", bolterrors.ErrInvalid, r)
		}
	}()
	return bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second, NoSync: opt.NoSync})
}

// truncated reads the two meta pages of a bbolt file (at its start: page
// size, and the number of pages in use) and says so when the file is
// shorter than those pages: reading such a file faults.
func truncated(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	// A page: a 16-byte header, then the meta: magic, version, page size,
	// flags (4 bytes each), the root bucket (16), the freelist page (8),
	// the high-water page id (8), the transaction id (8).
	const magic = 0xED0CDAED
	var need int64
	for _, off := range []int64{0, -1} {
		head := make([]byte, 72)
		if off < 0 {
			// The second meta page is one page in.
			if _, err := f.ReadAt(head, 0); err != nil {
				return ""
			}
			off = int64(binary.LittleEndian.Uint32(head[24:28]))
		}
		if _, err := f.ReadAt(head, off); err != nil {
			continue
		}
		if binary.LittleEndian.Uint32(head[16:20]) != magic {
			continue
		}
		pageSize := int64(binary.LittleEndian.Uint32(head[24:28]))
		pages := int64(binary.LittleEndian.Uint64(head[56:64]))
		need = max(need, pageSize*pages)
	}
	if fi.Size() < need {
		return fmt.Sprintf("the file is truncated: %d bytes where its pages need %d", fi.Size(), need)
	}
	return ""
}

// check tells a file that would fault on reading or is not a metasched
// store: shorter than its pages say (truncated), a database without the
// meta bucket that holds anything else, or one whose pages bbolt's check
// finds inconsistent.
func check(db *bolt.DB) error {
	fi, err := os.Stat(db.Path())
	if err != nil {
		return err
	}
	return db.View(func(tx *bolt.Tx) error {
		if need := tx.Size(); fi.Size() < need {
			return fmt.Errorf("the file is truncated: %d bytes where its pages need %d", fi.Size(), need)
		}
		if tx.Bucket(bucketMeta) == nil {
			var other []string
			_ = tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
				other = append(other, string(name))
				return nil
			})
			if len(other) > 0 {
				return fmt.Errorf("it is not a metasched store: it holds %s and no meta", strings.Join(other, ", "))
			}
		}
		var first error
		for err := range tx.Check() { // read to the end: the checker sends them all
			if first == nil {
				first = fmt.Errorf("the database check failed: %w", err)
			}
		}
		return first
	})
}

// Layout is the version of the store's layout that this code writes. A
// store records its layout in the meta bucket; Open migrates a store of an
// older layout and refuses a newer one.
//
//	1  jobs, states (STATE/ID), logs, journal, hosts, meta (token); no
//	   layout key (written before the store recorded its layout)
//	2  types (TYPE/ID), the index of jobs by type; meta records the layout
//	3  statetypes (STATE/TYPE/ID), the index of jobs by state and type;
//	   the switches by number with their indexes (open, by end, by host)
//	   in place of the journal, whose records the daemon converts
//	   (ConvertJournal) at its first start
const Layout = 3

// ErrNewerLayout is returned by Open for a store written by a newer
// metasched.
var ErrNewerLayout = errors.New("store written by a newer metasched")

// upgrade creates the buckets of a new store, or migrates an older
// layout to Layout, in Open's one transaction.
func upgrade(tx kv.Tx) error {
	meta := tx.Bucket(bucketMeta)
	layout := uint64(0) // a new, empty file
	switch v := metaLayout(meta); {
	case v > 0:
		layout = v
	case meta != nil:
		layout = 1
	}
	if layout > Layout {
		return fmt.Errorf("the store has layout %d, newer than this metasched's %d: run the metasched that wrote it, or a newer one: %w",
			layout, Layout, ErrNewerLayout)
	}
	// A bucket that older code ignores (sessions) needs no new layout.
	for _, b := range [][]byte{bucketJobs, bucketStates, bucketLogs, bucketJournal, bucketHosts, bucketMeta, bucketTypes, bucketRevoked,
		bucketStateTypes, bucketSwitches, bucketSwitchOpen, bucketSwitchEnded, bucketSwitchHost, bucketOwners, bucketTokens} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return fmt.Errorf("create bucket %s: %w", b, err)
		}
	}
	if err := createNested(tx); err != nil {
		return err
	}
	if layout == 1 {
		// Layout 2 indexes the jobs by type.
		types := tx.Bucket(bucketTypes)
		err := tx.Bucket(bucketJobs).ForEach(func(k, _ []byte) error {
			j, err := getJob(tx, string(k))
			if err != nil {
				return fmt.Errorf("migrate to layout 2: %w", err)
			}
			return types.Put(typeKey(j.Type, j.ID), nil)
		})
		if err != nil {
			return err
		}
	}
	if layout < 3 {
		// Layout 3 indexes the jobs by state and type, from the two
		// indexes (no record is decoded: a damaged one is listed as before).
		typeOf := map[string]string{}
		err := tx.Bucket(bucketTypes).ForEach(func(k, _ []byte) error {
			typ, id, _ := bytes.Cut(k, []byte("/"))
			typeOf[string(id)] = string(typ)
			return nil
		})
		if err != nil {
			return err
		}
		st := tx.Bucket(bucketStateTypes)
		err = tx.Bucket(bucketStates).ForEach(func(k, _ []byte) error {
			state, id, _ := bytes.Cut(k, []byte("/"))
			typ, ok := typeOf[string(id)]
			if !ok {
				return nil
			}
			return st.Put(stateTypeKey(JobState(state), typ, string(id)), nil)
		})
		if err != nil {
			return fmt.Errorf("migrate to layout 3: %w", err)
		}
	}
	if layout < Layout {
		return tx.Bucket(bucketMeta).Put(keyLayout, u64(Layout))
	}
	return nil
}

// metaLayout reads the layout recorded in meta; 0 when there is none.
func metaLayout(meta kv.Bucket) uint64 {
	if meta == nil {
		return 0
	}
	if v := meta.Get(keyLayout); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// Layout returns the layout the store's file records.
func (s *Store) Layout() (int, error) {
	var v uint64
	err := s.view(context.Background(), func(tx kv.Tx) error {
		v = metaLayout(tx.Bucket(bucketMeta))
		return nil
	})
	return int(v), err
}

func typeKey(typ, id string) []byte { return []byte(typ + "/" + id) }

func stateTypeKey(st JobState, typ, id string) []byte {
	return []byte(string(st) + "/" + typ + "/" + id)
}

func jobID(n uint64) string { return fmt.Sprintf("j-%012d", n) }

func stateKey(st JobState, id string) []byte { return []byte(string(st) + "/" + id) }

func u64(n uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], n)
	return k[:]
}

func (s *Store) stamp() time.Time { return s.now().UTC() }

func getJob(tx kv.Tx, id string) (Job, error) {
	v := tx.Bucket(bucketJobs).Get([]byte(id))
	if v == nil {
		return Job{}, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	var j Job
	if err := json.Unmarshal(v, &j); err != nil {
		return Job{}, fmt.Errorf("decode job %q: %w: %w", id, ErrCorrupt, err)
	}
	return j, nil
}

func putJob(tx kv.Tx, j Job) error {
	v, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("encode job %q: %w", j.ID, err)
	}
	if err := tx.Bucket(bucketJobs).Put([]byte(j.ID), v); err != nil {
		return fmt.Errorf("write job %q: %w", j.ID, err)
	}
	return nil
}

// SubmitJob records a new job of type typ with its job file spec in state
// queued, with the transition "" → queued carrying reason, and returns it
// once it is on disk. IDs increase with every submission and sort in
// submission order. spec must be valid JSON.
func (s *Store) SubmitJob(ctx context.Context, typ string, spec json.RawMessage, reason string) (Job, error) {
	return s.SubmitJobBy(ctx, "", typ, spec, reason)
}

// SubmitJobBy is SubmitJob of a job that owner submits ("": the
// daemon's own).
func (s *Store) SubmitJobBy(ctx context.Context, owner, typ string, spec json.RawMessage, reason string) (Job, error) {
	if typ == "" {
		return Job{}, fmt.Errorf("submit job: empty type: %w", ErrInvalid)
	}
	if !json.Valid(spec) {
		return Job{}, fmt.Errorf("submit job: spec is not valid json: %w", ErrInvalid)
	}
	spec = slices.Clone(spec)
	var j Job
	err := s.batch(ctx, func(tx kv.Tx) error {
		var err error
		j, err = s.putNewJob(tx, owner, typ, spec, reason, s.stamp())
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("submit job: %w", err)
	}
	s.count(Queued, 1)
	return j, nil
}

// putNewJob records a new queued job in tx and indexes it.
func (s *Store) putNewJob(tx kv.Tx, owner, typ string, spec json.RawMessage, reason string, now time.Time) (Job, error) {
	n, err := tx.Bucket(bucketJobs).NextSequence()
	if err != nil {
		return Job{}, fmt.Errorf("next job id: %w", err)
	}
	j := Job{
		ID:          jobID(n),
		Type:        typ,
		Owner:       owner,
		Spec:        spec,
		State:       Queued,
		Submitted:   now,
		Transitions: []Transition{{From: "", To: Queued, At: now, Reason: reason}},
	}
	if err := putJob(tx, j); err != nil {
		return Job{}, err
	}
	if err := tx.Bucket(bucketTypes).Put(typeKey(typ, j.ID), nil); err != nil {
		return Job{}, err
	}
	if owner != "" {
		if err := tx.Bucket(bucketOwners).Put(typeKey(owner, j.ID), nil); err != nil {
			return Job{}, err
		}
	}
	if err := tx.Bucket(bucketStateTypes).Put(stateTypeKey(Queued, typ, j.ID), nil); err != nil {
		return Job{}, err
	}
	return j, tx.Bucket(bucketStates).Put(stateKey(Queued, j.ID), nil)
}

// count adds n to the jobs in state st.
func (s *Store) count(st JobState, n int) {
	s.countMu.Lock()
	s.counts[st] += n
	s.countMu.Unlock()
}

// Counts returns the number of jobs in each state (every state present,
// zero or not). It reads no file: the counts are kept in memory.
func (s *Store) Counts() map[JobState]int {
	s.countMu.Lock()
	defer s.countMu.Unlock()
	out := make(map[JobState]int, len(States))
	for _, st := range States {
		out[st] = s.counts[st]
	}
	return out
}

// Recent returns the n jobs submitted last, newest first.
func (s *Store) Recent(ctx context.Context, n int) ([]Job, error) {
	if n < 0 {
		return nil, fmt.Errorf("recent jobs: negative count %d: %w", n, ErrInvalid)
	}
	out := []Job{}
	err := s.view(ctx, func(tx kv.Tx) error {
		c := tx.Bucket(bucketJobs).Cursor()
		for k, _ := c.Last(); k != nil && len(out) < n; k, _ = c.Prev() {
			j, err := getJob(tx, string(k))
			if errors.Is(err, ErrCorrupt) {
				s.corrupt(string(k), err)
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recent jobs: %w", err)
	}
	return out, nil
}

// Change is one change of a job, committed in one transaction by Commit:
// the transition From → To with its Reason (no transition when From equals
// To), the daemon's record of the job (Data; nil keeps the one it has) and
// its command's exit code (ExitCode; nil keeps the one it has).
type Change struct {
	From, To JobState
	Reason   string
	Data     json.RawMessage
	ExitCode *int
}

// Commit applies c to job id in one transaction and returns the job once
// it is on disk. It is a compare-and-set: if the job is not in state
// c.From it returns ErrConflict together with the job as it is, and
// changes nothing. A transition the lifecycle does not allow, or data that
// is not JSON, fails with ErrInvalid; an unknown id with ErrNotFound. A
// change that keeps the state (c.From = c.To) updates the data and exit
// code; with a reason it is also in the job's transitions, from the state
// to itself (a running job that lost a worker VM and went on).
func (s *Store) Commit(ctx context.Context, id string, c Change) (Job, error) {
	moves := c.From != c.To
	if moves && !CanTransition(c.From, c.To) {
		return Job{}, fmt.Errorf("job %s: transition from %q to %q is not allowed: %w", id, c.From, c.To, ErrInvalid)
	}
	if !moves && !c.From.Valid() {
		return Job{}, fmt.Errorf("job %s: unknown state %q: %w", id, c.From, ErrInvalid)
	}
	if c.Data != nil && !json.Valid(c.Data) {
		return Job{}, fmt.Errorf("job %s: data is not valid json: %w", id, ErrInvalid)
	}
	data := slices.Clone(c.Data)
	var (
		j       Job
		refusal error // reported without failing the shared transaction
	)
	err := s.batch(ctx, func(tx kv.Tx) error {
		var err error
		refusal = nil
		j, err = getJob(tx, id)
		if errors.Is(err, ErrNotFound) {
			refusal = err
			return nil
		}
		if err != nil {
			return err
		}
		if j.State != c.From {
			refusal = fmt.Errorf("job %s is %s, not %s: %w", id, j.State, c.From, ErrConflict)
			return nil
		}
		if data != nil {
			j.Data = data
		}
		if c.ExitCode != nil {
			code := *c.ExitCode
			j.ExitCode = &code
		}
		switch {
		case moves:
			j.State = c.To
			j.Transitions = append(j.Transitions, Transition{From: c.From, To: c.To, At: s.stamp(), Reason: c.Reason})
		case c.Reason != "":
			// An event within the state (a running job lost a worker
			// VM): in the history, the state stays.
			j.Transitions = append(j.Transitions, Transition{From: c.From, To: c.From, At: s.stamp(), Reason: c.Reason})
		}
		if err := putJob(tx, j); err != nil {
			return err
		}
		if !moves {
			return nil
		}
		idx := tx.Bucket(bucketStates)
		if err := idx.Delete(stateKey(c.From, id)); err != nil {
			return err
		}
		if err := idx.Put(stateKey(c.To, id), nil); err != nil {
			return err
		}
		st := tx.Bucket(bucketStateTypes)
		if err := st.Delete(stateTypeKey(c.From, j.Type, id)); err != nil {
			return err
		}
		return st.Put(stateTypeKey(c.To, j.Type, id), nil)
	})
	if err != nil {
		return Job{}, fmt.Errorf("commit job %s: %w", id, err)
	}
	if refusal != nil {
		return j, refusal
	}
	if moves {
		s.count(c.From, -1)
		s.count(c.To, 1)
	}
	return j, nil
}

// Transition is Commit of a transition alone: job id from state from to
// state to, with the time and reason recorded.
func (s *Store) Transition(ctx context.Context, id string, from, to JobState, reason string) (Job, error) {
	if from == to {
		return Job{}, fmt.Errorf("job %s: transition from %q to itself: %w", id, from, ErrInvalid)
	}
	return s.Commit(ctx, id, Change{From: from, To: to, Reason: reason})
}

// Job returns job id, or ErrNotFound.
func (s *Store) Job(ctx context.Context, id string) (Job, error) {
	var j Job
	err := s.view(ctx, func(tx kv.Tx) error {
		var err error
		j, err = getJob(tx, id)
		return err
	})
	if err != nil {
		return Job{}, fmt.Errorf("get job: %w", err)
	}
	return j, nil
}

// OwnsJob reports whether owner submitted job id: one seek in the index
// of the owners' jobs, the same work whether the job exists or not, so
// that the answer of another's job and of no job take alike.
func (s *Store) OwnsJob(ctx context.Context, owner, id string) (bool, error) {
	var owns bool
	err := s.view(ctx, func(tx kv.Tx) error {
		key := typeKey(owner, id)
		k, _ := tx.Bucket(bucketOwners).Cursor().Seek(key)
		owns = bytes.Equal(k, key)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("job owner: %w", err)
	}
	return owns, nil
}

// JobFilter selects jobs for Jobs. The zero value selects every job.
type JobFilter struct {
	// States keeps the jobs in any of these states; empty keeps all.
	States []JobState
	// Type keeps the jobs of this type; empty keeps all.
	Type string
	// Owner keeps the jobs this owner submitted; empty keeps all.
	Owner string
	// After keeps the jobs whose ID sorts after it, for paging.
	After string
	// Limit caps the number of jobs returned; 0 means no limit.
	Limit int
}

// Jobs returns the jobs f selects, ordered by ID (submission order). A
// page costs what it holds, whatever the number of jobs: it reads the jobs
// bucket, or the index of the type, or one index cursor per state (of the
// state and type when both are given) from After on, merged in ID order,
// and decodes only the jobs it returns. With an owner it reads the index
// of the owner's jobs and skips those of other states or types: a page
// costs the owner's jobs it passes over.
func (s *Store) Jobs(ctx context.Context, f JobFilter) ([]Job, error) {
	for _, st := range f.States {
		if !st.Valid() {
			return nil, fmt.Errorf("list jobs: unknown state %q: %w", st, ErrInvalid)
		}
	}
	if f.Limit < 0 {
		return nil, fmt.Errorf("list jobs: negative limit %d: %w", f.Limit, ErrInvalid)
	}
	var out []Job
	err := s.view(ctx, func(tx kv.Tx) error {
		var scans []*indexScan
		switch {
		case f.Owner != "":
			scans = append(scans, s.scan(tx.Bucket(bucketOwners), f.Owner+"/", f.After))
		case len(f.States) > 0:
			states := slices.Clone(f.States)
			slices.Sort(states)
			for _, st := range slices.Compact(states) {
				if f.Type == "" {
					scans = append(scans, s.scan(tx.Bucket(bucketStates), string(st)+"/", f.After))
				} else {
					scans = append(scans, s.scan(tx.Bucket(bucketStateTypes), string(st)+"/"+f.Type+"/", f.After))
				}
			}
		case f.Type != "":
			scans = append(scans, s.scan(tx.Bucket(bucketTypes), f.Type+"/", f.After))
		default:
			scans = append(scans, s.scan(tx.Bucket(bucketJobs), "", f.After))
		}
		for f.Limit == 0 || len(out) < f.Limit {
			id := nextID(scans)
			if id == nil {
				return nil
			}
			s.visits.Add(1)
			j, err := getJob(tx, string(id))
			if errors.Is(err, ErrCorrupt) {
				s.corrupt(string(id), err)
				continue
			}
			if err != nil {
				return err
			}
			if f.Owner != "" && (f.Type != "" && j.Type != f.Type || len(f.States) > 0 && !slices.Contains(f.States, j.State)) {
				continue
			}
			out = append(out, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

// indexScan walks the keys PREFIX+ID of a bucket in ID order, from the
// first ID after a given one: the jobs bucket (no prefix) or an index.
type indexScan struct {
	c      kv.Cursor
	prefix []byte
	id     []byte // the current ID; nil at the end
	visits *atomic.Uint64
}

func (s *Store) scan(b kv.Bucket, prefix, after string) *indexScan {
	sc := &indexScan{c: b.Cursor(), prefix: []byte(prefix), visits: &s.visits}
	// Keys are PREFIX+ID, so key order past the prefix is ID order.
	sc.set(sc.c.Seek([]byte(prefix + after)))
	if sc.id != nil && string(sc.id) == after {
		sc.next()
	}
	return sc
}

func (sc *indexScan) set(k, _ []byte) {
	sc.id = nil
	if k != nil && bytes.HasPrefix(k, sc.prefix) {
		sc.visits.Add(1)
		sc.id = k[len(sc.prefix):]
	}
}

func (sc *indexScan) next() { sc.set(sc.c.Next()) }

// nextID takes the smallest current ID of the scans and moves its scan on;
// nil when every scan is at its end. A job is in one state at a time, so
// two scans never hold the same ID.
func nextID(scans []*indexScan) []byte {
	var low *indexScan
	for _, sc := range scans {
		if sc.id != nil && (low == nil || bytes.Compare(sc.id, low.id) < 0) {
			low = sc
		}
	}
	if low == nil {
		return nil
	}
	id := slices.Clone(low.id)
	low.next()
	return id
}

// AppendLog adds line (kept as given; add the newline yourself) to job id's
// captured output. Only the last Options.MaxLogBytes of each job's output
// are kept. The job must exist.
func (s *Store) AppendLog(ctx context.Context, id string, line []byte) error {
	if len(line) == 0 {
		return nil
	}
	if len(line) > s.maxLog {
		line = line[len(line)-s.maxLog:]
	}
	line = slices.Clone(line)
	var missing error
	err := s.batch(ctx, func(tx kv.Tx) error {
		missing = nil
		if tx.Bucket(bucketJobs).Get([]byte(id)) == nil {
			missing = fmt.Errorf("job %q: %w", id, ErrNotFound)
			return nil
		}
		return s.appendLogTx(tx, id, line)
	})
	if err != nil {
		return fmt.Errorf("append log of job %s: %w", id, err)
	}
	return missing
}

// appendLogTx adds line to job id's output in tx, dropping the oldest
// output beyond Options.MaxLogBytes.
func (s *Store) appendLogTx(tx kv.Tx, id string, line []byte) error {
	if len(line) > s.maxLog {
		line = line[len(line)-s.maxLog:]
	}
	b, err := tx.Bucket(bucketLogs).CreateBucketIfNotExists([]byte(id))
	if err != nil {
		return err
	}
	var size uint64
	if v := b.Get(keyLogSize); v != nil {
		size = binary.BigEndian.Uint64(v)
	}
	n, err := b.NextSequence()
	if err != nil {
		return err
	}
	if err := b.Put(u64(n), line); err != nil {
		return err
	}
	size += uint64(len(line))
	// Drop the oldest chunks, cutting the last dropped one, until the
	// total is within bounds. Keys are collected first: deleting under
	// a moving cursor can skip keys.
	var drop [][]byte
	var cutKey, cutVal []byte
	c := b.Cursor()
	for k, v := c.First(); size > uint64(s.maxLog) && k != nil; k, v = c.Next() {
		if bytes.Equal(k, keyLogSize) {
			continue
		}
		excess := size - uint64(s.maxLog)
		if uint64(len(v)) <= excess {
			drop = append(drop, slices.Clone(k))
			size -= uint64(len(v))
			continue
		}
		cutKey, cutVal = slices.Clone(k), slices.Clone(v[excess:])
		size -= excess
	}
	for _, k := range drop {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	if cutKey != nil {
		if err := b.Put(cutKey, cutVal); err != nil {
			return err
		}
	}
	return b.Put(keyLogSize, u64(size))
}

// Logs returns job id's kept output, oldest first.
func (s *Store) Logs(ctx context.Context, id string) ([]byte, error) {
	var out []byte
	err := s.view(ctx, func(tx kv.Tx) error {
		if tx.Bucket(bucketJobs).Get([]byte(id)) == nil {
			return fmt.Errorf("job %q: %w", id, ErrNotFound)
		}
		b := tx.Bucket(bucketLogs).Bucket([]byte(id))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if !bytes.Equal(k, keyLogSize) {
				out = append(out, v...)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read logs: %w", err)
	}
	return out, nil
}

// SetHost records v (opaque: pool assignment, stranded mark) for host. A
// nil v deletes the host's record.
func (s *Store) SetHost(ctx context.Context, host string, v []byte) error {
	if host == "" {
		return fmt.Errorf("set host: empty name: %w", ErrInvalid)
	}
	v = slices.Clone(v)
	err := s.batch(ctx, func(tx kv.Tx) error {
		b := tx.Bucket(bucketHosts)
		if v == nil {
			return b.Delete([]byte(host))
		}
		return b.Put([]byte(host), v)
	})
	if err != nil {
		return fmt.Errorf("set host %s: %w", host, err)
	}
	return nil
}

// Hosts returns every host's recorded value.
func (s *Store) Hosts(ctx context.Context) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.view(ctx, func(tx kv.Tx) error {
		return tx.Bucket(bucketHosts).ForEach(func(k, v []byte) error {
			out[string(k)] = slices.Clone(v)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read hosts: %w", err)
	}
	return out, nil
}

// Token returns the API bearer token, generating it on first use from 32
// random bytes (base64url, no padding) and keeping it from then on.
func (s *Store) Token(ctx context.Context) (string, error) {
	var tok string
	err := s.view(ctx, func(tx kv.Tx) error {
		tok = string(tx.Bucket(bucketMeta).Get(keyToken))
		return nil
	})
	if err != nil || tok != "" {
		return tok, wrapToken(err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", wrapToken(err)
	}
	fresh := base64.RawURLEncoding.EncodeToString(raw[:])
	err = s.update(ctx, func(tx kv.Tx) error {
		b := tx.Bucket(bucketMeta)
		if v := b.Get(keyToken); v != nil { // another caller was first
			tok = string(v)
			return nil
		}
		tok = fresh
		return b.Put(keyToken, []byte(fresh))
	})
	if err != nil {
		return "", wrapToken(err)
	}
	return tok, nil
}

func wrapToken(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("api token: %w", err)
}

// RevokeSession records that the dashboard session id is revoked until
// it expires, and drops the revocations of sessions that have expired
// (so that the list never grows beyond the sessions of SessionTTL).
func (s *Store) RevokeSession(ctx context.Context, id string, expires time.Time) error {
	if id == "" {
		return fmt.Errorf("revoke session: empty id: %w", ErrInvalid)
	}
	now := s.now().Unix()
	err := s.batch(ctx, func(tx kv.Tx) error {
		b := tx.Bucket(bucketRevoked)
		var old [][]byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) <= now {
				old = append(old, slices.Clone(k))
			}
		}
		for _, k := range old {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return b.Put([]byte(id), u64(uint64(expires.Unix())))
	})
	if err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// RevokedSessions returns the revoked sessions that have not expired, with
// their expiry.
func (s *Store) RevokedSessions(ctx context.Context) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	now := s.now().Unix()
	err := s.view(ctx, func(tx kv.Tx) error {
		return tx.Bucket(bucketRevoked).ForEach(func(k, v []byte) error {
			if len(v) == 8 {
				if exp := int64(binary.BigEndian.Uint64(v)); exp > now {
					out[string(k)] = time.Unix(exp, 0)
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("revoked sessions: %w", err)
	}
	return out, nil
}

// corrupt reports a record a listing skipped.
func (s *Store) corrupt(id string, err error) {
	if s.onCorrupt != nil {
		s.onCorrupt(id, err)
	}
}
