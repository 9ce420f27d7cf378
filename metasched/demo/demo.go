package demo

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	co "github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/jobfile"
)

// grid is the bundled three-site grid of the demo: the real test of
// Bertogna et al. (004, §4), two small, slow South American clusters and a
// larger, faster one in Spain (the same as examples/grid-paper.yaml).
//
//go:embed grid.yaml
var grid []byte

// Types are the demo's three job types.
var Types = []api.JobType{
	{Name: "render", VCPUs: 2, MemoryMiB: 2048, HoldingCost: 2},
	{Name: "sim", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1},
	{Name: "etl", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1},
}

// Config is the configuration `metasched serve` runs with no flags: the
// bundled grid, in-process agents on the libvirt test driver with a small
// switch delay, the heuristic policy and the emulated executor.
func Config(dataDir, listen string) (*metasched.Config, *graph.Grid, error) {
	g, err := graph.ParseGrid("demo grid", grid)
	if err != nil {
		return nil, nil, err
	}
	return &metasched.Config{
		Listen: listen, DataDir: dataDir, Grid: "(bundled demo grid)", JobTypes: Types,
		// K = 2 rather than the papers' 5: the demo's demand shifts within
		// seconds, and with K = 5 the pool that was busy keeps its hosts
		// until the new busy pool's queue is ten times longer.
		Policy:      metasched.PolicyConfig{Name: "heuristic", K: 2},
		Executor:    metasched.ExecutorConfig{Name: "emulated", TimeScale: 0.006},
		SwitchDelay: time.Second, OnAgentLoss: "requeue", MinPoolHosts: metasched.DefaultMinHosts,
	}, g, nil
}

// Job is one job of the demo's stream, submitted At after the start.
type Job struct {
	At   time.Duration
	Type string
	Body []byte
}

// Stream is a stream of n jobs of the three demo types, one every gap,
// with a demand shift: in the first 40% most jobs render, then most
// simulate. It is the same for the same seed.
func Stream(n int, gap time.Duration, seed uint64) []Job {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	shapes := map[string]string{
		"render": "tasks: %d\ntask_ops: 1.0e11\ntask_bytes: 2.0e6\nvm: {vcpus: 2, memory_mib: 2048}\n",
		"sim":    "tasks: %d\ntask_ops: 5.0e10\ntask_bytes: 5.0e5\n",
		"etl":    "tasks: %d\ntask_ops: 4.0e10\ntask_bytes: 2.0e7\nefficiency: 0.5\n",
	}
	out := make([]Job, n)
	for i := range out {
		hot := "render"
		if i >= n*2/5 {
			hot = "sim"
		}
		typ := hot
		switch x := r.Float64(); {
		case x < 0.15:
			typ = "etl"
		case x < 0.30 && hot == "sim":
			typ = "render"
		case x < 0.30:
			typ = "sim"
		}
		tasks := 20 + r.IntN(20)
		body := fmt.Sprintf("name: %s-%03d\ntype: %s\n", typ, i+1, typ) + fmt.Sprintf(shapes[typ], tasks)
		out[i] = Job{At: time.Duration(i) * gap, Type: typ, Body: []byte(body)}
	}
	return out
}

// Summary is what a stream of jobs did.
type Summary struct {
	Jobs        map[string]map[api.State]int // type → state → count
	IDs         []string
	MeanWait    map[string]float64 // type → seconds from submission to running
	MeanRun     map[string]float64 // type → seconds running
	Switches    map[string]int     // "from→to" → switches done
	Outcomes    map[string]int     // phase → final switches
	HostsBefore map[string]int     // pool → hosts at the start
	HostsShift  map[string]int     // at the demand shift (the first job of the second phase)
	HostsEnd    map[string]int     // when the last job was submitted
	HostsAfter  map[string]int     // when every job has finished
	// VMsCreated and VMsDestroyed are the daemon's, for every job (the
	// demo's and any other submitted meanwhile) while the demo ran;
	// VMsLeft are the demo's jobs' VMs still on the hosts at its end.
	VMsCreated   int64
	VMsDestroyed int64
	VMsLeft      int
	Seconds      float64
	// Start is when the stream started; Undone the demo's switches that a
	// later one undid within UndoWindow (see Undone).
	Start  time.Time
	Undone []UndonePair
}

