package hypervisorproxy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// vm is a VM the agent manages: its spec as recorded, and the operation
// that holds it.
type vm struct {
	spec   VMSpec        // Host, VCPUs and MemoryMiB follow the VM
	busy   string        // operation in progress, "" when idle
	moving string        // destination host of a migration in progress
	boot   time.Duration // from the create call to the guest agent's first answer; 0: not booted by the agent
	addr   netip.Addr    // its address on the site's network; invalid: none
}

// record is what the agent knows of its VMs and hosts beyond what the
// hypervisors report: which VMs it manages (and their specs, so that a
// file-based test host that lost its state can be given them back) and
// each host's pool. It is written to DATA_DIR/agent.json after every change
// when the site has a data_dir.
type record struct {
	VMs   []VMSpec          `json:"vms"`   // Host and the current sizes are kept up to date
	Pools map[string]string `json:"pools"` // host -> pool
	// Boot is the boot time of each VM that booted an image, in seconds.
	Boot map[string]float64 `json:"boot_seconds,omitempty"`
	// Addresses is the address each VM holds on the site's network.
	Addresses map[string]netip.Addr `json:"addresses,omitempty"`
	// LeaderEpoch is the highest leader epoch a request carried
	// (LeaderEpochHeader): a request of a lower one is refused.
	LeaderEpoch int64 `json:"leader_epoch,omitempty"`
}

const recordFile = "agent.json"

func loadRecord(dir string) (*record, error) {
	r := &record{Pools: map[string]string{}}
	if dir == "" {
		return r, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if os.IsNotExist(err) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the agent's record: %w", err)
	}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("read the agent's record %s: %w", filepath.Join(dir, recordFile), err)
	}
	if r.Pools == nil {
		r.Pools = map[string]string{}
	}
	return r, nil
}

// save writes the record atomically (temporary file, fsync, rename).
func (r *record) save(dir string) error {
	if dir == "" {
		return nil
	}
	c := record{VMs: slices.Clone(r.VMs), Pools: r.Pools, Boot: r.Boot, Addresses: r.Addresses, LeaderEpoch: r.LeaderEpoch}
	slices.SortFunc(c.VMs, func(a, b VMSpec) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, recordFile+".*")
	if err != nil {
		return fmt.Errorf("save the agent's record: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("save the agent's record: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save the agent's record: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save the agent's record: %w", err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, recordFile)); err != nil {
		return fmt.Errorf("save the agent's record: %w", err)
	}
	return nil
}

// saveLocked writes the record of the agent's VMs and its hosts' pools;
// a.mu must be held.
func (a *Agent) saveLocked() error {
	r := &record{Pools: map[string]string{}, LeaderEpoch: a.epoch}
	for _, v := range a.vms {
		r.VMs = append(r.VMs, v.spec)
		if v.boot > 0 {
			if r.Boot == nil {
				r.Boot = map[string]float64{}
			}
			r.Boot[v.spec.Name] = v.boot.Seconds()
		}
		if v.addr.IsValid() {
			if r.Addresses == nil {
				r.Addresses = map[string]netip.Addr{}
			}
			r.Addresses[v.spec.Name] = v.addr
		}
	}
	for _, h := range a.hosts {
		r.Pools[h.cfg.Name] = h.pool
	}
	if err := r.save(a.dataDir); err != nil {
		a.log.Error().Err(err).Msg("save record")
		return err
	}
	return nil
}
