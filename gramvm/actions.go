package gramvm

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// fitsNew says whether the new job's VM fits in what a host has free.
func (t *tuner) fitsNew(vcpus, mem int) bool {
	return vcpus >= t.job.VM.VCPUs && mem >= t.job.VM.MemoryMiB
}

// inFree says whether a host is among the new job's free hosts.
func (t *tuner) inFree(k hostKey) bool { return slices.Contains(t.free[k.site], k.host) }

// delta is a change of a host's free capacity.
type delta struct {
	k          hostKey
	vcpus, mem int
}

// outcome is what an action with k steps would do.
type outcome struct {
	k                  int
	moves              []Move
	shrinks            []Shrink
	feasible           bool // the new job still has a plan
	after, targetAfter float64
	gain, loss, mig    float64
	freedHosts         int
	freedMbps          float64
}

func (o *outcome) net() float64 { return o.gain - o.loss - o.mig }

// evaluate plans the new job after job j's VMs become vms and the hosts'
// free capacities change by deltas.
func (t *tuner) evaluate(ctx context.Context, j, part int, vms []TunableVM, deltas []delta) (outcome, error) {
	if err := ctx.Err(); err != nil {
		return outcome{}, err
	}
	md, jm := t.md, t.md.jobs[j]
	var o outcome
	// The new job's free hosts: a host it could not use and now can joins
	// them (when it is in its pool); one it could and now cannot leaves.
	free := make(map[string][]string, len(t.free))
	for site, hs := range t.free {
		free[site] = hs
	}
	var order []hostKey
	sum := map[hostKey]delta{}
	for _, d := range deltas {
		if _, ok := sum[d.k]; !ok {
			order = append(order, d.k)
		}
		s := sum[d.k]
		s.vcpus, s.mem = s.vcpus+d.vcpus, s.mem+d.mem
		sum[d.k] = s
	}
	sameType := jm.rj.Job.Type == t.job.Type
	for _, k := range order {
		h, known := t.caps[k]
		if !known {
			continue
		}
		d := sum[k]
		was, now := t.fitsNew(h.FreeVCPUs, h.FreeMemoryMiB), t.fitsNew(h.FreeVCPUs+d.vcpus, h.FreeMemoryMiB+d.mem)
		in := t.inFree(k)
		switch {
		case !was && now && !in && sameType:
			free[k.site] = append(slices.Clone(free[k.site]), k.host)
			o.freedHosts++
		case was && !now && in:
			free[k.site] = slices.DeleteFunc(slices.Clone(free[k.site]), func(x string) bool { return x == k.host })
			o.freedHosts--
		}
	}
	rates := slices.Clone(t.rates)
	rates[j] = md.rates(jm, vms)
	if c := jm.parts[part].c; c != jm.m {
		o.freedMbps = (t.rates[j][part] - rates[j][part]) * jm.rj.Job.TaskBytes / bytesPerMbit
	}
	up, links := md.load(rates)
	pl, err := t.plan(ctx, md.loadedGrid(up, links), free)
	if err != nil {
		return outcome{}, err
	}
	rBefore, rAfter := sum64(t.rates[j]), sum64(rates[j])
	if !pl.Plan.Feasible || !(rAfter > 0) {
		return o, nil
	}
	o.feasible = true
	o.after = pl.Plan.Runtime
	o.gain = t.before - o.after
	o.targetAfter = jm.rj.RemainingTasks / rAfter
	o.loss = o.targetAfter - jm.rj.RemainingTasks/rBefore
	return o, nil
}

