package wire

import (
	"maps"
	"slices"

	"github.com/metasched/metasched/gramvm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/policy"
	"github.com/metasched/metasched/selection"
)

// each converts a slice, keeping nil nil and empty empty.
func each[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// Spec is a job's wire form. The bytes of its inputs are shared, not
// copied: they are the largest part of a job and nothing changes them.
func Spec(j selection.Job) api.JobSpec {
	return api.JobSpec{Name: j.Name, Type: j.Type, Tasks: j.Tasks, TaskOps: j.TaskOps, TaskBytes: j.TaskBytes,
		Efficiency: j.Efficiency, VM: api.VMSize{VCPUs: j.VM.VCPUs, MemoryMiB: j.VM.MemoryMiB},
		Command: slices.Clone(j.Command), Walltime: api.Duration(j.Walltime),
		Inputs: each(j.Inputs, func(in selection.InputFile) api.InputFile {
			return api.InputFile{Path: in.Path, Content: in.Content, Data: in.Data, From: in.From}
		}),
		Outputs: slices.Clone(j.Outputs), Master: j.Master, Placement: string(j.Placement), Elastic: j.Elastic}
}

// Placement is a placement's wire form.
func Placement(p gramvm.Placement) api.Placement {
	return api.Placement{Plan: Plan(p.Plan), Master: hostRef(p.Master), Workers: each(p.Workers, hostRef),
		Measured: slices.Clone(p.Measured), Calibrated: slices.Clone(p.Calibrated)}
}

// PlacementPtr is Placement of a placement that may be absent (nil).
func PlacementPtr(p *gramvm.Placement) *api.Placement {
	if p == nil {
		return nil
	}
	v := Placement(*p)
	return &v
}

func hostRef(h gramvm.HostRef) api.HostRef { return api.HostRef{Site: h.Site, Host: h.Host} }

// Plan is a plan's wire form. The clusters' indexes in the grid, which
// the JSON leaves out, are not on the wire.
func Plan(p selection.Plan) api.Plan {
	return api.Plan{Algorithm: string(p.Algorithm), Job: p.Job, Tasks: p.Tasks, Feasible: p.Feasible, Reason: p.Reason,
		Master: p.Master, MasterForced: p.MasterForced, Rate: p.Rate, Runtime: p.Runtime, Machines: p.Machines,
		CostPerHour: p.CostPerHour, Start: p.Start,
		Clusters: each(p.Clusters, func(c selection.ClusterPlan) api.ClusterPlan {
			return api.ClusterPlan{Name: c.Name, Master: c.Master, Machines: c.Machines, Allowed: c.Allowed, Free: c.Free,
				Tasks: c.Tasks, BandwidthMbps: c.BandwidthMbps, Rate: c.Rate, Limit: string(c.Limit), Why: c.Why}
		}),
		Excluded: each(p.Excluded, func(e selection.Excluded) api.Excluded {
			return api.Excluded{Name: e.Name, Reason: e.Reason}
		}),
		ExcludedMore: p.ExcludedMore, Zones: each(p.Zones, slices.Clone[[]string]), Evaluations: p.Evaluations}
}

// DomainPlan is the plan a wire plan describes, for the command line,
// which prints a daemon's plan as it prints its own. The wire does not
// carry the clusters' indexes in the grid: they are -1.
func DomainPlan(p api.Plan) selection.Plan {
	return selection.Plan{Algorithm: selection.Algorithm(p.Algorithm), Job: p.Job, Tasks: p.Tasks, Feasible: p.Feasible,
		Reason: p.Reason, Master: p.Master, MasterIndex: -1, MasterForced: p.MasterForced, Rate: p.Rate, Runtime: p.Runtime,
		Machines: p.Machines, CostPerHour: p.CostPerHour, Start: p.Start,
		Clusters: each(p.Clusters, func(c api.ClusterPlan) selection.ClusterPlan {
			return selection.ClusterPlan{Name: c.Name, Index: -1, Master: c.Master, Machines: c.Machines, Allowed: c.Allowed,
				Free: c.Free, Tasks: c.Tasks, BandwidthMbps: c.BandwidthMbps, Rate: c.Rate, Limit: selection.Limit(c.Limit), Why: c.Why}
		}),
		Excluded: each(p.Excluded, func(e api.Excluded) selection.Excluded {
			return selection.Excluded{Name: e.Name, Index: -1, Reason: e.Reason}
		}),
		ExcludedMore: p.ExcludedMore, Zones: each(p.Zones, slices.Clone[[]string]), Evaluations: p.Evaluations}
}

// State is a job state's wire form.
func State(s lifecycle.State) api.State { return api.State(s) }

// DomainState is the job state a wire state names (for a filter of jobs
// by state); an unknown name stays unknown.
func DomainState(s api.State) lifecycle.State { return lifecycle.State(s) }

// Transitions is a job's transitions' wire form.
func Transitions(ts []lifecycle.Transition) []api.Transition {
	return each(ts, func(t lifecycle.Transition) api.Transition {
		return api.Transition{From: State(t.From), To: State(t.To), At: t.At, Reason: t.Reason}
	})
}

// JobVM is the wire form of a VM of a job.
func JobVM(v lifecycle.VM) api.JobVM {
	return api.JobVM{Name: v.Name, Site: v.Site, Host: v.Host, Master: v.Master}
}

// JobVMs is JobVM of each of a job's VMs.
func JobVMs(vs []lifecycle.VM) []api.JobVM { return each(vs, JobVM) }

// LostVMs is the wire form of the worker VMs a job lost.
func LostVMs(vs []lifecycle.LostVM) []api.JobLostVM {
	return each(vs, func(v lifecycle.LostVM) api.JobLostVM {
		return api.JobLostVM{JobVM: JobVM(v.VM), At: v.At, Reason: v.Reason}
	})
}

// JobCounts is the wire form of the jobs counted by state.
func JobCounts(m map[lifecycle.State]int) map[api.State]int {
	if m == nil {
		return nil
	}
	out := make(map[api.State]int, len(m))
	for s, n := range m {
		out[State(s)] = n
	}
	return out
}

// VM is an agent's VM's wire form.
func VM(v hp.VM) api.VM {
	return api.VM{Name: v.Name, Host: v.Host, Pool: v.Pool, Job: v.Job, State: string(v.State), VCPUs: v.VCPUs,
		MaxVCPUs: v.MaxVCPUs, MemoryMiB: v.MemoryMiB, MaxMemoryMiB: v.MaxMemoryMiB, Managed: v.Managed,
		BootSeconds: v.BootSeconds, AgentSeconds: v.AgentSeconds, User: v.User, Address: v.Address, Kind: v.Kind, CPUQuota: v.CPUQuota}
}

// VMs is VM of each VM.
func VMs(vs []hp.VM) []api.VM { return each(vs, VM) }

// Link is a link's wire form.
func Link(l gramvm.Link) api.Link {
	return api.Link{Between: l.Between, ConfiguredMbps: l.ConfiguredMbps, MeasuredMbps: l.MeasuredMbps,
		MeasuredAt: l.MeasuredAt, Samples: l.Samples, Via: l.Via, AgentsMbps: l.AgentsMbps}
}

// Links is Link of each link.
func Links(ls []gramvm.Link) []api.Link { return each(ls, Link) }

// TuningDecision is a tuning decision's wire form.
func TuningDecision(d gramvm.TuningDecision) api.TuningDecision {
	return api.TuningDecision{NewJob: d.NewJob, Target: d.Target, Action: d.Action, Cluster: d.Cluster,
		Moves: each(d.Moves, func(m gramvm.Move) api.TuningMove {
			return api.TuningMove{VM: m.VM, Site: m.Site, From: m.From, To: m.To}
		}),
		Shrinks: each(d.Shrinks, func(s gramvm.Shrink) api.TuningShrink {
			return api.TuningShrink{VM: s.VM, Site: s.Site, Host: s.Host, VCPUs: s.VCPUs}
		}),
		GainSeconds: d.GainSeconds, LossSeconds: d.LossSeconds, MigrationSeconds: d.MigrationSeconds,
		NewJobSecondsBefore: d.NewJobSecondsBefore, NewJobSecondsAfter: d.NewJobSecondsAfter,
		TargetSecondsBefore: d.TargetSecondsBefore, TargetSecondsAfter: d.TargetSecondsAfter,
		Accepted: d.Accepted, Reason: d.Reason}
}

// PolicySlice is the wire form of a view of the policy's table; nil (no
// table in force) stays nil.
func PolicySlice(s *policy.Slice) *api.PolicySlice {
	if s == nil {
		return nil
	}
	return &api.PolicySlice{Spec: s.Spec, Pools: slices.Clone(s.Pools), Rows: s.Rows, Cols: s.Cols,
		Servers: slices.Clone(s.Servers), Fixed: maps.Clone(s.Fixed), Actions: each(s.Actions, slices.Clone[[]string]),
		LiveRow: s.LiveRow, LiveCol: s.LiveCol}
}
