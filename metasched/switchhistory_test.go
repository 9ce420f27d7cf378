package metasched_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
)

// switchAndWait asks for a switch of a host from one pool to another and
// waits until it has ended.
func switchAndWait(t *testing.T, d *metasched.Daemon, from, to string) api.SwitchView {
	t.Helper()
	sv, err := d.RequestSwitch(context.Background(), from, to)
	if err != nil {
		t.Fatal(err)
	}
	var final api.SwitchView
	waitFor(t, "switch "+sv.ID+" to end", 30*time.Second, func() bool {
		for _, s := range allSwitches(t, d) {
			if s.ID == sv.ID && s.Final {
				final = s
				return true
			}
		}
		return false
	})
	return final
}

func switchIDs(sws []api.SwitchView) []string {
	out := []string{}
	for _, s := range sws {
		out = append(out, s.ID)
	}
	return out
}

// Switch IDs go on after a restart, from the store, and the switches of
// the run before are still listed; the daemon keeps in memory only the
// switches that are open (before, the coordinator held every switch ever
// made, and each tick of the cluster manager went through all of them).
func TestSwitchIDsAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		edit := func(c *metasched.Config) {
			c.DataDir = dir
			c.Policy = metasched.PolicyConfig{Name: "none"}
		}
		td := startDaemon(t, metasched.Options{}, edit)
		for _, p := range [][2]string{{"render", "sim"}, {"sim", "etl"}, {"etl", "render"}} {
			if sw := switchAndWait(t, td.d, p[0], p[1]); sw.Phase != "done" {
				t.Fatalf("switch %s ended %s: %s", sw.ID, sw.Phase, sw.Reason)
			}
		}
		// A switch is listed final once its record is in the store; the
		// coordinator forgets it right after.
		waitFor(t, "the coordinator to hold no switch", 30*time.Second, func() bool { return td.d.HeldSwitches() == 0 })
		td.stop()

		td = startDaemon(t, metasched.Options{}, edit)
		if ids := switchIDs(allSwitches(t, td.d)); !slices.Equal(ids, []string{"s-000003", "s-000002", "s-000001"}) {
			t.Errorf("switches after the restart: %v", ids)
		}
		if sw := switchAndWait(t, td.d, "render", "etl"); sw.ID != "s-000004" {
			t.Errorf("the first switch after the restart is %s, want s-000004", sw.ID)
		}
		if ids := switchIDs(allSwitches(t, td.d)); !slices.Equal(ids, []string{"s-000004", "s-000003", "s-000002", "s-000001"}) {
			t.Errorf("switches: %v", ids)
		}
		// A switch is listed final once its record is in the store; the
		// coordinator forgets it right after.
		waitFor(t, "the coordinator to hold no switch", 30*time.Second, func() bool { return td.d.HeldSwitches() == 0 })
	})
}

