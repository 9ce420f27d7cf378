package domxml

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Domain
		want Desc
	}{
		{"test", Domain{Type: "test", Name: "vm-1", VCPUs: 2, MemoryMiB: 512},
			Desc{Type: "test", Name: "vm-1", VCPUs: 2, MaxVCPUs: 2, MemoryMiB: 512, MaxMemoryMiB: 512, BootMemoryMiB: 512}},
		{"test headroom", Domain{
			Type: "test", Name: "render-42.w3", VCPUs: 2, MaxVCPUs: 8, MemoryMiB: 1024, MaxMemoryMiB: 8192,
			Job: "render-42", Pool: "batch",
		}, Desc{
			Type: "test", Name: "render-42.w3", VCPUs: 2, MaxVCPUs: 8, MemoryMiB: 1024, MaxMemoryMiB: 8192,
			BootMemoryMiB: 8192, Job: "render-42", Pool: "batch",
		}},
		{"test escaped", Domain{
			Type: "test", Name: "esc_1", VCPUs: 1, MemoryMiB: 64, Job: `<render & "friends">`, Pool: "o'brien's",
		}, Desc{
			Type: "test", Name: "esc_1", VCPUs: 1, MaxVCPUs: 1, MemoryMiB: 64, MaxMemoryMiB: 64, BootMemoryMiB: 64,
			Job: `<render & "friends">`, Pool: "o'brien's",
		}},
		{"qemu", Domain{Type: "qemu", Name: "tiny", VCPUs: 1, MemoryMiB: 128},
			Desc{Type: "qemu", Name: "tiny", VCPUs: 1, MaxVCPUs: 1, MemoryMiB: 128, MaxMemoryMiB: 128, BootMemoryMiB: 128}},
		{"qemu headroom", Domain{
			Type: "qemu", Name: "tiny", VCPUs: 1, MaxVCPUs: 4, MemoryMiB: 128, MaxMemoryMiB: 1024,
			Job: "render-42", Pool: "batch",
		}, Desc{
			Type: "qemu", Name: "tiny", VCPUs: 1, MaxVCPUs: 4, MemoryMiB: 128, MaxMemoryMiB: 1024,
			BootMemoryMiB: 128, Slots: HotplugSlots, Job: "render-42", Pool: "batch",
		}},
		{"qemu escaped unicode", Domain{
			Type: "qemu", Name: "q2", VCPUs: 2, MemoryMiB: 256, MaxMemoryMiB: 512, Job: `a<b>&"c"`, Pool: "pool 'x' é",
		}, Desc{
			Type: "qemu", Name: "q2", VCPUs: 2, MaxVCPUs: 2, MemoryMiB: 256, MaxMemoryMiB: 512,
			BootMemoryMiB: 256, Slots: HotplugSlots, Job: `a<b>&"c"`, Pool: "pool 'x' é",
		}},
		{"qemu pool only", Domain{Type: "qemu", Name: "p", VCPUs: 3, MaxVCPUs: 3, MemoryMiB: 16, Pool: "web"},
			Desc{Type: "qemu", Name: "p", VCPUs: 3, MaxVCPUs: 3, MemoryMiB: 16, MaxMemoryMiB: 16, BootMemoryMiB: 16, Pool: "web"}},
		{"qemu quota", Domain{Type: "qemu", Name: "q", VCPUs: 1, MaxVCPUs: 2, MemoryMiB: 64, CPUQuota: 0.25},
			Desc{Type: "qemu", Name: "q", VCPUs: 1, MaxVCPUs: 2, MemoryMiB: 64, MaxMemoryMiB: 64, BootMemoryMiB: 64, CPUQuota: 0.25}},
		{"qemu disk and seed", Domain{Type: "qemu", Name: "c", VCPUs: 1, MemoryMiB: 64, Disk: "/o/c.qcow2", Seed: "/o/c.cidata.iso"},
			Desc{Type: "qemu", Name: "c", VCPUs: 1, MaxVCPUs: 1, MemoryMiB: 64, MaxMemoryMiB: 64, BootMemoryMiB: 64,
				Disk: "/o/c.qcow2", Seed: "/o/c.cidata.iso"}},
		{"qemu whole core", Domain{Type: "qemu", Name: "q", VCPUs: 1, MemoryMiB: 64, CPUQuota: 1},
			Desc{Type: "qemu", Name: "q", VCPUs: 1, MaxVCPUs: 1, MemoryMiB: 64, MaxMemoryMiB: 64, BootMemoryMiB: 64, CPUQuota: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := tc.d.XML()
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(x)
			if err != nil {
				t.Fatalf("Parse: %v\n%s", err, x)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse(XML()) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// libvirtQEMU is a qemu domain as libvirt 9.0 returns it from GetXMLDesc
// after one 128 MiB DIMM was hot-plugged into a domain defined with 228 MiB
// of boot memory.
const libvirtQEMU = `<domain type='qemu' id='3'>
  <name>tiny</name>
  <uuid>6a1c1d0e-3f0b-4e43-9a53-61d3a7d0a6c1</uuid>
  <metadata>
    <metasched:vm xmlns:metasched="https://metasched.github.io/xmlns/vm/1" job="render-42" pool="batch"/>
  </metadata>
  <maxMemory slots='4' unit='KiB'>1048576</maxMemory>
  <memory unit='KiB'>364544</memory>
  <currentMemory unit='KiB'>364544</currentMemory>
  <vcpu placement='static' current='2'>4</vcpu>
  <resource>
    <partition>/machine</partition>
  </resource>
  <os>
    <type arch='x86_64' machine='pc-i440fx-7.2'>hvm</type>
    <boot dev='hd'/>
  </os>
  <features>
    <acpi/>
    <apic/>
  </features>
  <cpu mode='custom' match='exact' check='full'>
    <model fallback='forbid'>qemu64</model>
    <feature policy='require' name='x2apic'/>
    <feature policy='require' name='hypervisor'/>
    <feature policy='require' name='lahf_lm'/>
    <feature policy='disable' name='svm'/>
    <numa>
      <cell id='0' cpus='0-3' memory='233472' unit='KiB'/>
    </numa>
  </cpu>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='usb' index='0' model='piix3-uhci'>
      <alias name='usb'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x01' function='0x2'/>
    </controller>
    <controller type='pci' index='0' model='pci-root'>
      <alias name='pci.0'/>
    </controller>
    <input type='mouse' bus='ps2'>
      <alias name='input0'/>
    </input>
    <input type='keyboard' bus='ps2'>
      <alias name='input1'/>
    </input>
    <audio id='1' type='none'/>
    <memballoon model='virtio'>
      <alias name='balloon0'/>
      <address type='pci' domain='0x0000' bus='0x00' slot='0x02' function='0x0'/>
    </memballoon>
    <memory model='dimm'>
      <target>
        <size unit='KiB'>131072</size>
        <node>0</node>
      </target>
      <alias name='dimm0'/>
      <address type='dimm' slot='0' base='0x100000000'/>
    </memory>
  </devices>
  <seclabel type='dynamic' model='dac' relabel='yes'>
    <label>+64055:+64055</label>
    <imagelabel>+64055:+64055</imagelabel>
  </seclabel>
</domain>
`

// TestParseCPUTune reads the quota of <cputune> as libvirt 9.0 writes it
// back (with the emulator's and the global period beside the vCPUs'), and
// what libvirt means by no quota.
func TestParseCPUTune(t *testing.T) {
	doc := func(tune string) string {
		return "<domain type='qemu'><name>q</name><memory unit='KiB'>65536</memory><vcpu placement='static'>1</vcpu>" + tune + "</domain>"
	}
	for _, tc := range []struct {
		name, tune string
		want       float64
	}{
		{"libvirt", `<cputune>
    <period>100000</period>
    <quota>25000</quota>
    <emulator_period>100000</emulator_period>
  </cputune>`, 0.25},
		{"other period", "<cputune><period>50000</period><quota>40000</quota></cputune>", 0.8},
		{"no period", "<cputune><quota>50000</quota></cputune>", 0.5},
		{"unlimited", "<cputune><period>100000</period><quota>-1</quota></cputune>", 0},
		{"libvirt's largest", "<cputune><quota>18446744073709551</quota></cputune>", 0},
		{"shares only", "<cputune><shares>1024</shares></cputune>", 0},
		{"none", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Parse(doc(tc.tune))
			if err != nil {
				t.Fatal(err)
			}
			if d.CPUQuota != tc.want {
				t.Errorf("cpu quota %g, want %g", d.CPUQuota, tc.want)
			}
		})
	}
	for _, bad := range []struct{ tune, want string }{
		{"<cputune><quota>lots</quota></cputune>", `cputune: quota: "lots" is not a number of microseconds`},
		{"<cputune><period>0</period><quota>10</quota></cputune>", `cputune: period: "0" is not a positive number of microseconds`},
	} {
		if _, err := Parse(doc(bad.tune)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Parse(%s) = %v, want %q", bad.tune, err, bad.want)
		}
	}
}

func TestParseLibvirt(t *testing.T) {
	want := Desc{
		Type: "qemu", Name: "tiny",
		VCPUs: 2, MaxVCPUs: 4,
		MemoryMiB: 356, MaxMemoryMiB: 1024, BootMemoryMiB: 228, DIMMs: 1, Slots: 4,
		Job: "render-42", Pool: "batch",
	}
	got, err := Parse(libvirtQEMU)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}

	// Two DIMMs in other units, and an XML declaration.
	two := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + strings.Replace(libvirtQEMU,
		"<memory unit='KiB'>364544</memory>", "<memory unit='MiB'>612</memory>", 1)
	two = strings.Replace(two, "<currentMemory unit='KiB'>364544</currentMemory>",
		"<currentMemory unit='GiB'>0</currentMemory>", 1)
	two = strings.Replace(two, "  </devices>", `    <memory model='dimm'>
      <target>
        <size unit='bytes'>268435456</size>
        <node>0</node>
      </target>
    </memory>
    <memory model='nvdimm'>
      <target>
        <size unit='MiB'>1</size>
      </target>
    </memory>
  </devices>`, 1)
	want.MemoryMiB, want.BootMemoryMiB, want.DIMMs = 0, 612-128-256, 2
	got, err = Parse(two)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (two DIMMs) mismatch (-want +got):\n%s", diff)
	}
}

// A test-driver domain as libvirt returns it: KiB, no current attribute on
// <vcpu> (libvirt leaves it out when current equals the maximum), no
// metadata.
func TestParseLibvirtTest(t *testing.T) {
	const x = `<domain type='test' id='2'>
  <name>vm-1</name>
  <uuid>2b0a3b7e-0a51-4c5e-9a8d-0d7b6f0c8f11</uuid>
  <memory unit='KiB'>8388608</memory>
  <currentMemory unit='KiB'>1048576</currentMemory>
  <vcpu placement='static'>8</vcpu>
  <os>
    <type arch='x86_64'>hvm</type>
  </os>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>restart</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
  </devices>
</domain>`
	want := Desc{Type: "test", Name: "vm-1", VCPUs: 8, MaxVCPUs: 8, MemoryMiB: 1024, MaxMemoryMiB: 8192, BootMemoryMiB: 8192}
	got, err := Parse(x)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse mismatch (-want +got):\n%s", diff)
	}
}

