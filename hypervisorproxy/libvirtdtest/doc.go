// Package libvirtdtest starts real, private libvirtd daemons (QEMU driver)
// for tests of the hypervisor proxy, unprivileged "session" daemons by
// default or root "system" daemons in private namespaces (see "Root mode"
// below), and stops them and everything they started when the test is over.
//
// Each Daemon lives in its own state directory made with os.MkdirTemp (mode
// 0755, owned by uid/gid 65534 "nobody"), with the XDG directories of the
// session daemon inside it:
//
//	DIR/home, DIR/run, DIR/config, DIR/cache, DIR/data
//	DIR/config/libvirt/libvirtd.conf   host_uuid of this daemon
//	DIR/libvirtd.log                   stdout and stderr of libvirtd
//	DIR/run/libvirt/libvirt-sock       the socket named by URI
//	DIR/run/libvirt/libvirtd.pid, virtlogd.pid
//	DIR/run/libvirt/qemu/run/NAME.pid  one per running QEMU guest
//
// libvirtd runs as uid/gid 65534 in a session of its own, with a clean
// environment, and is reached through a URI of the form
//
//	qemu+unix:///session?socket=DIR/run/libvirt/libvirt-sock
//
// Start returns once the daemon has answered a client on that socket with
// the capabilities of qemu:///session (about 4 s, spent probing QEMU; a
// mere connect succeeds much earlier). It speaks just enough of the libvirt
// RPC protocol for that itself.
//
// Two daemons with different host UUIDs (Options.HostUUID) behave like two
// hosts: guests can be live-migrated between them. With
// Options.MigrateTLSDir (qemu.conf's migrate_tls_x509_cert_dir: the CA's,
// the host's server and client certificates and keys) they migrate over
// TLS when asked (VIR_MIGRATE_TLS), and with Options.MigrateTLSForce
// (migrate_tls_force) a daemon refuses migrations without it. A session
// daemon's qemu.conf is DIR/config/libvirt/qemu.conf, written only when
// an option needs it; its QEMU runs as uid 65534, so Start gives that
// directory and its files to uid/gid 65534 (0700 and 0600).
//
// Daemon.Stop ends, by PID only, libvirtd (the process Start started), the
// virtlogd it spawned and every QEMU guest, as named by this daemon's own pid
// files and checked to belong to this daemon (uid 65534 and HOME inside its
// directory): SIGTERM first, SIGKILL after a bounded wait. It then removes the
// directory. Nothing is ever killed by name. StartT registers Stop with
// t.Cleanup, so that a failed test leaves nothing running.
//
// # Root mode
//
// A session daemon cannot put guests on a Linux bridge (QEMU's bridge
// helper needs a configuration and privileges it lacks). With Options.Root
// the daemon is a "system" daemon running as root in a private mount
// namespace of its own, and, with Options.NetNS, inside a named network
// namespace (such as a netlab.Grid's, which holds the sites' bridges). It
// is started as
//
//	nsenter --net=/run/netns/NETNS unshare --mount --propagation private -- \
//		sh -c 'mount --bind ...; exec libvirtd'
//
// each program exec'ing the next in place, so that the PID kept is
// libvirtd's. Directories of the state directory (mode 0700, owned by root)
// are bind-mounted over the system's in that mount namespace only:
//
//	DIR/etc     on /etc/libvirt   libvirtd.conf (host_uuid, no auth on the
//	                              root-only socket) and qemu.conf
//	DIR/run     on /run           libvirtd.pid, libvirt/libvirt-sock,
//	                              libvirt/qemu/NAME.pid per guest
//	DIR/lib     on /var/lib       libvirt/qemu: monitors, agent sockets
//	DIR/cache   on /var/cache     QEMU capabilities
//	DIR/log     on /var/log       libvirt/qemu/NAME.log
//	DIR/passwd  on /etc/passwd    copies of the host's with the user and
//	DIR/group   on /etc/group     group libvirt-qemu, which libvirtd looks
//	                              up before it reads qemu.conf
//
// qemu.conf runs QEMU as root with dynamic_ownership and remember_owner
// off, security_driver "none", no namespaces and stdio_handler "file" (no
// virtlogd), so nothing of the host's system services is needed, and
// then the lines of Options.MigrateTLSDir and MigrateTLSForce. Its
// cgroup controllers are cpu and cpuacct when the host has them (cgroup
// v1), so that a domain's <cputune> quota holds (Daemon.CPUControl),
// else none. libvirt makes a guest's cgroups from each hierarchy's root
// (machine/qemu-ID-NAME.libvirt-qemu, ID counted per daemon), so two
// daemons would share those of a guest migrating between them: each
// daemon gets a directory of its own in every cgroup hierarchy,
// MOUNT/metasched-STATEDIR, bind-mounted over the hierarchy's mount point
// in its mount namespace, and Stop removes it (a test binary killed
// before Stop leaves it, empty). The URI is
//
//	qemu+unix:///system?socket=DIR/run/libvirt/libvirt-sock
//
// Guests join a bridge of the network namespace with
// <interface type='bridge'><source bridge='BR'/>...; several daemons share
// one namespace, and guests live-migrate between them over 127.0.0.1 (the
// loopback of a netlab.Grid is up). Each daemon names the taps it creates
// vnetN, the first free N it sees: guests started at the same moment on two
// daemons of one namespace may get the same name, and one start then fails
// with "Unable to create tap device vnetN: Device or resource busy" (the
// domain stays defined; starting it again works). Starts on one daemon, and
// a migration's destination, pick a free name.
//
// Stop works as for a session daemon, by PID only, except for the check
// that a process named by a pid file is the daemon's: its mount namespace
// (/proc/PID/ns/mnt) must be libvirtd's private one, recorded when it
// became ready, which no process of the host or of another daemon shares.
//
// Using the package needs root (to switch to uid 65534) and the Debian
// packages libvirt-daemon, libvirt-daemon-driver-qemu and qemu-system-x86;
// Check reports what is missing. Tests typically skip when Check fails:
//
//	func TestSomething(t *testing.T) {
//		if err := libvirtdtest.Check(); err != nil {
//			t.Skip(err)
//		}
//		d := libvirtdtest.StartT(t, libvirtdtest.Options{})
//		// connect to d.URI() ...
//	}
//
// The package uses the standard library only: no cgo, no libvirt bindings.
//
// The design is described in docs/internals/decisions.md of the
// repository, "Why it is built this way".
package libvirtdtest
