package hypervisorproxy

import (
	"slices"
	"time"
)

// The agent's API types: the JSON bodies of its HTTP API (see server.go for
// the routes) and the values of its Go methods.

// State is the state of a VM.
type State string

// VM states.
const (
	StateRunning  State = "running"
	StatePaused   State = "paused"
	StateShutoff  State = "shutoff"
	StateCrashed  State = "crashed"
	StateOther    State = "other"
	StateMissing  State = "missing" // in the agent's record, not on its host
	StateBuilding State = "building"
	// StateMigrating: the VM is moving to another host, and its domain is
	// on neither for the moment the inventory looked (the source undefined
	// it, the agent has not yet noted the destination).
	StateMigrating State = "migrating"
)

// HostState is the state of a host.
type HostState string

// Host states.
const (
	HostReady       HostState = "ready"
	HostSwitching   HostState = "switching"   // being reconfigured for another pool
	HostUnreachable HostState = "unreachable" // its hypervisor cannot be reached
)

// VMSpec asks for a VM. Host and Pool are optional: without a host the
// agent picks the host of the pool (any pool when Pool is empty) with the
// most free vCPUs that fits the VM (ties: the first in the site file);
// without a pool the VM joins its host's pool. MaxVCPUs and MaxMemoryMiB
// (0: equal to the current sizes) bound later live resizes. Image names
// the image the VM boots, one of the site file's images (the daemon gives
// its job type's); a VM without one boots nothing, and test-driver hosts
// boot nothing, image or not.
type VMSpec struct {
	Name         string `json:"name"`
	Host         string `json:"host,omitempty"`
	Pool         string `json:"pool,omitempty"`
	Job          string `json:"job,omitempty"`
	VCPUs        int    `json:"vcpus"`
	MemoryMiB    int    `json:"memory_mib"`
	MaxVCPUs     int    `json:"max_vcpus,omitempty"`
	MaxMemoryMiB int    `json:"max_memory_mib,omitempty"`
	Image        string `json:"image,omitempty"`
	// SSHKeys are the ssh public keys (authorized_keys lines) of the job
	// user of a VM of a cloud-init image, put into its seed's user-data;
	// a VM of another image ignores them.
	SSHKeys []string `json:"ssh_authorized_keys,omitempty"`
	// WalltimeSeconds is the job's walltime (0: none): on a Slurm site
	// the allocation's time limit is that and a minute (it is made before
	// the command starts), rounded up to Slurm's minutes, so that Slurm
	// ends the job's share too; a VM ignores it.
	WalltimeSeconds int64 `json:"walltime_seconds,omitempty"`
}

// Equal reports whether two specs are the same.
func (s VMSpec) Equal(o VMSpec) bool {
	return s.Name == o.Name && s.Host == o.Host && s.Pool == o.Pool && s.Job == o.Job &&
		s.VCPUs == o.VCPUs && s.MemoryMiB == o.MemoryMiB && s.MaxVCPUs == o.MaxVCPUs &&
		s.MaxMemoryMiB == o.MaxMemoryMiB && s.Image == o.Image && slices.Equal(s.SSHKeys, o.SSHKeys) &&
		s.WalltimeSeconds == o.WalltimeSeconds
}