// Finished switches are kept within the retention (here the 2 newest):
// the housekeeping drops the older ones once they ended more than a
// minute ago, those that ended first first, never a stranded host's switch
// that is not cleared, and the IDs go on after the highest even when it is
// gone.
// GET /v1/switches pages with limit and before.
func TestSwitchRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		f := &faults{fail: map[metasched.FaultPoint]error{}}
		injected := fmt.Errorf("test: %w", metasched.ErrInjected)
		edit := func(c *metasched.Config) {
			c.DataDir = dir
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Retention = metasched.RetentionConfig{SwitchMaxCount: 2, JobDirs: time.Hour}
		}
		td := startDaemon(t, metasched.Options{Fault: f.hook, StepTimeout: 700 * time.Millisecond}, edit)
		d := td.d
		f.set(metasched.FaultCommitAdd, injected)
		f.set(metasched.FaultRevert, injected)
		stranded := switchAndWait(t, d, "render", "sim")
		if stranded.Phase != "stranded" {
			t.Fatalf("switch %s ended %s, want stranded", stranded.ID, stranded.Phase)
		}
		f.set(metasched.FaultCommitAdd, nil)
		f.set(metasched.FaultRevert, nil)
		for _, p := range [][2]string{{"sim", "etl"}, {"etl", "sim"}, {"sim", "etl"}} {
			switchAndWait(t, d, p[0], p[1])
		}
		if ids := switchIDs(allSwitches(t, d)); len(ids) != 4 {
			t.Fatalf("before the housekeeping: %v", ids)
		}
		time.Sleep(2 * time.Minute) // the housekeeping runs every minute
		if ids := switchIDs(allSwitches(t, d)); !slices.Equal(ids, []string{"s-000004", "s-000003", "s-000001"}) {
			t.Errorf("after the housekeeping: %v, want the 2 newest finished and the stranded one", ids)
		}
		if n := d.HeldSwitches(); n != 1 {
			t.Errorf("the coordinator holds %d switches, want 1 (the stranded one)", n)
		}

		// Pages through the API: limit and before.
		c := apiClientOf(td)
		page, err := c.Switches(context.Background(), clientSwitches(false, "", 2))
		if err != nil || !slices.Equal(switchIDs(page.Switches), []string{"s-000004", "s-000003"}) || page.Next != "s-000003" {
			t.Errorf("first page: %v next %q (%v)", switchIDs(page.Switches), page.Next, err)
		}
		page, err = c.Switches(context.Background(), clientSwitches(false, page.Next, 2))
		if err != nil || !slices.Equal(switchIDs(page.Switches), []string{"s-000001"}) || page.Next != "" {
			t.Errorf("second page: %v next %q (%v)", switchIDs(page.Switches), page.Next, err)
		}
		active, err := c.Switches(context.Background(), clientSwitches(true, "", 0))
		if err != nil || !slices.Equal(switchIDs(active.Switches), []string{"s-000001"}) {
			t.Errorf("active: %v (%v)", switchIDs(active.Switches), err)
		}

		// Cleared, the stranded switch is over: it goes too once beyond
		// the retention.
		if _, err := d.ClearHost(context.Background(), stranded.Host, ""); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		if ids := switchIDs(allSwitches(t, d)); !slices.Equal(ids, []string{"s-000004", "s-000001"}) {
			t.Errorf("after clearing the stranded host: %v, want the 2 that ended last", ids)
		}
		td.stop()

		// The highest switch dropped too (1 kept: s-000001, which ended
		// last, at its clear): the IDs still go on after it.
		edit2 := func(c *metasched.Config) {
			edit(c)
			c.Retention.SwitchMaxCount = 1
		}
		td = startDaemon(t, metasched.Options{}, edit2)
		time.Sleep(2 * time.Minute)
		if ids := switchIDs(allSwitches(t, td.d)); !slices.Equal(ids, []string{"s-000001"}) {
			t.Errorf("after a restart with 1 kept: %v", ids)
		}
		if sw := switchAndWait(t, td.d, "etl", "render"); sw.ID != "s-000005" {
			t.Errorf("the next switch is %s, want s-000005", sw.ID)
		}
	})
}

// A store of layout 2 (written by the code before, with a journal record
// per step) starts: its journal is converted into the last record of each
// switch, the stranded host stays stranded, and the IDs go on after the
// highest.
func TestSwitchJournalConverted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		copyTo(t, filepath.Join("store", "testdata", "layout2.db"), filepath.Join(dir, "metasched.db"))
		td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
			c.DataDir = dir
			c.Policy = metasched.PolicyConfig{Name: "none"}
		})
		got := map[string]string{}
		for _, s := range allSwitches(t, td.d) {
			got[s.ID] = s.Phase + " " + s.Host
		}
		want := map[string]string{"s-000001": "done latam-a-0", "s-000002": "cancelled ", "s-000003": "rolled_back latam-a-2",
			"s-000004": "done latam-b-0", "s-000005": "stranded latam-a-0"}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("switch %s: %q, want %q", id, got[id], w)
			}
		}
		if pool, state := poolOf(td.d, "latam-a-0"); state != api.HostStranded {
			t.Errorf("latam-a-0 is %s in pool %q, want stranded", state, pool)
		}
		if sw := switchAndWait(t, td.d, "etl", "render"); sw.ID != "s-000006" {
			t.Errorf("the next switch is %s, want s-000006", sw.ID)
		}
	})
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close() // read-only
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// apiClientOf is a client of the test daemon's API.
func apiClientOf(td *testDaemon) *client.Client {
	return client.New(td.addr, td.d.Token()).WithHTTPClient(td.http)
}

func clientSwitches(active bool, before string, limit int) client.SwitchesQuery {
	return client.SwitchesQuery{Active: active, Before: before, Limit: limit}
}
