package domxml

import (
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with testdata/name, or writes it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// wellFormed fails t unless doc is one well-formed XML element.
func wellFormed(t *testing.T, doc string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(doc))
	depth, roots := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, doc)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if depth == 0 && strings.TrimSpace(string(tok)) != "" {
				t.Fatalf("text outside the root element: %q", tok)
			}
		}
	}
	if roots != 1 {
		t.Fatalf("%d root elements, want 1", roots)
	}
}

func TestDomainXMLGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		d    Domain
	}{
		{"domain-test.xml", Domain{Type: "test", Name: "vm-1", VCPUs: 2, MemoryMiB: 512}},
		{"domain-test-headroom.xml", Domain{
			Type: "test", Name: "render-42.w3", VCPUs: 2, MaxVCPUs: 8, MemoryMiB: 1024, MaxMemoryMiB: 8192,
			Job: "render-42", Pool: "batch",
		}},
		{"domain-test-escaped.xml", Domain{
			Type: "test", Name: "esc_1", VCPUs: 1, MemoryMiB: 64,
			Job: `<render & "friends">`, Pool: "o'brien's",
		}},
		{"domain-qemu.xml", Domain{Type: "qemu", Name: "tiny", VCPUs: 1, MemoryMiB: 128}},
		{"domain-qemu-headroom.xml", Domain{
			Type: "qemu", Name: "tiny", VCPUs: 1, MaxVCPUs: 4, MemoryMiB: 128, MaxMemoryMiB: 1024,
			Job: "render-42", Pool: "batch",
		}},
		{"domain-qemu-escaped.xml", Domain{
			Type: "qemu", Name: "q2", VCPUs: 2, MemoryMiB: 256, MaxMemoryMiB: 512,
			Job: `a<b>&"c"`, Pool: "pool 'x'", Emulator: DefaultEmulator,
		}},
		{"domain-qemu-job-only.xml", Domain{
			Type: "qemu", Name: "solo", VCPUs: 1, MaxVCPUs: 1, MemoryMiB: 16, MaxMemoryMiB: 16, Job: "j",
		}},
		{"domain-qemu-boot.xml", bootDomain},
		{"domain-qemu-boot-socket.xml", Domain{
			Type: "qemu", Name: "j-7-w1", VCPUs: 1, MaxVCPUs: 2, MemoryMiB: 128, MaxMemoryMiB: 256, Job: "j-7", Pool: "sim",
			Kernel: "/var/lib/metasched/images/k & 'q'/vmlinuz", Cmdline: `console=ttyS0 a="<b>"`,
			GuestAgent: true, AgentSocket: "/run/metasched/j-7-w1.agent",
		}},
		{"domain-qemu-boot-disk.xml", func() Domain {
			d := bootDomain
			d.Disk = "/var/lib/metasched/overlays/j-7-m.qcow2"
			d.Cmdline += " metasched.root=/dev/vda"
			return d
		}()},
		{"domain-qemu-disk-only.xml", Domain{
			Type: "qemu", Name: "d-1", VCPUs: 1, MemoryMiB: 256, Disk: "/srv/overlays/d 'q' & 1.qcow2", GuestAgent: true,
		}},
		{"domain-qemu-cloud-seed.xml", Domain{
			Type: "qemu", Name: "j-8-m", VCPUs: 1, MemoryMiB: 1024, Disk: "/srv/overlays/j-8-m.qcow2",
			Seed: "/srv/overlays/j-8-m.cidata.iso", GuestAgent: true, Bridge: "msbr-a", MAC: "52:54:0a:01:00:07",
			ConsoleLog: "/var/lib/metasched/consoles/j-8-m.console",
		}},
		{"domain-qemu-boot-net.xml", func() Domain { d := bootDomain; d.Bridge, d.MAC = "msbr-a", "52:54:0a:01:00:05"; return d }()},
		{"domain-qemu-quota.xml", Domain{
			Type: "qemu", Name: "j-9-w1", VCPUs: 1, MaxVCPUs: 2, MemoryMiB: 256, MaxMemoryMiB: 512, Job: "j-9", Pool: "render",
			CPUQuota: 0.25,
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := tc.d.XML()
			if err != nil {
				t.Fatal(err)
			}
			wellFormed(t, got)
			golden(t, tc.file, got)
		})
	}
}

func TestNodeXMLGolden(t *testing.T) {
	for _, tc := range []struct {
		file string
		n    Node
	}{
		{"node.xml", Node{CPUs: 8, MemoryMiB: 16384}},
		{"node-mhz.xml", Node{CPUs: 2, MemoryMiB: 3000, MHz: 3100}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			got, err := tc.n.XML()
			if err != nil {
				t.Fatal(err)
			}
			wellFormed(t, got)
			golden(t, tc.file, got)
		})
	}
}

func TestDIMMGolden(t *testing.T) {
	got := DIMM(128, 0)
	wellFormed(t, got)
	golden(t, "dimm.xml", got)
}