// VM is a VM of the site, as its host reports it.
type VM struct {
	Name         string `json:"name"`
	Host         string `json:"host"`
	Pool         string `json:"pool,omitempty"`
	Job          string `json:"job,omitempty"`
	State        State  `json:"state"`
	VCPUs        int    `json:"vcpus"`
	MaxVCPUs     int    `json:"max_vcpus"`
	MemoryMiB    int    `json:"memory_mib"`
	MaxMemoryMiB int    `json:"max_memory_mib"`
	// Managed is false for a domain the agent did not create (found on
	// the host); the agent counts its size but does not touch it.
	Managed bool `json:"managed"`
	// BootSeconds is the time from the VM's creation to its readiness,
	// for a VM that booted its pool's image: its guest agent answers and,
	// on a cloud-init image, cloud-init has finished. AgentSeconds is the
	// time to the guest agent's first answer.
	BootSeconds  float64 `json:"boot_seconds,omitempty"`
	AgentSeconds float64 `json:"agent_seconds,omitempty"`
	// User is the job user of a VM of a cloud-init image (cloud-init made
	// it, with the spec's ssh keys): the account its job runs as. Empty:
	// the job runs as root (the bundled image).
	User string `json:"user,omitempty"`
	// Address is the VM's IPv4 address on its site's network, with the
	// network's prefix length (10.77.1.12/16), or a Slurm node's address
	// (/32); empty when the site has no network.
	Address string `json:"address,omitempty"`
	// Kind is "slurm" for an allocation on a node of a Slurm site (the
	// job's commands run on the node's own system, beside other jobs);
	// empty for a VM.
	Kind string `json:"kind,omitempty"`
	// CPUQuota is the fraction of one host core each of the VM's vCPUs
	// may use, as its hypervisor reports it (the site file's cpu_quota
	// when the VM was created); 0: no limit.
	CPUQuota float64 `json:"cpu_quota,omitempty"`
}

// Host is one physical host of the site.
type Host struct {
	Name  string    `json:"name"`
	URI   string    `json:"uri"`
	Pool  string    `json:"pool,omitempty"`
	State HostState `json:"state"`
	Error string    `json:"error,omitempty"` // why it is unreachable
	Model string    `json:"model,omitempty"`
	CPUs  int       `json:"cpus"`
	// MemoryMiB is the host's memory; the Free figures are what the VMs
	// on it (running or not) leave, counting their current sizes.
	MemoryMiB     int `json:"memory_mib"`
	FreeVCPUs     int `json:"free_vcpus"`
	FreeMemoryMiB int `json:"free_memory_mib"`
	// VCPUUnplug says the host's hypervisor can take vCPUs out of a
	// running VM (libvirt's test driver can; QEMU cannot unplug the
	// vCPUs of its guests): bandwidth tuning shrinks VMs only there.
	VCPUUnplug bool `json:"vcpu_unplug"`
	VMs        []VM `json:"vms"`
}

// Inventory is the state of the whole site.
type Inventory struct {
	Site  string    `json:"site"`
	At    time.Time `json:"at"`
	Hosts []Host    `json:"hosts"`
}

// Resize asks for new current sizes of a VM; a zero field is left as it is.
type Resize struct {
	VCPUs     int `json:"vcpus,omitempty"`
	MemoryMiB int `json:"memory_mib,omitempty"`
}

// MigrateRequest moves a VM to another host of the site.
type MigrateRequest struct {
	Host string `json:"host"`
}

// Migration is the result of a move.
type Migration struct {
	VM   VM     `json:"vm"`
	From string `json:"from"`
	To   string `json:"to"`
	// Live is true for a live migration; false for a cold move (the test
	// driver: defined on the destination, destroyed on the source).
	Live       bool    `json:"live"`
	Seconds    float64 `json:"seconds"`
	DowntimeMs float64 `json:"downtime_ms,omitempty"`
	// DataMiB is what the hypervisor transferred, when it says.
	DataMiB float64 `json:"data_mib,omitempty"`
	URI     string  `json:"uri,omitempty"` // the tcp://ADDR:PORT used
	// TLS is true when the live migration went over TLS (the site file's
	// migration_tls).
	TLS bool `json:"tls,omitempty"`
	// Disk is true when the VM's disk moved with it: its hosts do not
	// share the storage of its overlay (a host with an image_dir), so the
	// destination made a new overlay on its own copy of the image and the
	// migration copied what the VM had written.
	Disk bool `json:"disk,omitempty"`
}

