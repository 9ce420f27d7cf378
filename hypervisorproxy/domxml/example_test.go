package domxml_test

import (
	"fmt"

	"github.com/metasched/metasched/hypervisorproxy/domxml"
)

// A qemu VM that boots with 1 vCPU and 128 MiB and may grow live to 4 vCPUs
// and 1 GiB: the memory headroom adds <maxMemory> and a NUMA cell, and the
// driver later grows the guest with DIMMs.
func Example() {
	d := domxml.Domain{
		Type: "qemu", Name: "tiny",
		VCPUs: 1, MaxVCPUs: 4,
		MemoryMiB: 128, MaxMemoryMiB: 1024,
		Job: "render-42", Pool: "batch",
	}
	x, err := d.XML()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(x)

	desc, err := domxml.Parse(x)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d/%d vCPUs, %d/%d MiB, %d slots, job %s, pool %s\n",
		desc.VCPUs, desc.MaxVCPUs, desc.MemoryMiB, desc.MaxMemoryMiB, desc.Slots, desc.Job, desc.Pool)
	// Output:
	// <domain type='qemu'>
	//   <name>tiny</name>
	//   <metadata>
	//     <metasched:vm xmlns:metasched='https://metasched.github.io/xmlns/vm/1' job='render-42' pool='batch'/>
	//   </metadata>
	//   <maxMemory slots='16' unit='MiB'>1024</maxMemory>
	//   <memory unit='MiB'>128</memory>
	//   <currentMemory unit='MiB'>128</currentMemory>
	//   <vcpu placement='static' current='1'>4</vcpu>
	//   <os>
	//     <type arch='x86_64' machine='pc'>hvm</type>
	//   </os>
	//   <features>
	//     <acpi/>
	//     <apic/>
	//   </features>
	//   <cpu mode='custom' match='exact'>
	//     <model fallback='allow'>qemu64</model>
	//     <numa>
	//       <cell id='0' cpus='0-3' memory='128' unit='MiB'/>
	//     </numa>
	//   </cpu>
	//   <on_poweroff>destroy</on_poweroff>
	//   <on_reboot>restart</on_reboot>
	//   <on_crash>destroy</on_crash>
	//   <devices>
	//     <emulator>/usr/bin/qemu-system-x86_64</emulator>
	//     <memballoon model='virtio'/>
	//   </devices>
	// </domain>
	// 1/4 vCPUs, 128/1024 MiB, 16 slots, job render-42, pool batch
}

// Validate reports every problem at once, each naming its field.
func ExampleDomain_Validate() {
	err := domxml.Domain{Type: "xen", Name: "-vm", VCPUs: 4, MaxVCPUs: 2, MemoryMiB: 128}.Validate()
	fmt.Println(err)
	// Output:
	// type: must be test or qemu, not "xen"
	// name: must not start with '-'
	// max_vcpus: must be >= vcpus (4)
}

// Growing a qemu domain by 256 MiB is one DIMM attached live.
func ExampleDIMM() {
	fmt.Print(domxml.DIMM(256, 0))
	// Output:
	// <memory model='dimm'>
	//   <target>
	//     <size unit='MiB'>256</size>
	//     <node>0</node>
	//   </target>
	// </memory>
}

// A 4-core, 8 GiB host for libvirt's test driver.
func ExampleNode_XML() {
	x, err := domxml.Node{CPUs: 4, MemoryMiB: 8192}.XML()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(x)
	// Output:
	// <node>
	//   <cpu>
	//     <mhz>2400</mhz>
	//     <model>x86_64</model>
	//     <active>4</active>
	//     <nodes>1</nodes>
	//     <sockets>1</sockets>
	//     <cores>4</cores>
	//     <threads>1</threads>
	//   </cpu>
	//   <memory>8388608</memory>
	// </node>
}
