package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/internal/transcript"
	"github.com/metasched/metasched/selection"
)

// TestTranscripts runs the scripts in testdata/*.txt (the format of
// internal/transcript) against Round with a rigid Planner: a job of
// tasks: N wants N VMs, one a host, on the first free hosts of the sites
// in name order, and is infeasible with fewer. The world (the hosts'
// capacity, the queue, the jobs running) is the script's, and follows the
// round's claims as the daemon's does. Commands:
//
//	host NAME cpus=C mem=M              a host of site NAME's prefix, all free
//	take HOST vcpus=C mem=M             something else takes capacity on HOST
//	job ID tasks=N vcpus=C mem=M run=S @T [placement=P] [error] [tuning=H,H]
//	                                    a job queued at T (run: its plan's run time)
//	round @T hold_after=S [max_claims=N] a round; its planner calls, its decisions,
//	                                    the claims carried out
//	end ID                              a running job ends: its VMs go
//
// Run with -update to rewrite the expected output.
func TestTranscripts(t *testing.T) {
	transcript.Run(t, "testdata", *transcript.Update, func(t *testing.T) func(string) string {
		w := &world{hosts: map[string]*Host{}, running: map[string]*running{}}
		return func(cmd string) string { return w.run(t, cmd) }
	})
}

type world struct {
	order   []string
	hosts   map[string]*Host
	queue   []Job
	running map[string]*running
	// Set per job: an error from its plans, a tuning its plan starts.
	errs    map[string]bool
	tunings map[string][]string
	started map[string][]string // the tunings started
	log     []string
	now     time.Time
}

type running struct {
	vm   selection.VM
	vms  []string // hosts, a VM each
	ends time.Time
}