// Reconfigure asks to move a host to another pool. Released lists the jobs
// whose VMs the coordinator has released: the host is refused while it runs
// a VM of any other job. ExpectPool, when set, must be the host's pool now.
// Pools are pool names (a-z, 0-9, -) of at most MaxPoolName characters,
// released jobs labels of at most 256 bytes without control
// characters, and Released lists at most MaxReleased jobs. Image, when
// set, is the image of the new pool's VMs (one of the site file's): the
// agent makes it present on the host (checked against its sums) as part of
// the reconfiguration.
type Reconfigure struct {
	Pool       string   `json:"pool"`
	Image      string   `json:"image,omitempty"`
	ExpectPool string   `json:"expect_pool,omitempty"`
	Released   []string `json:"released,omitempty"`
}

// MaxReleased bounds Reconfigure.Released: a host runs fewer VMs than
// that.
const MaxReleased = 1024

// Reconfigured is the result of a reconfiguration.
type Reconfigured struct {
	Host      Host     `json:"host"`
	From      string   `json:"from"`
	Destroyed []string `json:"destroyed"` // the old pool's VMs
	Seconds   float64  `json:"seconds"`
	// ImageSeconds is the part of Seconds spent making the new pool's
	// image present on the host.
	ImageSeconds float64 `json:"image_seconds,omitempty"`
}

// ProbeRequest asks the agent to measure its throughput to another agent,
// the agent of site Site at Target (https://HOST:PORT): it sends Bytes
// (default 8 MiB) to that agent's probe sink within Timeout (default
// 30 s), over mutual TLS: each proves itself by its certificate, and the
// sender checks that the other's names Site. No credential travels.
type ProbeRequest struct {
	Target  string `json:"target"`
	Site    string `json:"site"`
	Bytes   int64  `json:"bytes,omitempty"`
	Timeout string `json:"timeout,omitempty"`
}

// Probe is a measured throughput. Seconds runs from the receiver's first
// byte to its last, so a connection set-up does not count.
type Probe struct {
	Target     string    `json:"target"`
	Bytes      int64     `json:"bytes"`
	Seconds    float64   `json:"seconds"`
	Mbps       float64   `json:"mbps"`
	MeasuredAt time.Time `json:"measured_at"`
}

// SinkResult is what a probe sink reports to the sender: Bytes arrived in
// Seconds (the first read's bytes, which arrived before the clock started,
// are left out of Bytes but counted in TotalBytes).
type SinkResult struct {
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	TotalBytes int64   `json:"total_bytes"`
}

// APIError is the body of every error response.
type APIError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// GuestExec starts a program inside a VM through its QEMU guest agent
// (guest-exec). Env, when set, is the program's whole environment
// (KEY=VALUE). Input is the program's stdin, at most MaxGuestInput bytes.
type GuestExec struct {
	Path          string   `json:"path"`
	Args          []string `json:"args,omitempty"`
	Env           []string `json:"env,omitempty"`
	Input         []byte   `json:"input,omitempty"`
	CaptureOutput bool     `json:"capture_output,omitempty"`
}

// GuestProcess is a program started by GuestExec.
type GuestProcess struct {
	PID int `json:"pid"`
}

// GuestExecStatus is the state of a program started by GuestExec
// (guest-exec-status). The guest agent forgets a program once it has
// reported its exit. Stdout and Stderr are there only for a program
// started with CaptureOutput, once it has exited.
type GuestExecStatus struct {
	Exited    bool   `json:"exited"`
	ExitCode  int    `json:"exit_code"`
	Signal    int    `json:"signal,omitempty"`
	Stdout    []byte `json:"stdout,omitempty"`
	Stderr    []byte `json:"stderr,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// GuestFileChunk is a piece of a file inside a VM, read at an offset.
// EOF says Data reaches the file's end as it was when read.
type GuestFileChunk struct {
	Data []byte `json:"data"`
	EOF  bool   `json:"eof"`
}

// MaxWalltimeSeconds bounds VMSpec.WalltimeSeconds: a year.
const MaxWalltimeSeconds = 366 * 24 * 3600

// Bounds of the guest calls.
const (
	MaxGuestInput = 1 << 20 // GuestExec.Input
	MaxGuestWrite = 8 << 20 // a file written into a guest
	MaxGuestRead  = 1 << 20 // a chunk read from a guest's file
)