// UndoWindow is the time within which a switch that is reversed counts
// as undone (Undone).
const UndoWindow = time.Minute

// UndonePair is a switch done (First) and a later switch done (Then) that
// undid it, with why each was started (the policy's reason).
type UndonePair struct {
	First, Then       api.SwitchView
	FirstWhy, ThenWhy string
}

// Undone lists the switches done that a later switch done undid within
// window. A switch F of host h from pool A to pool B is undone by a later
// switch T from B to A (T started after F) when
//
//   - T moved the same host h back and started less than window after F
//     ended (the host went back to A within the window), or
//   - T moved any host from B to A and started before F ended (the two
//     were in flight at once, in opposite directions).
//
// Each T undoes at most one F, the oldest it can, and each F is undone at
// most once. Switches that did not end done moved no host and count for
// nothing. why gives the reason each switch was started (nil: none).
func Undone(switches []api.SwitchView, window time.Duration, why func(id string) string) []UndonePair {
	var done []api.SwitchView
	for _, sw := range switches {
		if sw.Phase == string(co.PhaseDone) {
			done = append(done, sw)
		}
	}
	slices.SortStableFunc(done, func(a, b api.SwitchView) int { return a.Started.Compare(b.Started) })
	undone := make([]bool, len(done))
	var out []UndonePair
	for j, t := range done {
		for i, f := range done[:j] {
			if undone[i] || f.From != t.To || f.To != t.From || !t.Started.After(f.Started) {
				continue
			}
			sameHost := f.Host != "" && f.Host == t.Host && t.Started.Sub(f.Updated) < window
			if !sameHost && !t.Started.Before(f.Updated) {
				continue
			}
			undone[i] = true
			p := UndonePair{First: f, Then: t}
			if why != nil {
				p.FirstWhy, p.ThenWhy = why(f.ID), why(t.ID)
			}
			out = append(out, p)
			break
		}
	}
	return out
}

// Daemon is what the demo needs of the daemon: its API's submit, jobs,
// pools, switches and VMs, its VM counters, an inventory refresh and why
// each switch was started.
// *metasched.Daemon implements it.
type Daemon interface {
	Submit(ctx context.Context, job jobfile.Request) (api.Job, error)
	Job(ctx context.Context, id string) (api.Job, error)
	Pools() []api.Pool
	Switches(ctx context.Context, f api.SwitchFilter) (api.SwitchList, error)
	VMs() []api.VM
	VMCounts() (created, destroyed int64)
	VMsInHand() int
	Refresh(ctx context.Context)
	SwitchReason(id string) string
}

