// Package gramvm will hold the Resource Manager Adapter service of GramVM: it
// turns the live inventory reported by the per-site hypervisor proxies into the
// cluster graph, asks package selection for the best plan of a master-worker
// job, and decides the VM migrations and resizes that free bandwidth for new
// jobs.
//
// Not built yet: see the README for what exists today.
package gramvm
