// Package libvirtdtest starts real, private, unprivileged libvirtd "session"
// daemons (QEMU driver) for tests of the hypervisor proxy, and stops them and
// everything they started when the test is over.
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
// hosts: guests can be live-migrated between them.
//
// Daemon.Stop ends, by PID only, libvirtd (the process Start started), the
// virtlogd it spawned and every QEMU guest, as named by this daemon's own pid
// files and checked to belong to this daemon (uid 65534 and HOME inside its
// directory): SIGTERM first, SIGKILL after a bounded wait. It then removes the
// directory. Nothing is ever killed by name. StartT registers Stop with
// t.Cleanup, so that a failed test leaves nothing running.
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
// The design is described in docs/design.md of the repository, section
// "Why it is built this way".
package libvirtdtest