func TestParseUnits(t *testing.T) {
	for _, tc := range []struct {
		unit, value string
		want        int // MiB
	}{
		{"", "1048576", 1024}, // libvirt's default unit is KiB
		{"KiB", "1048576", 1024},
		{"k", "2048", 2},
		{"K", "2047", 1}, // rounds down
		{"kib", "1024", 1},
		{"KB", "1048576", 1000},          // 1048576000 bytes
		{"b", "1048575", 0},              // rounds down
		{"bytes", "3145728", 3},          //
		{"MiB", "512", 512},              //
		{"M", "512", 512},                //
		{"MB", "1000", 953},              // 10^9 bytes
		{"GiB", "2", 2048},               //
		{"g", "2", 2048},                 //
		{"GB", "1", 953},                 //
		{"TiB", "16", 16 << 20},          //
		{"TB", "1", 953674},              // 10^12 bytes
		{"PiB", "1", 1 << 30},            //
		{"PB", "1", 953674316},           // 10^15 bytes
		{"EiB", "1", 1 << 40},            //
		{"EB", "1", 953674316406},        // 10^18 bytes
		{" MiB ", " 7 ", 7},              // spaces are trimmed
		{"KiB", "18014398509481984", -1}, // 2^64 bytes overflows
		{"EiB", "16", -1},                // overflows
		{"XiB", "1", -1},                 // unknown unit
		{"KiBB", "1", -1},                //
		{"Ki", "1", -1},                  //
		{"MiB", "-1", -1},                // not a size
		{"MiB", "1.5", -1},               //
		{"MiB", "", -1},                  //
	} {
		t.Run(tc.unit+"/"+tc.value, func(t *testing.T) {
			x := "<domain type='test'><name>u</name><vcpu>1</vcpu><memory unit='" + tc.unit + "'>" + tc.value + "</memory></domain>"
			if tc.unit == "" {
				x = strings.Replace(x, " unit=''", "", 1)
			}
			got, err := Parse(x)
			if tc.want < 0 {
				if err == nil {
					t.Fatalf("Parse(%s) = %+v, want an error", x, got)
				}
				if !strings.HasPrefix(err.Error(), "memory: ") {
					t.Errorf("error %q does not name the memory element", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.MaxMemoryMiB != tc.want || got.MemoryMiB != tc.want || got.BootMemoryMiB != tc.want {
				t.Errorf("memory %s %s: got max %d, current %d, boot %d MiB, want %d",
					tc.value, tc.unit, got.MaxMemoryMiB, got.MemoryMiB, got.BootMemoryMiB, tc.want)
			}
		})
	}
}

// parseErrorCases are domain XMLs Parse refuses and the lines of their
// errors (TestParseErrors), and seeds of FuzzParse.
var parseErrorCases = []struct {
	name, xml string
	want      []string
}{
	{"empty", "", []string{"domain xml: no element"}},
	{"not xml", "hello", []string{"domain xml: no element"}},
	{"broken", "<domain type='test'><name>x</domain>", []string{
		"domain xml: XML syntax error on line 1: element <name> closed by </domain>",
	}},
	{"wrong root", "<node><cpu/></node>", []string{"domain xml: root element is <node>, not <domain>"}},
	{"empty domain", "<domain/>", []string{
		"type: missing", "name: missing", "vcpu: missing", "memory: missing",
	}},
	{"bad numbers", `<domain type='qemu'><name>x</name>
			<maxMemory slots='many' unit='MiB'>1024</maxMemory>
			<memory unit='KiB'>lots</memory><currentMemory unit='QiB'>1</currentMemory>
			<vcpu current='x'>four</vcpu></domain>`, []string{
		`vcpu: "four" is not a count`,
		`vcpu: current: "x" is not a count`,
		`memory: "lots" is not a size`,
		`currentMemory: unknown unit "QiB"`,
		`maxMemory: slots: "many" is not a count`,
	}},
	{"current above max", "<domain type='test'><name>x</name><vcpu current='5'>4</vcpu><memory>1024</memory></domain>", []string{
		"vcpu: current 5 exceeds the maximum 4",
	}},
	{"current memory above memory", "<domain type='test'><name>x</name><vcpu>1</vcpu><memory unit='MiB'>512</memory><currentMemory unit='GiB'>1</currentMemory></domain>", []string{
		"currentMemory: 1073741824 bytes exceeds the maximum 536870912 bytes",
	}},
	{"current memory above maxMemory", `<domain type='qemu'><name>x</name><vcpu>1</vcpu><maxMemory slots='16' unit='MiB'>256</maxMemory>
		<memory unit='MiB'>128</memory><currentMemory unit='MiB'>512</currentMemory></domain>`, []string{
		"currentMemory: 536870912 bytes exceeds the maximum 268435456 bytes",
	}},
	{"dimms exceed memory", `<domain type='qemu'><name>x</name><vcpu>1</vcpu><memory unit='MiB'>100</memory>
			<devices><memory model='dimm'><target><size unit='MiB'>128</size></target></memory>
			<memory model='dimm'><target/></memory>
			<memory model='dimm'><target><size unit='ZiB'>1</size></target></memory></devices></domain>`, []string{
		"devices: memory dimm 1: size missing",
		`devices: memory dimm 2 size: unknown unit "ZiB"`,
		"memory: 104857600 bytes is less than the DIMMs' 134217728 bytes",
	}},
}

func TestParseErrors(t *testing.T) {
	for _, tc := range parseErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.xml)
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", got)
			}
			if diff := cmp.Diff(Desc{}, got); diff != "" {
				t.Errorf("Parse returned a Desc with an error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, errLines(err)); diff != "" {
				t.Errorf("Parse error mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
