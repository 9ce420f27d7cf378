// Package hypervisorproxy will hold the per-site agent: one libvirt connection
// per host, inventory of hosts and VMs, creation of VMs from a spec, live
// resize, live migration, destruction, reconfiguration of a host for another
// pool, bandwidth probes, and the agent's HTTP API and Go client. Only one
// sub-package of it will use cgo (the libvirt driver).
//
// Not built yet: see the README for what exists today.
package hypervisorproxy