func sum64(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// start is a decision that changes nothing yet.
func (t *tuner) start(j, part int, action string) TuningDecision {
	jm := t.md.jobs[j]
	tb := 0.0
	if r := sum64(t.rates[j]); r > 0 {
		tb = jm.rj.RemainingTasks / r
	}
	return TuningDecision{NewJob: t.job.Name, Target: jm.rj.ID, Action: action, Cluster: t.md.grid.Clusters[jm.parts[part].c].Name,
		NewJobSecondsBefore: t.before, NewJobSecondsAfter: t.before, TargetSecondsBefore: tb, TargetSecondsAfter: tb}
}

// consolidate evaluates moving pairs of job j's workers in one cluster
// onto one host.
func (t *tuner) consolidate(ctx context.Context, j, part int) (TuningDecision, error) {
	jm := t.md.jobs[j]
	d := t.start(j, part, ActionConsolidate)
	c := jm.parts[part].c
	cl := t.md.grid.Clusters[c]
	inFlight := t.opt.InFlight[LANKey(cl.Name)]
	slots := t.opt.MaxPerLink - inFlight
	if slots <= 0 {
		d.Reason = fmt.Sprintf("no migration can start on %s's LAN: %d in flight, at most %d at a time", cl.Name, inFlight, t.opt.MaxPerLink)
		return d, nil
	}
	vms := jm.rj.VMs
	perHost := jm.perHost(vms)
	type cand struct {
		i       int
		k       hostKey
		capable bool // its host has room for another VM like it
		helps   bool // freeing its host frees it for the new job
		inFree  bool
	}
	var elig []cand
	full, busy := 0, 0
	for _, i := range jm.workers(vms, c) {
		v := vms[i]
		if jm.speed(v, perHost) < 1 {
			continue
		}
		full++
		k := hostKey{v.Site, v.Host}
		if t.opt.InFlight[v.Host]+1 > t.opt.MaxPerHost {
			busy++
			continue
		}
		h, known := t.caps[k]
		elig = append(elig, cand{i: i, k: k,
			capable: known && h.FreeVCPUs >= v.VCPUs && h.FreeMemoryMiB >= v.MemoryMiB,
			helps:   known && !t.fitsNew(h.FreeVCPUs, h.FreeMemoryMiB) && t.fitsNew(h.FreeVCPUs+v.VCPUs, h.FreeMemoryMiB+v.MemoryMiB),
			inFree:  t.inFree(k)})
	}
	byHost := func(a, b cand) int {
		return cmp.Or(cmp.Compare(a.k.host, b.k.host), cmp.Compare(vms[a.i].Name, vms[b.i].Name))
	}
	// Destinations: hosts with room, those the new job cannot use first.
	var dsts []cand
	for _, e := range elig {
		if e.capable {
			dsts = append(dsts, e)
		}
	}
	slices.SortStableFunc(dsts, func(a, b cand) int { return cmp.Or(boolFirst(!a.inFree, !b.inFree), byHost(a, b)) })
	// Sources: hosts without room first (they can only be sources), then
	// those whose freeing helps the new job.
	srcs := slices.Clone(elig)
	slices.SortStableFunc(srcs, func(a, b cand) int {
		return cmp.Or(boolFirst(!a.capable, !b.capable), boolFirst(a.helps, b.helps), byHost(a, b))
	})
	used := map[int]bool{}
	type pair struct{ src, dst cand }
	var pairs []pair
	for _, dst := range dsts {
		if used[dst.i] {
			continue
		}
		h := t.caps[dst.k]
		for _, src := range srcs {
			v := vms[src.i]
			if !used[src.i] && src.i != dst.i && h.FreeVCPUs >= v.VCPUs && h.FreeMemoryMiB >= v.MemoryMiB {
				used[src.i], used[dst.i] = true, true
				pairs = append(pairs, pair{src, dst})
				break
			}
		}
	}
	if len(pairs) == 0 {
		d.Reason = fmt.Sprintf("no two of %s's workers on %s can share a host: %d run at full speed, %d of them on hosts already migrating, %d with room for another",
			jm.rj.ID, cl.Name, full, busy, len(dsts))
		return d, nil
	}
	K := min(len(pairs), slots)
	lan := cl.LANMbps * bytesPerMbit
	var outs []outcome
	for k := 1; k <= K; k++ {
		after := slices.Clone(vms)
		var deltas []delta
		var moves []Move
		mig := 0.0
		for _, p := range pairs[:k] {
			v := vms[p.src.i]
			after[p.src.i].Host = p.dst.k.host
			deltas = append(deltas, delta{p.src.k, v.VCPUs, v.MemoryMiB}, delta{p.dst.k, -v.VCPUs, -v.MemoryMiB})
			moves = append(moves, Move{VM: v.Name, Site: v.Site, From: p.src.k.host, To: p.dst.k.host})
			mig += float64(v.MemoryMiB) * (1 << 20) / lan
		}
		o, err := t.evaluate(ctx, j, part, after, deltas)
		if err != nil {
			return d, err
		}
		o.k, o.moves, o.mig = k, moves, mig
		outs = append(outs, o)
	}
	t.decide(&d, outs, func(k int) string {
		return fmt.Sprintf("consolidating %d pair(s) of %s's workers on %s (best of 1 to %d)", k, jm.rj.ID, cl.Name, K)
	})
	return d, nil
}

// shrink evaluates halving the vCPUs of job j's workers in one cluster.
func (t *tuner) shrink(ctx context.Context, j, part int) (TuningDecision, error) {
	jm := t.md.jobs[j]
	d := t.start(j, part, ActionShrink)
	c := jm.parts[part].c
	cl := t.md.grid.Clusters[c]
	vms := jm.rj.VMs
	type cand struct {
		i     int
		helps bool
	}
	var cs []cand
	for _, i := range jm.workers(vms, c) {
		v := vms[i]
		if v.VCPUs < 2 {
			continue
		}
		h, known := t.caps[hostKey{v.Site, v.Host}]
		cs = append(cs, cand{i, known && !t.fitsNew(h.FreeVCPUs, h.FreeMemoryMiB) && t.fitsNew(h.FreeVCPUs+v.VCPUs-v.VCPUs/2, h.FreeMemoryMiB)})
	}
	if len(cs) == 0 {
		d.Reason = fmt.Sprintf("none of %s's workers on %s has 2 vCPUs or more to halve", jm.rj.ID, cl.Name)
		return d, nil
	}
	slices.SortStableFunc(cs, func(a, b cand) int {
		va, vb := vms[a.i], vms[b.i]
		return cmp.Or(boolFirst(a.helps, b.helps), cmp.Compare(va.Host, vb.Host), cmp.Compare(va.Name, vb.Name))
	})
	var outs []outcome
	for k := 1; k <= len(cs); k++ {
		after := slices.Clone(vms)
		var deltas []delta
		var shrinks []Shrink
		for _, x := range cs[:k] {
			v := vms[x.i]
			after[x.i].VCPUs = v.VCPUs / 2
			deltas = append(deltas, delta{hostKey{v.Site, v.Host}, v.VCPUs - v.VCPUs/2, 0})
			shrinks = append(shrinks, Shrink{VM: v.Name, Site: v.Site, Host: v.Host, VCPUs: v.VCPUs / 2})
		}
		o, err := t.evaluate(ctx, j, part, after, deltas)
		if err != nil {
			return d, err
		}
		o.k, o.shrinks = k, shrinks
		outs = append(outs, o)
	}
	t.decide(&d, outs, func(k int) string {
		return fmt.Sprintf("halving the vCPUs of %d of %s's workers on %s (best of 1 to %d)", k, jm.rj.ID, cl.Name, len(cs))
	})
	return d, nil
}
