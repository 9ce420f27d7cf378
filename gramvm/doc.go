// Package gramvm is the Resource Manager Adapter service of GramVM: it turns
// the live inventory reported by the per-site hypervisor proxies into the
// planning problem of package selection, and keeps the grid's link
// bandwidths current from the agents' probes.
//
// Built so far: Service, which plans a job on the free hosts of its pool
// (FreeHosts: ready, in the pool, with room for one VM of the job's shape;
// one VM per machine of the plan) by hill climbing, names the hosts that
// carry the plan out, and uses the measured bandwidth of a link (an
// exponentially weighted average of the probes, weight alpha for the newest)
// in place of the configured one, saying so in the placement. Planning costs
// what selection's hill climbing costs (milliseconds for a 1000-cluster
// grid); a call copies the grid and builds its graph, O(clusters + links).
//
// Not built yet: the migrations and resizes that free bandwidth for new jobs
// (Bertogna et al., section 3.2), which need the daemon.
package gramvm
