package api

// Host states as the daemon shows them.
const (
	HostBusy        = "busy"
	HostIdle        = "idle"
	HostSwitching   = "switching"
	HostStranded    = "stranded"
	HostUnreachable = "unreachable"
	// HostDraining is a host an operator drains: out of its pool's
	// service, with jobs still on it; HostDrained one with none left.
	HostDraining = "draining"
	HostDrained  = "drained"
)

// HostView is one host of the grid. Its VMs are the agents' wire type
// (GET /v1/vms lists them too).
type HostView struct {
	Name  string `json:"name"`
	Site  string `json:"site"`
	Pool  string `json:"pool"`
	State string `json:"state"`
	// Switch is the switch holding the host, with its source and
	// destination pools, while switching or stranded.
	Switch        string `json:"switch,omitempty"`
	From          string `json:"from,omitempty"`
	To            string `json:"to,omitempty"`
	Reason        string `json:"reason,omitempty"`
	CPUs          int    `json:"cpus"`
	MemoryMiB     int    `json:"memory_mib"`
	FreeVCPUs     int    `json:"free_vcpus"`
	FreeMemoryMiB int    `json:"free_memory_mib"`
	VMs           []VM   `json:"vms"`
}

// ClearRequest returns a stranded host to a pool; an empty Pool means the
// source pool of the switch that stranded it.
type ClearRequest struct {
	Pool string `json:"pool,omitempty"`
}

// DrainRequest drains a host (POST /v1/hosts/{name}/drain): no new VM is
// placed on it and it leaves its pool's service; its jobs run to their end
// on it or, with Move, have their VMs live-migrated to other hosts of the
// pool at its site that have room.
type DrainRequest struct {
	Move bool `json:"move,omitempty"`
}

// ResizeRequest asks for new current sizes of a job's VM (POST
// /v1/jobs/{id}/vms/{vm}/resize); a zero field is left as it is, and at
// least one must be given. A VM grows up to its maxima (its size plus the
// serve configuration's vm_headroom) and as far as its host has room.
type ResizeRequest struct {
	VCPUs     int `json:"vcpus,omitempty"`
	MemoryMiB int `json:"memory_mib,omitempty"`
}

// The states of a VM as its agent reports it (VM.State).
const (
	VMRunning  = "running"
	VMPaused   = "paused"
	VMShutoff  = "shutoff"
	VMCrashed  = "crashed"
	VMOther    = "other"
	VMMissing  = "missing" // in the agent's record, not on its host
	VMBuilding = "building"
)

// VM is a VM of a site, as its agent reports it.
type VM struct {
	Name         string `json:"name"`
	Host         string `json:"host"`
	Pool         string `json:"pool,omitempty"`
	Job          string `json:"job,omitempty"`
	State        string `json:"state"`
	VCPUs        int    `json:"vcpus"`
	MaxVCPUs     int    `json:"max_vcpus"`
	MemoryMiB    int    `json:"memory_mib"`
	MaxMemoryMiB int    `json:"max_memory_mib"`
	// Managed is false for a domain the agent did not create (found on
	// the host); the agent counts its size but does not touch it.
	Managed bool `json:"managed"`
	// BootSeconds is the time from the VM's creation to its readiness
	// (its guest agent answers and, on a cloud-init image, cloud-init has
	// finished), for a VM that booted its pool's image; AgentSeconds to
	// its guest agent's first answer.
	BootSeconds  float64 `json:"boot_seconds,omitempty"`
	AgentSeconds float64 `json:"agent_seconds,omitempty"`
	// User is the job user of a VM of a cloud-init image.
	User string `json:"user,omitempty"`
	// Address is the VM's IPv4 address with its network's prefix length;
	// empty when the site has no network.
	Address string `json:"address,omitempty"`
	// Kind is "slurm" for an allocation on a node of a Slurm site; empty
	// for a VM.
	Kind string `json:"kind,omitempty"`
	// CPUQuota is the fraction of one host core each vCPU may use; 0: no
	// limit.
	CPUQuota float64 `json:"cpu_quota,omitempty"`
}
