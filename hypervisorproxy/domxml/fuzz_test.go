package domxml

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse reads domain XMLs as a hypervisor returns them: a description
// is either refused, with every problem naming the element it is about
// (or "domain xml" for the document), and nothing else returned, or gives
// sizes that are consistent (current ones within the maxima); a description of a test domain that Domain
// can write comes back the same from Domain.XML.
func FuzzParse(f *testing.F) {
	for _, tc := range parseErrorCases {
		f.Add(tc.xml)
	}
	f.Add(libvirtQEMU)
	files, err := filepath.Glob("testdata/domain-*.xml")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	prefixes := []string{"domain xml: ", "type: ", "name: ", "vcpu: ", "memory: ", "currentMemory: ", "maxMemory: ", "devices: memory dimm "}
	f.Fuzz(func(t *testing.T, x string) {
		d, err := Parse(x)
		if err != nil {
			if d != (Desc{}) {
				t.Errorf("Parse returned %+v with the error %v", d, err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				named := false
				for _, p := range prefixes {
					named = named || strings.HasPrefix(line, p)
				}
				if !named {
					t.Fatalf("problem %q names no element of the domain", line)
				}
			}
			return
		}
		if d.Type == "" || d.Name == "" || d.Name != strings.TrimSpace(d.Name) {
			t.Errorf("type %q, name %q", d.Type, d.Name)
		}
		if d.VCPUs < 0 || d.VCPUs > d.MaxVCPUs || d.MemoryMiB < 0 || d.MemoryMiB > d.MaxMemoryMiB || d.BootMemoryMiB < 0 ||
			d.DIMMs < 0 || d.Slots < 0 {
			t.Fatalf("inconsistent sizes: %+v", d)
		}
		if d.Type != TypeTest || d.DIMMs != 0 || d.Slots != 0 || d.BootMemoryMiB != d.MaxMemoryMiB {
			return
		}
		dom := Domain{Type: d.Type, Name: d.Name, VCPUs: d.VCPUs, MaxVCPUs: d.MaxVCPUs, MemoryMiB: d.MemoryMiB,
			MaxMemoryMiB: d.MaxMemoryMiB, Job: d.Job, Pool: d.Pool}
		if dom.Validate() != nil {
			return
		}
		out, err := dom.XML()
		if err != nil {
			t.Fatalf("XML of %+v: %v", dom, err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse of the domain's own XML: %v\n%s", err, out)
		}
		if diff := cmp.Diff(d, back); diff != "" {
			t.Fatalf("description after Domain.XML (-parsed +again):\n%s", diff)
		}
	})
}
