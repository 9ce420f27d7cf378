// Package hypervisorproxy is the per-site agent of metasched (Bertogna et
// al., section 2: the "hypervisor proxy"): one agent per site manages the
// site's physical hosts, each a libvirt connection, and carries out what
// GramVM decides: it creates the VMs of a virtual cluster, resizes them
// live, live-migrates them, destroys them, reconfigures a host for another
// pool, and measures the bandwidth to another site's agent.
//
// # Pieces
//
//   - Agent (agent.go) is the site. Its hosts and their reconnects are in
//     hosts.go, the hosts generated from the grid's cluster entry in
//     gridhosts.go, the record of the VMs it manages in records.go,
//     capacity and placement in placement.go, the inventory in
//     inventory.go. Its methods are the operations, one file per family
//     (create.go, resize.go, migrate.go with the port pool of
//     migrationports.go, reconfigure.go, probe.go, guest.go for the
//     guest calls through a VM's QEMU guest agent); Handler (server.go)
//     serves them as JSON over HTTP with a bearer token, and package
//     client calls them.
//   - Hypervisor (hypervisor.go) is what the agent needs of one host;
//     GuestHypervisor (boot.go) and GuestAgentHypervisor (guest.go) are
//     what it needs of one that boots images and reaches their guest
//     agents. The
//     libvirt driver, sub-package virt, is the only code that uses cgo and
//     libvirt.org/go/libvirt; it maps libvirt's error codes to the
//     sentinel errors of errors.go.
//   - Sub-package domxml builds the domain XML (pure functions with golden
//     tests) for the two domain types: "test" (libvirt's built-in test
//     driver, in process) and "qemu" (QEMU with TCG through libvirtd).
//   - Site (site.go) is the site file of `metasched agent --config`.
//   - Sub-packages libvirtdtest and netlab start what the tests need:
//     private libvirtd daemons, and network namespaces joined by a link
//     shaped with tc.
//
// # What the hypervisors can do
//
// On the test driver (the default: one file-based host per machine of the
// grid's cluster, with its cores and memory) everything works but live
// migration: a move there is define-on-destination then destroy-on-source,
// reported with Live false. A file-based test host keeps no state across a
// reconnect or a restart of the agent: the agent recreates its VMs from its
// record (kept in data_dir when the site file gives one).
//
// On QEMU, vCPUs hot-plug but do not unplug (ErrUnsupported), memory grows
// by DIMM hot-plug up to the VM's maximum (in steps that are multiples of
// 2 MiB), and shrinks only through the balloon, which changes nothing in a
// guest without a balloon driver: the driver reads every resize back, so
// that is ErrUnsupported too, not a silent success. A live migration goes
// over tcp://ADDR:PORT with a port of the site's migration_ports per
// migration, encrypted by libvirt's native TLS when the site file says
// migration_tls (each host's qemu.conf then names, in
// migrate_tls_x509_cert_dir, the CA's and its own certificate, which
// tlsx's MigrationFiles makes); it is aborted when the caller cancels or
// no data moved for migration_progress_timeout, and the VM then keeps
// running where it was, as it does when the migration fails.
//
// # Capacity
//
// A host's free vCPUs and memory are its CPUs and memory less the current
// sizes of the VMs the agent manages on it (a VM being migrated counts on
// both hosts) and of the running domains it does not manage. The agent
// does not overcommit: a VM or a resize that does not fit is ErrCapacity.
//
// # Pools
//
// Every host carries a pool label (a job type). ReconfigureHost moves a host
// to another pool as docs/internals/switch-protocol.md ("Phases") says: it
// refuses while the host runs a VM of a job the coordinator has not released,
// destroys the old pool's VMs, sets the label, then waits the site's
// switch_delay (emulating a reimage) before it reports done; the host takes no
// VM meanwhile.
//
// # Bandwidth probes
//
// Probe sends a bounded stream (8 MiB by default) over one TCP connection
// to another agent's sink, which times it from its first read to its last;
// the result is in Mbit/s with the time it was measured. Over a veth link
// shaped to 20 Mbit/s with tc tbf the probe measures about 19.1 Mbit/s:
// TCP's payload is 1448 of every 1514 bytes on the wire.
//
// The design is described in docs/internals/agent.md of the
// repository; its API is in docs/reference/http.md, "The agent's API".
package hypervisorproxy
