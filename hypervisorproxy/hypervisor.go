package hypervisorproxy

import (
	"context"
	"time"
)

// Hypervisor is one host's hypervisor, as the agent uses it. The libvirt
// driver (sub-package virt) implements it over one libvirt connection; tests
// may use any recording fake. Sizes are current sizes; every method reads
// its result back from the hypervisor.
type Hypervisor interface {
	// Node reports the host's CPUs and memory.
	Node(ctx context.Context) (Node, error)
	// Domains lists every VM on the host, in name order.
	Domains(ctx context.Context) ([]Domain, error)
	// Create defines and starts a VM under the limits lim.
	Create(ctx context.Context, spec VMSpec, lim VMLimits) (Domain, error)
	// SetVCPUs changes the VM's vCPUs live.
	SetVCPUs(ctx context.Context, name string, n int) (Domain, error)
	// SetMemory changes the VM's memory live.
	SetMemory(ctx context.Context, name string, mib int) (Domain, error)
	// Migrate moves the VM to dst (a Hypervisor of the same driver).
	Migrate(ctx context.Context, name string, dst Hypervisor, opt MigrateOptions) (MigrateStats, error)
	// Destroy stops and undefines the VM.
	Destroy(ctx context.Context, name string) error
	// Close releases the connection.
	Close() error
}

// Node is a host as its hypervisor reports it.
type Node struct {
	CPUs      int
	MemoryMiB int
	MHz       int
	Model     string
}

// VMLimits are what the agent's site file imposes on every VM it
// creates on a QEMU host (test-driver hosts take none).
type VMLimits struct {
	// CPUQuota is the fraction of one host core each vCPU thread may use
	// (the site file's cpu_quota); 0: no limit.
	CPUQuota float64
}

// Domain is a VM as its hypervisor reports it.
type Domain struct {
	Name         string
	State        State
	VCPUs        int
	MaxVCPUs     int
	MemoryMiB    int
	MaxMemoryMiB int
	Job, Pool    string // from the domain's metadata
	// CPUQuota is the domain's CPU quota per vCPU (a fraction of one
	// core), 0 for none.
	CPUQuota float64
	// Address is where the hypervisor says the VM is reached, with its
	// prefix length ("": the site's network gives the address): a Slurm
	// node's address, /32.
	Address string
}

// MigrateOptions tune a live migration.
type MigrateOptions struct {
	// URI is the destination's migration address, tcp://ADDR:PORT, one
	// port per migration in flight.
	URI string
	// ProgressTimeout aborts a migration that transfers nothing for that
	// long (0: 60 s).
	ProgressTimeout time.Duration
	// BandwidthMiBps caps the migration's bandwidth (0: no cap).
	BandwidthMiBps uint64
	// TLS encrypts a live migration with the hypervisor's native TLS
	// (libvirt's VIR_MIGRATE_TLS, with the certificates of each host's
	// migrate_tls_x509_cert_dir); the site file's migration_tls.
	TLS bool
	// Storage, when set, says the VM's disks are not on storage the
	// destination shares: they are copied with the migration.
	Storage *MigrateStorage
}

// MigrateStorage is how a VM's disk moves with its live migration when the
// destination does not share the source's storage: the destination makes
// the VM's overlay anew in OverlayDir, backed by Base (its own copy of the
// image's disk: the same bytes as the source's base), and its seed from
// Seed (when it has one); the migration copies what the VM wrote (its
// overlay's own clusters, libvirt's non-shared incremental copy, over the
// NBD address DisksURI, tcp://ADDR:PORT); the source's overlay and seed
// are deleted once the VM runs on the destination, the destination's when
// the migration fails.
type MigrateStorage struct {
	OverlayDir string
	// BuildOverlayDir: the destination's hypervisor makes OverlayDir when
	// it is missing (under a host's image_dir).
	BuildOverlayDir bool
	Base            string
	Seed            []byte
	DisksURI        string
}

// MigrateStats is what a driver reports of a finished move.
type MigrateStats struct {
	Live bool
	// TLS is true when the live migration went over TLS.
	TLS      bool
	Duration time.Duration
	Downtime time.Duration
	DataMiB  float64
	// Storage is true when the VM's disk was copied (MigrateOptions.Storage).
	Storage bool
}

// PoolHypervisor is a host whose pool its hypervisor keeps: a Slurm
// node's pool is the partition it is in. The agent asks it where the host
// is when it connects and at every look at the host, and puts the host
// back in the pool the agent holds when they differ (Slurm forgets
// partition changes made at run time when its controller restarts
// without -R or is reconfigured); a pool switch moves it with SetPool.
type PoolHypervisor interface {
	Hypervisor
	// Pool reports the pool the hypervisor has the host in ("": none of
	// the site's pools).
	Pool(ctx context.Context) (string, error)
	// SetPool moves the host from one pool to another. Work of the
	// hypervisor's own users on it may end first, within the
	// hypervisor's own limit: past it the host stays in from and the
	// error is ErrBusy.
	SetPool(ctx context.Context, from, to string) error
}
