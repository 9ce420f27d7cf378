// Package metasched is the metasched daemon, `metasched serve`: it takes
// master-worker jobs over an HTTP API, plans each on the best clusters of
// the grid, builds it a virtual cluster of VMs through the site agents,
// runs it, and moves hosts between the pools of the job types with a
// switching policy through the two-phase switch protocol.
//
// NewWithGrid opens the store and the agents and restores the state a
// previous run left (hosts and their pools, every live job, every switch in
// flight); Run serves an HTTP handler on a listener and runs the daemon's
// loops until its context ends; Close releases the agents, the policy and
// the store. Options.Clock is the daemon's time (the real clock when nil).
// ParseConfig reads the configuration file; package demo has the built-in
// demo's.
//
// The daemon's exported methods are all its clients use: the HTTP server
// (package httpapi, the handler Run serves), the dashboard (package
// dashboard) and the demo (package demo) each declare the methods they
// need as an interface, and the daemon imports none of them.
//
// What the daemon does:
//
//   - Jobs API (intake.go, jobviews.go, views.go, dryrun.go, exports.go):
//     submit, list, get, cancel, logs, a dry run of the plan, pools, hosts,
//     VMs, switches, the policy, links, tuning candidates, the dashboard's
//     chart samples (history.go); Prometheus metrics of its state
//     (metrics.go, Registry).
//   - Job lifecycle (jobdriver.go, livejob.go, restore.go): queued →
//     planned → provisioning → running → done, failed or cancelled, decided
//     by package lifecycle (a pure state machine) and carried out here:
//     every change is committed to the store in one transaction, with its
//     time and reason, before memory follows it. The dispatcher
//     (dispatch.go) plans queued jobs (planning.go, with package gramvm) on
//     the free hosts of their pool, the site agents create one VM per
//     planned machine, an executor (package executor) runs the job, and the
//     VMs are destroyed once its outcome is on disk. Jobs on a host taken
//     by a switch or on a lost agent, or whose VM is gone from its host,
//     are requeued (or failed), except an elastic job that only loses
//     workers: it goes on without them (elastic.go); a restart resumes or
//     requeues every live job.
//   - Site agents (agents.go, hosts.go): one per grid cluster, in process on
//     the libvirt test driver or remote over HTTP; their inventories make
//     the host view (pool, state, VMs), and VMs that no live job owns are
//     destroyed.
//   - Cluster manager (manager.go, rates.go): twice a second, each pool's
//     jobs, hosts and switches in flight and the estimated rates λ, µ and ζ
//     go to the switching policy (package policy); a decision to switch goes
//     to the coordinator.
//   - Switch driver (switchdriver.go, switchsteps.go, switchrequests.go,
//     switchrestore.go): feeds the coordinator (package
//     coordinator, a pure state machine) the decisions, the operators'
//     switches and clears, the answers of the pools and agents and its
//     timers, records every step in the store before taking it (the last
//     record of each switch), carries out the actions, and forgets a switch
//     once it is over: memory holds the open switches, the store the
//     history.
//   - Housekeeping (housekeeping.go): at the start and every minute, drops
//     the finished switches and removes the run directories beyond the
//     configured retention.
//   - Bandwidth tuning (tuning.go): gramvm decides when consolidating or
//     shrinking a running job's VMs frees enough for a waiting job; the
//     daemon migrates or resizes them through the agents.
//   - Probes (probe.go): the bandwidth of links between remote agents,
//     measured every minute, replaces the configured one in plans.
//   - Calibration (calibration.go): for the sites whose agents boot
//     guests, the task farm in VMs on idle hosts measures each site's
//     operations per second per vCPU for each image its pools boot, its
//     LAN, and each link VM to VM, one at a time, at the start, when a
//     figure is older than calibration.max_age, when an agent answers
//     again and on demand (Calibrate); gramvm plans on the figures, the
//     store keeps them with their time, Calibration lists them.
//
// The design is described in docs/internals/daemon.md of the
// repository; its APIs are in docs/reference/http.md.
package metasched
