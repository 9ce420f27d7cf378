package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func closedAt(num uint64, host string, at time.Time) SwitchRecord {
	return SwitchRecord{Num: num, Host: host, Ended: at, Data: []byte(fmt.Sprintf("switch %d closed", num))}
}

func openSwitch(num uint64, host string) SwitchRecord {
	return SwitchRecord{Num: num, Host: host, Open: true, Data: []byte(fmt.Sprintf("switch %d open", num))}
}

func nums(rs []SwitchRecord) []uint64 {
	out := []uint64{}
	for _, r := range rs {
		out = append(out, r.Num)
	}
	return out
}

func put(t *testing.T, s *Store, rs ...SwitchRecord) {
	t.Helper()
	for _, r := range rs {
		if err := s.PutSwitch(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// A switch's last record replaces the one before; listings are newest
// first and paged; a restart gets the open switches and the last switch of
// each host, and nothing else.
func TestSwitchRecords(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metasched.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.SwitchSeq(ctx); err != nil || n != 0 {
		t.Errorf("a new store's switch sequence: %d %v", n, err)
	}
	put(t, s,
		openSwitch(1, ""), openSwitch(1, "h1"), closedAt(1, "h1", t0), // done on h1
		openSwitch(2, ""), closedAt(2, "", t0.Add(time.Second)), // cancelled before a host was chosen
		openSwitch(3, "h2"),                      // in flight on h2
		closedAt(4, "h1", t0.Add(3*time.Second)), // h1's last
		openSwitch(5, ""),                        // releasing
		closedAt(7, "h3", t0.Add(2*time.Second)), // numbers need not be dense
	)
	all, err := s.Switches(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{7, 5, 4, 3, 2, 1}, nums(all)); diff != "" {
		t.Errorf("every switch, newest first (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(closedAt(1, "h1", t0), all[5]); diff != "" {
		t.Errorf("switch 1 is its last record (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		before uint64
		limit  int
		want   []uint64
	}{
		{0, 2, []uint64{7, 5}},
		{5, 2, []uint64{4, 3}},
		{3, 0, []uint64{2, 1}},
		{6, 1, []uint64{5}},   // a number without a switch
		{100, 1, []uint64{7}}, // beyond the newest
		{1, 5, []uint64{}},
	} {
		page, err := s.Switches(ctx, tc.before, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, nums(page)); diff != "" {
			t.Errorf("before %d, limit %d (-want +got):\n%s", tc.before, tc.limit, diff)
		}
	}
	if _, err := s.Switches(ctx, 0, -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("a negative limit: %v", err)
	}
	// Open: 3 and 5; the hosts' last: 4 (h1, not 1), 3 (h2), 7 (h3).
	restore, err := s.RestoreSwitches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{3, 4, 5, 7}, nums(restore)); diff != "" {
		t.Errorf("what a restart reads (-want +got):\n%s", diff)
	}
	n, err := s.ClosedSwitches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Errorf("%d closed switches, want 4 (1, 2, 4, 7)", n)
	}
	for _, bad := range []SwitchRecord{{Num: 0, Open: true}, {Num: 9}, {Num: 9, Ended: time.Unix(0, 0)}} {
		if err := s.PutSwitch(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("put %+v: %v, want ErrInvalid", bad, err)
		}
	}
	s = reopen(t, s, path)
	defer s.Close() // every write is committed: closing loses nothing
	if n, err := s.SwitchSeq(ctx); err != nil || n != 7 {
		t.Errorf("switch sequence after a reopen: %d %v, want 7", n, err)
	}
	again, err := s.Switches(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(all, again) {
		t.Errorf("switches after a reopen: %v, want %v", nums(again), nums(all))
	}
}

// Trimming drops closed switches by age and by count, those that ended
// first first, never an open one nor one that ended at or after Keep, and
// keeps the sequence; a host whose last switch is dropped is no longer
// restored.
func TestTrimSwitches(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "metasched.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	// Switches 1..10 end a minute apart, in the order 2, 1, 3, 4, ...;
	// 11 is open, on host h-open.
	for n := uint64(1); n <= 10; n++ {
		at := t0.Add(time.Duration(n) * time.Minute)
		switch n {
		case 1:
			at = t0.Add(2 * time.Minute)
		case 2:
			at = t0.Add(time.Minute)
		}
		put(t, s, closedAt(n, fmt.Sprintf("h%d", n%3), at))
	}
	put(t, s, openSwitch(11, "h-open"))
	open11 := true

	trim := func(tr SwitchTrim, want int) {
		t.Helper()
		n, err := s.TrimSwitches(ctx, tr)
		if err != nil || n != want {
			t.Errorf("trim %+v: %d dropped (%v), want %d", tr, n, err, want)
		}
	}
	kept := func(want ...uint64) {
		t.Helper()
		all, err := s.Switches(ctx, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(append([]uint64{}, want...), nums(all)); diff != "" {
			t.Errorf("kept (-want +got):\n%s", diff)
		}
		closed := len(want)
		if slices.Contains(want, 11) && open11 {
			closed--
		}
		n, err := s.ClosedSwitches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != closed {
			t.Errorf("%d closed, want %d", n, closed)
		}
	}
	// By age: those that ended before minute 3 (2 at 1, 1 at 2).
	trim(SwitchTrim{EndedBefore: t0.Add(3 * time.Minute)}, 2)
	kept(11, 10, 9, 8, 7, 6, 5, 4, 3)
	// By count: 5 closed at most; the oldest go (3, 4, 5).
	trim(SwitchTrim{MaxCount: 5}, 3)
	kept(11, 10, 9, 8, 7, 6)
	// Keep wins: by count only 2 would stay, but those that ended at or
	// after minute 8 are kept.
	trim(SwitchTrim{MaxCount: 2, Keep: t0.Add(8 * time.Minute)}, 2)
	kept(11, 10, 9, 8)
	// Nothing to do.
	trim(SwitchTrim{MaxCount: 3, EndedBefore: t0}, 0)
	// Everything closed; the open switch stays.
	trim(SwitchTrim{EndedBefore: t0.Add(time.Hour)}, 3)
	kept(11)
	if _, err := s.TrimSwitches(ctx, SwitchTrim{MaxCount: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a negative count: %v", err)
	}
	restore, err := s.RestoreSwitches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{11}, nums(restore)); diff != "" {
		t.Errorf("restored after the trim (-want +got):\n%s", diff)
	}
	s = reopen(t, s, path)
	defer s.Close() // every write is committed: closing loses nothing
	n, err := s.SwitchSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 11 {
		t.Errorf("the sequence after trimming and a reopen: %d, want 11", n)
	}
	// The open switch closes: it is counted and can be trimmed.
	put(t, s, closedAt(11, "h-open", t0.Add(time.Hour)))
	open11 = false
	trim(SwitchTrim{MaxCount: 1}, 0)
	trim(SwitchTrim{EndedBefore: t0.Add(2 * time.Hour)}, 1)
	kept()
}

// A trim larger than one transaction's share goes on in the next.
func TestTrimSwitchesMany(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{NoSync: true})
	n := s.txnItems*2 + 17
	var wg sync.WaitGroup
	for w := range 32 {
		wg.Go(func() {
			for i := w + 1; i <= n; i += 32 {
				if err := s.PutSwitch(ctx, closedAt(uint64(i), "", t0.Add(time.Duration(i)*time.Second))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	dropped, err := s.TrimSwitches(ctx, SwitchTrim{MaxCount: 10})
	if err != nil || dropped != n-10 {
		t.Fatalf("dropped %d (%v), want %d", dropped, err, n-10)
	}
	all, err := s.Switches(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 10 || all[0].Num != uint64(n) || all[9].Num != uint64(n-9) {
		t.Errorf("kept %v, want the 10 newest", nums(all))
	}
}

// journalSwitch is what the conversion of the store's tests reads of a
// record of the switch coordinator.
type journalSwitch struct {
	Switch struct {
		ID        string
		Host      string
		Phase     string
		ClearedTo string
		Updated   time.Time
	}
}

// convertForTest keeps the last record of each switch, as the daemon does.
func convertForTest(recs []JournalRecord) ([]SwitchRecord, error) {
	last := map[uint64]SwitchRecord{}
	for _, r := range recs {
		var js journalSwitch
		if err := json.Unmarshal(r.Data, &js); err != nil {
			return nil, err
		}
		var n uint64
		if _, err := fmt.Sscanf(js.Switch.ID, "s-%d", &n); err != nil {
			return nil, err
		}
		sw := js.Switch
		final := slices.Contains([]string{"done", "cancelled", "rolled_back", "stranded"}, sw.Phase)
		open := !final || (sw.Phase == "stranded" && sw.ClearedTo == "")
		rec := SwitchRecord{Num: n, Host: sw.Host, Open: open, Data: r.Data}
		if !open {
			rec.Ended = sw.Updated
		}
		last[n] = rec
	}
	var out []SwitchRecord
	for _, r := range last {
		out = append(out, r)
	}
	return out, nil
}

// TestMigrateLayout2 opens a store written by the code of layout 2
// (testdata/layout2.db: a daemon's store after five switches, done,
// cancelled, rolled back, done and stranded, and four jobs, three done and
// one provisioning): at layout 3 the jobs are indexed by state and type, and the
// journal is converted once, into the last record of each switch.
func TestMigrateLayout2(t *testing.T) {
	ctx := context.Background()
	path := copyFile(t, filepath.Join("testdata", "layout2.db"))
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Layout(); err != nil || v != Layout {
		t.Errorf("layout after the migration: %d %v, want %d", v, err, Layout)
	}
	for _, tc := range []struct {
		f    JobFilter
		want int
	}{
		{JobFilter{}, 4},
		{JobFilter{States: []JobState{Done}}, 3},
		{JobFilter{States: []JobState{Done}, Type: "sim"}, 1},
		{JobFilter{States: []JobState{Provisioning}, Type: "sim"}, 1},
		{JobFilter{States: []JobState{Provisioning}, Type: "render"}, 0},
		{JobFilter{States: []JobState{Provisioning, Done}, Type: "sim"}, 2},
	} {
		js, err := s.Jobs(ctx, tc.f)
		if err != nil || len(js) != tc.want {
			t.Errorf("jobs %+v: %d (%v), want %d", tc.f, len(js), err, tc.want)
		}
	}
	journal, err := s.Journal(ctx)
	if err != nil || len(journal) < 5 {
		t.Fatalf("the journal before its conversion: %d records (%v)", len(journal), err)
	}
	n, err := s.ConvertJournal(ctx, func([]JournalRecord) ([]SwitchRecord, error) { return nil, errors.New("test: refused") })
	if err == nil || n != 0 {
		t.Errorf("a failed conversion: %d %v", n, err)
	}
	again, err := s.Journal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != len(journal) {
		t.Errorf("a failed conversion left %d journal records of %d", len(again), len(journal))
	}
	if n, err = s.ConvertJournal(ctx, convertForTest); err != nil || n != len(journal) {
		t.Fatalf("converted %d records (%v), want %d", n, err, len(journal))
	}
	left, err := s.Journal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d journal records left after the conversion", len(left))
	}
	all, err := s.Switches(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{5, 4, 3, 2, 1}, nums(all)); diff != "" {
		t.Errorf("switches (-want +got):\n%s", diff)
	}
	// 5 is stranded on latam-a-0 (open), 1 done on latam-a-0 before it,
	// 3 rolled back on latam-a-2, 4 done on latam-b-0.
	restore, err := s.RestoreSwitches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{3, 4, 5}, nums(restore)); diff != "" {
		t.Errorf("what a restart reads (-want +got):\n%s", diff)
	}
	seq, err := s.SwitchSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seq != 5 {
		t.Errorf("switch sequence %d, want 5", seq)
	}
	s = reopen(t, s, path)
	defer s.Close() // every write is committed: closing loses nothing
	if n, err := s.ConvertJournal(ctx, convertForTest); err != nil || n != 0 {
		t.Errorf("a second conversion: %d %v, want none", n, err)
	}
}
