package gramvm

import "github.com/metasched/metasched/selection"

// Host is a host of the grid as the caller knows it: gramvm keeps no
// inventory and asks no agent, its caller (the daemon) tells it its hosts.
type Host struct {
	Site string `json:"site"` // the grid cluster it belongs to
	Name string `json:"name"`
	Pool string `json:"pool"`
	// Ready says the host serves its pool now and can take a VM: its
	// agent answers, it is ready and no switch holds it.
	Ready     bool `json:"ready"`
	CPUs      int  `json:"cpus"`
	MemoryMiB int  `json:"memory_mib"`
	// FreeVCPUs and FreeMemoryMiB are what its VMs (and whatever the
	// caller has promised) leave of it.
	FreeVCPUs     int      `json:"free_vcpus"`
	FreeMemoryMiB int      `json:"free_memory_mib"`
	VMs           []HostVM `json:"vms,omitempty"`
}

// HostVM is a VM on a host: the job it runs for (empty for none) and its
// current size.
type HostVM struct {
	Name      string `json:"name"`
	Job       string `json:"job,omitempty"`
	VCPUs     int    `json:"vcpus"`
	MemoryMiB int    `json:"memory_mib"`
}

// FreeHosts lists, per site, the hosts of the pool that are ready and can
// take one VM of the given shape, in the order given.
func FreeHosts(hosts []Host, pool string, vm selection.VM) map[string][]string {
	free := map[string][]string{}
	for _, h := range hosts {
		if h.Ready && h.Pool == pool && h.FreeVCPUs >= vm.VCPUs && h.FreeMemoryMiB >= vm.MemoryMiB {
			free[h.Site] = append(free[h.Site], h.Name)
		}
	}
	return free
}

// HostCapacity is a host's size and what its VMs leave free.
type HostCapacity struct {
	Site          string `json:"site"`
	Host          string `json:"host"`
	CPUs          int    `json:"cpus"`
	MemoryMiB     int    `json:"memory_mib"`
	FreeVCPUs     int    `json:"free_vcpus"`
	FreeMemoryMiB int    `json:"free_memory_mib"`
}

// HostCapacities lists the capacity of every host, in the order given.
func HostCapacities(hosts []Host) []HostCapacity {
	var out []HostCapacity
	for _, h := range hosts {
		out = append(out, HostCapacity{Site: h.Site, Host: h.Name, CPUs: h.CPUs, MemoryMiB: h.MemoryMiB,
			FreeVCPUs: h.FreeVCPUs, FreeMemoryMiB: h.FreeMemoryMiB})
	}
	return out
}

// JobVMs lists the VMs of a job on the hosts, in the order given.
func JobVMs(hosts []Host, job string) []TunableVM {
	var out []TunableVM
	for _, h := range hosts {
		for _, v := range h.VMs {
			if v.Job == job {
				out = append(out, TunableVM{Name: v.Name, Site: h.Site, Host: h.Name, VCPUs: v.VCPUs, MemoryMiB: v.MemoryMiB})
			}
		}
	}
	return out
}
