package virt

import (
	"errors"
	"strings"
	"testing"

	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

func TestMigrateFlags(t *testing.T) {
	base := libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PERSIST_DEST | libvirt.MIGRATE_UNDEFINE_SOURCE
	for _, tc := range []struct {
		name string
		opt  hp.MigrateOptions
		want libvirt.DomainMigrateFlags
	}{
		{"plain", hp.MigrateOptions{URI: "tcp://127.0.0.1:49152"}, base},
		{"tls", hp.MigrateOptions{URI: "tcp://127.0.0.1:49152", TLS: true}, base | libvirt.MIGRATE_TLS},
		{"bandwidth is a parameter, not a flag", hp.MigrateOptions{URI: "tcp://10.0.0.2:49152", BandwidthMiBps: 100}, base},
		{"tls and a cap", hp.MigrateOptions{URI: "tcp://10.0.0.2:49152", BandwidthMiBps: 100, TLS: true}, base | libvirt.MIGRATE_TLS},
	} {
		if got := migrateFlags(tc.opt); got != tc.want {
			t.Errorf("%s: flags %#x, want %#x", tc.name, got, tc.want)
		}
		if got := migrateFlags(tc.opt); got&(libvirt.MIGRATE_PEER2PEER|libvirt.MIGRATE_TUNNELLED) != 0 {
			t.Errorf("%s: flags %#x: the migration is managed by the agent, not peer to peer", tc.name, got)
		}
	}
}

// A failed migration's error says what the hosts' TLS set-up lacks when
// libvirt's message shows it (these are the messages of libvirt 9.0 and
// QEMU 7.2), and keeps the class libvirt's code gives, but for a host
// that refuses plain migrations.
func TestMigrationError(t *testing.T) {
	const op = "migrate vm-1 from A to B over tcp://127.0.0.1:49152"
	for _, tc := range []struct {
		name     string
		code     libvirt.ErrorNumber
		msg      string
		tls      bool
		hint     string
		sentinel error
	}{
		{"unknown issuer", libvirt.ERR_OPERATION_FAILED,
			"operation failed: job 'migration out' failed: The certificate hasn't got a known issuer", true, tlsFilesHint, nil},
		{"missing files", libvirt.ERR_INTERNAL_ERROR,
			"internal error: unable to execute QEMU command 'object-add': Unable to access credentials /etc/pki/qemu/ca-cert.pem: No such file or directory",
			true, tlsFilesHint, nil},
		{"unreadable files", libvirt.ERR_INTERNAL_ERROR,
			"internal error: unable to execute QEMU command 'object-add': Cannot load certificate '/m/server-cert.pem' & key '/m/server-key.pem': Error while reading file.",
			true, tlsFilesHint, nil},
		{"another host's certificate", libvirt.ERR_OPERATION_FAILED,
			"operation failed: job 'migration out' failed: Certificate does not match the hostname 127.0.0.1", true, tlsNameHint, nil},
		{"forced tls", libvirt.ERR_OPERATION_INVALID,
			"Requested operation is not valid: this libvirtd instance allows migration only with VIR_MIGRATE_TLS flag", false, tlsForceHint, hp.ErrUnsupported},
		{"no room", libvirt.ERR_OPERATION_FAILED, "operation failed: migration out of memory", true, "", nil},
		{"plain migration of an unknown issuer", libvirt.ERR_OPERATION_FAILED,
			"operation failed: job 'migration out' failed: The certificate hasn't got a known issuer", false, "", nil},
		{"aborted", libvirt.ERR_OPERATION_ABORTED, "operation aborted: migration out job: canceled by client", true, "", hp.ErrAborted},
	} {
		err := migrationError(libvirt.Error{Code: tc.code, Message: tc.msg}, tc.tls, "migrate %s from A to B over %s", "vm-1", "tcp://127.0.0.1:49152")
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: %T is not an *Error", tc.name, err)
		}
		if e.Hint != tc.hint {
			t.Errorf("%s: hint %q, want %q", tc.name, e.Hint, tc.hint)
		}
		if want := sentinels[tc.code]; tc.sentinel == nil && e.Sentinel != want {
			t.Errorf("%s: sentinel %v, want libvirt's class %v", tc.name, e.Sentinel, want)
		}
		if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
			t.Errorf("%s: %v is not %v", tc.name, err, tc.sentinel)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, op+": ") || !strings.Contains(msg, tc.msg) || (tc.hint != "" && !strings.HasSuffix(msg, "; "+tc.hint)) {
			t.Errorf("%s: message %q", tc.name, msg)
		}
		if tc.hint == tlsFilesHint && !strings.Contains(msg, "migrate_tls_x509_cert_dir") {
			t.Errorf("%s: message %q does not name migrate_tls_x509_cert_dir", tc.name, msg)
		}
	}
	if migrationError(nil, true, "op") != nil {
		t.Error("migrationError(nil) is not nil")
	}
}