// Run submits the stream at its times, prints a line of progress every
// five seconds, waits until every job of the stream has finished and
// returns the summary.
func Run(ctx context.Context, d Daemon, stream []Job, progress io.Writer) (Summary, error) {
	start := time.Now()
	sum := Summary{Start: start, Jobs: map[string]map[api.State]int{}, MeanWait: map[string]float64{}, MeanRun: map[string]float64{},
		Switches: map[string]int{}, Outcomes: map[string]int{}, HostsBefore: poolSizes(d), HostsAfter: map[string]int{}}
	created0, destroyed0 := d.VMCounts()
	firstSwitch, err := lastSwitch(ctx, d)
	if err != nil {
		return sum, err
	}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	next := 0
	timer := time.NewTimer(0)
	defer timer.Stop()
	finished := 0 // sum.IDs[:finished] have finished
	for {
		if next < len(stream) {
			select {
			case <-ctx.Done():
				return sum, ctx.Err()
			case <-tick.C:
				printProgress(ctx, d, progress, time.Since(start))
				continue
			case <-timer.C:
			}
			for next < len(stream) && time.Since(start) >= stream[next].At {
				if next == len(stream)*2/5 {
					sum.HostsShift = poolSizes(d)
				}
				j, err := d.Submit(ctx, jobfile.Decode(stream[next].Body))
				if err != nil {
					return sum, fmt.Errorf("demo job %d: %w", next+1, err)
				}
				sum.IDs = append(sum.IDs, j.ID)
				next++
			}
			if next < len(stream) {
				timer.Reset(max(0, stream[next].At-time.Since(start)))
			} else {
				sum.HostsEnd = poolSizes(d)
			}
			continue
		}
		var err error
		if finished, err = allFinished(ctx, d, sum.IDs, finished); err != nil {
			return sum, err
		}
		if finished == len(sum.IDs) {
			break
		}
		select {
		case <-ctx.Done():
			return sum, ctx.Err()
		case <-tick.C:
			printProgress(ctx, d, progress, time.Since(start))
		case <-time.After(100 * time.Millisecond):
		}
	}
	sum.Seconds = time.Since(start).Seconds()
	waits, runs := map[string][]float64{}, map[string][]float64{}
	for _, id := range sum.IDs {
		j, err := d.Job(ctx, id)
		if err != nil {
			return sum, err
		}
		if sum.Jobs[j.Type] == nil {
			sum.Jobs[j.Type] = map[api.State]int{}
		}
		sum.Jobs[j.Type][j.State]++
		var running, end time.Time
		for _, t := range j.Transitions {
			if t.To == api.Running && t.From != api.Running { // not a lost worker
				running = t.At
			}
			if t.To.Terminal() {
				end = t.At
			}
		}
		if !running.IsZero() && !end.IsZero() {
			waits[j.Type] = append(waits[j.Type], running.Sub(j.Submitted).Seconds())
			runs[j.Type] = append(runs[j.Type], end.Sub(running).Seconds())
		}
	}
	for t, w := range waits {
		sum.MeanWait[t], sum.MeanRun[t] = mean(w), mean(runs[t])
	}
	since, err := switchesSince(ctx, d, firstSwitch)
	if err != nil {
		return sum, err
	}
	for _, sw := range since {
		sum.Outcomes[sw.Phase]++
		if sw.Phase == string(co.PhaseDone) {
			sum.Switches[sw.From+"→"+sw.To]++
		}
	}
	sum.Undone = Undone(since, UndoWindow, d.SwitchReason)
	sum.HostsAfter = poolSizes(d)
	// A job is done before its VMs are destroyed: count them once the
	// last destruction has answered.
	for settle := time.Now().Add(time.Minute); d.VMsInHand() > 0 && time.Now().Before(settle); {
		select {
		case <-ctx.Done():
			return sum, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	c, x := d.VMCounts()
	sum.VMsCreated, sum.VMsDestroyed = c-created0, x-destroyed0
	// The demo's VMs still on the hosts: ask the agents now.
	d.Refresh(ctx)
	for _, v := range d.VMs() {
		if slices.Contains(sum.IDs, v.Job) {
			sum.VMsLeft++
		}
	}
	return sum, nil
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// allFinished returns how many jobs of ids, from the first on, are done,
// failed or cancelled; the first from of them are known to be.
func allFinished(ctx context.Context, d Daemon, ids []string, from int) (int, error) {
	for i := from; i < len(ids); i++ {
		j, err := d.Job(ctx, ids[i])
		if err != nil {
			return i, fmt.Errorf("demo job %s: %w", ids[i], err)
		}
		if !j.State.Terminal() {
			return i, nil
		}
	}
	return len(ids), nil
}

// poolSizes counts the hosts serving each pool.
func poolSizes(d Daemon) map[string]int {
	out := map[string]int{}
	for _, p := range d.Pools() {
		out[p.Name] = len(p.Hosts)
	}
	return out
}

// lastSwitch is the number of the newest switch (0: none yet).
func lastSwitch(ctx context.Context, d Daemon) (int, error) {
	l, err := d.Switches(ctx, api.SwitchFilter{Limit: 1})
	if err != nil || len(l.Switches) == 0 {
		return 0, err
	}
	n, _ := co.SwitchIDNumber(co.SwitchID(l.Switches[0].ID))
	return n, nil
}

// switchesSince lists the switches newer than switch number n, page by
// page, newest first.
func switchesSince(ctx context.Context, d Daemon, n int) ([]api.SwitchView, error) {
	var out []api.SwitchView
	f := api.SwitchFilter{}
	for {
		l, err := d.Switches(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, sw := range l.Switches {
			if m, ok := co.SwitchIDNumber(co.SwitchID(sw.ID)); ok && m <= n {
				return out, nil
			}
			out = append(out, sw)
		}
		if l.Next == "" {
			return out, nil
		}
		f.Before = l.Next
	}
}

func printProgress(ctx context.Context, d Daemon, w io.Writer, elapsed time.Duration) {
	pools := d.Pools()
	var q, a int
	var hosts []string
	for _, p := range pools {
		q += p.Queued
		a += p.Active
		hosts = append(hosts, fmt.Sprintf("%s %d", p.Name, len(p.Hosts)))
	}
	inFlight := 0
	if l, err := d.Switches(ctx, api.SwitchFilter{Active: true}); err == nil {
		for _, sw := range l.Switches {
			if !sw.Final {
				inFlight++
			}
		}
	}
	fmt.Fprintf(w, "%5.0fs  jobs: %d queued, %d active  hosts: %s  switches in flight: %d\n",
		elapsed.Seconds(), q, a, strings.Join(hosts, ", "), inFlight)
}

// Print writes the summary for a person.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "\ndemo summary: %d jobs in %.0fs\n", len(s.IDs), s.Seconds)
	types := make([]string, 0, len(s.Jobs))
	for t := range s.Jobs {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		c := s.Jobs[t]
		fmt.Fprintf(w, "  %-7s %3d done, %d failed, %d cancelled; mean wait %.1fs, mean run %.1fs\n",
			t, c[api.Done], c[api.Failed], c[api.Cancelled], s.MeanWait[t], s.MeanRun[t])
	}
	fmt.Fprintf(w, "  VMs: %d created, %d destroyed (by every job while the demo ran), %d of the demo's jobs left on the hosts\n",
		s.VMsCreated, s.VMsDestroyed, s.VMsLeft)
	dirs := make([]string, 0, len(s.Switches))
	for k, n := range s.Switches {
		dirs = append(dirs, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(dirs)
	fmt.Fprintf(w, "  switches done: %s\n", orNone(strings.Join(dirs, ", ")))
	var outs []string
	for k, n := range s.Outcomes {
		if k != string(co.PhaseDone) {
			outs = append(outs, fmt.Sprintf("%s %d", k, n))
		}
	}
	slices.Sort(outs)
	if len(outs) > 0 {
		fmt.Fprintf(w, "  switches not done: %s\n", strings.Join(outs, ", "))
	}
	fmt.Fprintf(w, "  switches undone within a minute (a host switched back to its pool within %.0f s, or a switch the other way started while it was in flight): %d\n",
		UndoWindow.Seconds(), len(s.Undone))
	for _, p := range s.Undone {
		fmt.Fprintf(w, "    %s, undone by %s\n", s.describeSwitch(p.First, p.FirstWhy), s.describeSwitch(p.Then, p.ThenWhy))
	}
	pools := make([]string, 0, len(s.HostsAfter))
	for p := range s.HostsAfter {
		pools = append(pools, p)
	}
	slices.Sort(pools)
	var moved []string
	for _, p := range pools {
		moved = append(moved, fmt.Sprintf("%s %d→%d→%d→%d", p, s.HostsBefore[p], s.HostsShift[p], s.HostsEnd[p], s.HostsAfter[p]))
	}
	fmt.Fprintf(w, "  hosts per pool (start→demand shift→last job submitted→all done): %s\n", strings.Join(moved, ", "))
}

// describeSwitch is a switch of the summary: its ID, host, pools, when it
// started and ended after the stream's start, and why.
func (s Summary) describeSwitch(sw api.SwitchView, why string) string {
	out := fmt.Sprintf("%s %s %s→%s at %.1f–%.1fs", sw.ID, sw.Host, sw.From, sw.To, sw.Started.Sub(s.Start).Seconds(), sw.Updated.Sub(s.Start).Seconds())
	if why != "" {
		out += " (" + why + ")"
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
