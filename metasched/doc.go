// Package metasched will hold the metasched daemon: the jobs API, the durable
// store, the job lifecycle (queued → planned → provisioning → running → done,
// failed or cancelled), the executors, the cluster manager that polls the pools
// and asks the switching policy, the two-phase switch coordinator, the
// dashboard and the Prometheus metrics.
//
// Built so far: the configuration file of `metasched serve` (Config,
// ParseConfig). The daemon itself is not built yet: see the README for what
// exists today.
package metasched
