// Package gramvm is the Resource Manager Adapter service of GramVM: it
// turns the hosts its caller reports into the planning problem of package
// selection, and keeps the grid's link bandwidths current from the probes
// its caller feeds it. It keeps no inventory and talks to no agent: the
// caller (the daemon, which asks the per-site hypervisor proxies) gives it
// the hosts (Host: site, pool, whether ready, size, free capacity and VMs)
// and the running jobs (RunningJob) each time, and carries its decisions
// out.
//
// Service plans a job on the free hosts of its pool (FreeHosts: ready, in
// the pool, with room for one VM of the job's shape; one VM per machine of
// the plan) by hill climbing, names the hosts that carry the plan out, and
// uses the measured bandwidth of a link (an exponentially weighted average
// of the probes, weight alpha for the newest; Observe) in place of the
// configured one, saying so in the placement. It plans by the job's
// placement: hill climbing (gramvm) with the master the job forces, or one
// of the single-cluster baselines (met, mct, olb); PlanAvailable gives the
// baselines, per host, when it is free, so that a cluster is ready when the
// hosts its plan alone needs are, and a baseline may choose a cluster that
// is not ready yet (the plan then starts later: Plan.Start). Planning costs what
// selection's hill climbing costs (milliseconds for a 1000-cluster grid);
// a call copies the grid and builds its graph, O(clusters + links).
//
// Calibration (calibration.go; Bertogna et al., section 3): the caller
// measures each cluster's speed for the VMs of an image (operations per
// second per vCPU, ObservePerf), its LAN (ObserveLAN) and links VM to VM
// (ObserveVMs, into the link's average beside the agents' probes), each
// with the time it was taken. A plan of a job whose pool's image
// (SetPoolImages) has a measured perf on a cluster uses that figure × the
// job's vCPUs as the perf of the cluster's machines (one VM per machine),
// and the measured LAN as its lan; Placement.Calibrated says which
// figures, when they were measured and the grid file's values. Running
// jobs' rates in the traffic model use the same figures.
//
// Bandwidth tuning (Bertogna et al., section 3.2) is decided here and
// carried out by the daemon through the site agents. Usage says what the
// running jobs move over the WAN: rate_c·Comm bytes/s from each worker
// cluster c of a job to its master's cluster m, over c's uplink, m's uplink
// and the links of the widest path between them (package graph's
// Graph.WidestPath, the path in the maximum-bandwidth spanning tree; the
// workers in m use its LAN, which is not counted). PlanLoaded plans a new
// job on what is left, each uplink and link less that traffic (at least
// graph.MinMbps), so a link a running job saturates shows as the limit of
// the new plan. Tune weighs, for each running job whose traffic crosses a
// link that limits the new job, or whose hosts sit where the new job is
// short of machines, two actions in one cluster: consolidating pairs of its
// workers on one host (live migrations; two VMs on a host share it fairly,
// so each runs at half speed and, once the job's compute falls below its
// bandwidth, it sends less data) and, where the hypervisor can unplug
// vCPUs, halving the vCPUs of its workers (their speed halves too). For
// each number of pairs or VMs it plans the new job again with the hosts and
// bandwidth freed: the new job's gain in run time T/R must exceed the
// running job's loss (its remaining tasks at the lower rate) plus the
// migration time (memory over the cluster's LAN). The moves of a decision
// start together and keep within the caps on migrations per host and per
// LAN, counting those in flight; more pairs come from later decisions.
// Every candidate is returned with its numbers and reason, the one to carry
// out first. It is a pure decision: no I/O, no clock, deterministic; each
// candidate costs one plan per number of pairs or VMs.
//
// Approximations of tuning: a job's VMs are the truth about its
// speed (one VM per machine at full speed, two of the job's workers on a
// host at half, fewer vCPUs than the job asks at that share), another job's
// VM on the same host is not counted; a host a running job frees serves
// the new job only if both are of one type (one pool); a measured link
// bandwidth is taken as the link's capacity, so probes taken under load
// count the running jobs twice (on the safe side).
//
// Errors are for bad input and cancellation (Observe's wrap ErrInvalid or
// ErrNotFound); an infeasible plan is a result, not an error.
//
// The design is described in docs/research/selection.md of the
// repository, "On the live grid" and "Bandwidth tuning's model", and in
// docs/internals/daemon.md, "Calibration".
package gramvm