func (w *world) run(t *testing.T, cmd string) string {
	t.Helper()
	f := strings.Fields(cmd)
	args := map[string]string{}
	at := -1.0
	for _, a := range f[1:] {
		if s, ok := strings.CutPrefix(a, "@"); ok {
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%q: bad time %q", cmd, a)
			}
			at = x
			continue
		}
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	num := func(k string) int {
		n, err := strconv.Atoi(args[k])
		if err != nil {
			t.Fatalf("%q: %s: %v", cmd, k, err)
		}
		return n
	}
	switch f[0] {
	case "host":
		name := f[1]
		site := name[:strings.LastIndex(name, "-")]
		w.order = append(w.order, name)
		w.hosts[name] = &Host{Name: name, Site: site, CPUs: num("cpus"), MemoryMiB: num("mem"), FreeVCPUs: num("cpus"), FreeMemoryMiB: num("mem")}
		return "ok\n"
	case "take":
		h := w.hosts[f[1]]
		h.FreeVCPUs -= num("vcpus")
		h.FreeMemoryMiB -= num("mem")
		return w.hostsLine()
	case "job":
		run, err := strconv.ParseFloat(args["run"], 64)
		if err != nil {
			t.Fatal(err)
		}
		spec := &selection.Job{Name: f[1], Type: "a", Tasks: num("tasks"), TaskOps: run, TaskBytes: 0, Efficiency: 1,
			VM: selection.VM{VCPUs: num("vcpus"), MemoryMiB: num("mem")}, Placement: selection.Placement(args["placement"])}
		j := Job{ID: f[1], Spec: spec, Submitted: transcript.At(at)}
		if w.errs == nil {
			w.errs, w.tunings, w.started = map[string]bool{}, map[string][]string{}, map[string][]string{}
		}
		if _, ok := args["error"]; ok {
			w.errs[j.ID] = true
		}
		if h, ok := args["tuning"]; ok {
			w.tunings[j.ID] = strings.Split(h, ",")
		}
		w.queue = append(w.queue, j)
		return "queued\n"
	case "end":
		r := w.running[f[1]]
		if r == nil {
			t.Fatalf("%q: %s does not run", cmd, f[1])
		}
		for _, h := range r.vms {
			w.hosts[h].FreeVCPUs += r.vm.VCPUs
			w.hosts[h].FreeMemoryMiB += r.vm.MemoryMiB
		}
		delete(w.running, f[1])
		return w.hostsLine()
	case "round":
		w.now = transcript.At(at)
		hold, err := strconv.ParseFloat(args["hold_after"], 64)
		if err != nil {
			t.Fatalf("%q: hold_after: %v", cmd, err)
		}
		in := Input{Pool: "a", Now: w.now, HoldAfter: time.Duration(hold * float64(time.Second))}
		if m, ok := args["max_claims"]; ok {
			in.MaxClaims, err = strconv.Atoi(m)
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, name := range w.order {
			in.Hosts = append(in.Hosts, *w.hosts[name])
		}
		in.Queue = slices.Values(slices.Clone(w.queue))
		before := fmt.Sprint(in.Hosts)
		w.log = nil
		// Claimed hears each claim before the round plans another job.
		var heard []string
		in.Claimed = func(d Decision) {
			if n := len(w.log); n == 0 || !strings.Contains(w.log[n-1], " "+d.Job+" ") {
				t.Errorf("%q: claim of %s heard after %q", cmd, d.Job, w.log)
			}
			heard = append(heard, d.Job)
		}
		res := Round(context.Background(), in, w)
		if after := fmt.Sprint(in.Hosts); after != before {
			t.Errorf("%q: Round changed its input's hosts:\n%s\n%s", cmd, before, after)
		}
		var claimed []string
		for _, d := range res.Decisions {
			if d.Claim != nil {
				claimed = append(claimed, d.Job)
			}
		}
		if !slices.Equal(heard, claimed) {
			t.Errorf("%q: Claimed heard %v, the round claimed %v", cmd, heard, claimed)
		}
		var b strings.Builder
		for _, l := range w.log {
			b.WriteString(l + "\n")
		}
		for _, d := range res.Decisions {
			b.WriteString(w.apply(d) + "\n")
		}
		if res.NoRoom != "" {
			fmt.Fprintf(&b, "stopped: %s\n", res.NoRoom)
		}
		if res.Capped {
			fmt.Fprintf(&b, "stopped: %d claims\n", in.MaxClaims)
		}
		b.WriteString(w.hostsLine())
		return b.String()
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

// apply carries out a decision as the daemon does, and says what it was.
func (w *world) apply(d Decision) string {
	holds := ""
	if len(d.Holds) > 0 {
		holds = " [holds " + strings.Join(d.Holds, ",") + "]"
	}
	i := slices.IndexFunc(w.queue, func(j Job) bool { return j.ID == d.Job })
	if d.Claim == nil {
		if hosts, ok := w.started[d.Job]; ok { // the daemon gives the job the tuning it waits for
			w.queue[i].Tuning = &Tuning{Hosts: hosts, Reason: d.Why}
		}
		return fmt.Sprintf("wait %s: %s%s", d.Job, d.Why, holds)
	}
	j := w.queue[i]
	w.queue = slices.Delete(w.queue, i, i+1)
	r := &running{vm: j.Spec.VM, ends: w.now.Add(time.Duration(d.Claim.Plan.Runtime * float64(time.Second)))}
	for _, h := range append([]gramvm.HostRef{d.Claim.Master}, d.Claim.Workers...) {
		r.vms = append(r.vms, h.Host)
		w.hosts[h.Host].FreeVCPUs -= j.Spec.VM.VCPUs
		w.hosts[h.Host].FreeMemoryMiB -= j.Spec.VM.MemoryMiB
	}
	w.running[j.ID] = r
	return fmt.Sprintf("claim %s on %s%s", d.Job, strings.Join(r.vms, ","), holds)
}

func (w *world) hostsLine() string {
	var parts []string
	for _, name := range w.order {
		h := w.hosts[name]
		parts = append(parts, fmt.Sprintf("%s:%d/%d", name, h.FreeVCPUs, h.FreeMemoryMiB))
	}
	return "free " + strings.Join(parts, " ") + "\n"
}

// Plan is the rigid planner: the first Tasks free hosts, sites in name
// order.
func (w *world) Plan(j *Job, free map[string][]string) Outcome {
	w.log = append(w.log, fmt.Sprintf("plan %s on %s", j.ID, list(free)))
	if w.errs[j.ID] {
		return Outcome{Err: errors.New("the planner failed")}
	}
	if hosts, ok := w.tunings[j.ID]; ok {
		delete(w.tunings, j.ID)
		w.started[j.ID] = hosts
		return Outcome{Tuning: &Tuning{Hosts: hosts, Reason: "waiting for the tuning started for it"}}
	}
	return Outcome{Placement: rigid(j, free, 0)}
}

// PlanEmpty is Plan on the hosts given.
func (w *world) PlanEmpty(j *Job, hosts map[string][]string) (gramvm.Placement, error) {
	w.log = append(w.log, fmt.Sprintf("plan-empty %s on %s", j.ID, list(hosts)))
	return rigid(j, hosts, 0), nil
}

// PlanAvailable is OLB: the site whose Tasks-th host is free first, on
// the hosts not held (free now: 0; a running job's or a claim's: when it
// ends).
func (w *world) PlanAvailable(j *Job, free map[string][]string, held map[string]string, claims []Decision) Outcome {
	var cl []string
	for _, c := range claims {
		cl = append(cl, c.Job)
	}
	w.log = append(w.log, fmt.Sprintf("plan-available %s free %s held %d claims [%s]", j.ID, list(free), len(held), strings.Join(cl, ",")))
	when := map[string]float64{}
	for _, r := range w.running {
		for _, h := range r.vms {
			when[h] = max(when[h], r.ends.Sub(w.now).Seconds())
		}
	}
	for _, c := range claims {
		for _, h := range append([]gramvm.HostRef{c.Claim.Master}, c.Claim.Workers...) {
			when[h.Host] = max(when[h.Host], c.Claim.Plan.Runtime)
		}
	}
	type hostAt struct {
		name string
		in   float64
	}
	sites := map[string][]hostAt{}
	for _, name := range w.order {
		h := w.hosts[name]
		if _, ok := held[name]; ok || h.CPUs < j.Spec.VM.VCPUs {
			continue
		}
		in := when[name]
		if slices.Contains(free[h.Site], name) {
			in = 0
		} else if in == 0 {
			in = math.Inf(1)
		}
		sites[h.Site] = append(sites[h.Site], hostAt{name, in})
	}
	best, bestAt := "", math.Inf(1)
	for _, site := range sortedKeys(sites) {
		hs := sites[site]
		slices.SortStableFunc(hs, func(a, b hostAt) int { return cmp.Compare(a.in, b.in) })
		if len(hs) >= j.Spec.Tasks && hs[j.Spec.Tasks-1].in < bestAt {
			best, bestAt = site, hs[j.Spec.Tasks-1].in
		}
	}
	if best == "" {
		return Outcome{Placement: gramvm.Placement{Plan: selection.Plan{Reason: fmt.Sprintf("no site has %d hosts", j.Spec.Tasks)}}}
	}
	var names []string
	for _, h := range sites[best][:j.Spec.Tasks] {
		names = append(names, h.name)
	}
	pl := rigid(j, map[string][]string{best: names}, bestAt)
	pl.Plan.Algorithm, pl.Plan.Master, pl.Plan.Machines = selection.OLB, best, j.Spec.Tasks
	return Outcome{Placement: pl}
}

// rigid places the job's Tasks VMs on the first hosts of free, sites in
// name order, starting at start.
func rigid(j *Job, free map[string][]string, start float64) gramvm.Placement {
	var refs []gramvm.HostRef
	for _, site := range sortedKeys(free) {
		for _, h := range free[site] {
			refs = append(refs, gramvm.HostRef{Site: site, Host: h})
		}
	}
	if len(refs) < j.Spec.Tasks {
		return gramvm.Placement{Plan: selection.Plan{Reason: fmt.Sprintf("it needs %d hosts, has %d", j.Spec.Tasks, len(refs))}}
	}
	return gramvm.Placement{Plan: selection.Plan{Feasible: true, Runtime: j.Spec.TaskOps, Start: start, Machines: j.Spec.Tasks},
		Master: refs[0], Workers: refs[1:j.Spec.Tasks]}
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// list writes hosts per site: "a:a-0,a-1 b:b-0", or "-".
func list(m map[string][]string) string {
	var parts []string
	for _, site := range sortedKeys(m) {
		parts = append(parts, site+":"+strings.Join(m[site], ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
