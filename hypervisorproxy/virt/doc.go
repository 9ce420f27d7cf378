// Package virt is the agent's libvirt driver: the only package of metasched
// that imports libvirt.org/go/libvirt (cgo).
//
// A Host is one libvirt connection (test:///default, test:///PATH.xml,
// qemu+unix:///session?socket=PATH, qemu:///system, qemu+ssh://HOST/system,
// ...). Every call checks that the connection is alive and re-opens it when
// it is not (a read is then retried once); Options.OnReconnect tells the
// owner, because a file-based test host has lost its domains.
//
// Domains are persistent (defined, then started) and described by
// package domxml, with the job and pool in their metadata. Resizes are
// read back from the hypervisor (GetInfo: vCPUs in use, the balloon's
// actual memory). Live migration is Migrate3 managed from this process
// (MIGRATE_LIVE, PERSIST_DEST, UNDEFINE_SOURCE) with an explicit
// tcp://ADDR:PORT, watched every 200 ms through GetJobInfo and aborted
// (AbortJob) on cancel or when the data processed does not grow within the
// progress timeout. Between test-driver hosts, which cannot migrate, a move
// is define-on-destination then destroy-on-source.
//
// A guest that boots (package image's bundled image, say) is created with
// CreateDomain from a full domxml.Domain: kernel, initrd, command line,
// console file, guest agent channel. Its QEMU guest agent is reached
// through libvirt's QemuAgentCommand (AgentCommand, with commands and
// replies of package qga): WaitAgent pings it until it answers, GuestExec
// runs a program in the guest and waits for its exit code and output.
//
// libvirt errors become *Error values that wrap both a sentinel of package
// hypervisorproxy (ErrNotFound, ErrUnsupported, ErrConnLost, ...) and the
// libvirt.Error itself. Every libvirt object is freed.
//
// Costs measured on a 2-core machine (go test -bench; the figures are in
// docs/results.md):
// create and start about 0.5 ms and destroy about 25 µs on the test
// driver; a live migration of an idle 128 MiB QEMU guest between two
// libvirtd daemons on one machine about 1.9 s (downtime about 25 ms); a
// 128 MiB guest of the bundled image boots to its agent's answer in 4 to
// 7 s, and a guest-exec round trip takes about 0.1 s.
//
// The design is described in docs/internals/agent.md of the
// repository.
package virt
