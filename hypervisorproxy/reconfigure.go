package hypervisorproxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/internal/yamlx"
)

// MaxPoolName bounds the name of a pool a host is moved to.
const MaxPoolName = 256

// ReconfigureHost moves a host to another pool
// (docs/internals/switch-protocol.md, "Phases"): refused while the host runs a
// VM of a job the coordinator has not released; otherwise the old pool's VMs
// on it are destroyed, the host's pool label is set, and the site's
// switch_delay (emulating a reimage) passes before the call returns. The host
// takes no new VMs meanwhile.
func (a *Agent) ReconfigureHost(ctx context.Context, name string, r Reconfigure) (Reconfigured, error) {
	if err := checkReconfigure(r); err != nil {
		return Reconfigured{}, fmt.Errorf("reconfigure host %s: %w", name, err)
	}
	a.mu.Lock()
	h := a.host(name)
	if h == nil {
		a.mu.Unlock()
		return Reconfigured{}, fmt.Errorf("reconfigure host %q: %w in site %s", name, ErrNotFound, a.site.Site)
	}
	from := h.pool
	var cerr error
	var victims []*vm
	switch {
	case h.switching:
		cerr = fmt.Errorf("%w: a reconfiguration is in progress", ErrBusy)
	case r.ExpectPool != "" && r.ExpectPool != h.pool:
		cerr = fmt.Errorf("expect_pool: %w: the host is in pool %q, not %q", ErrBusy, h.pool, r.ExpectPool)
	case h.hv == nil:
		cerr = errors.Join(ErrConnLost, h.err)
	}
	img, ierr := a.imageLocked(r.Image, h)
	if cerr == nil && ierr != nil {
		cerr = ierr
	}
	if cerr == nil {
		var held []string
		for _, v := range a.vms {
			if v.spec.Host != name && v.moving != name {
				continue
			}
			if v.busy != "" || v.moving == name || (v.spec.Job != "" && !slices.Contains(r.Released, v.spec.Job)) {
				held = append(held, fmt.Sprintf("%s (job %q)", v.spec.Name, v.spec.Job))
				continue
			}
			victims = append(victims, v)
		}
		if len(held) > 0 {
			slices.Sort(held)
			cerr = fmt.Errorf("%w: it runs vms of jobs not released: %s", ErrBusy, strings.Join(held, ", "))
		}
	}
	if cerr != nil {
		a.mu.Unlock()
		return Reconfigured{}, fmt.Errorf("reconfigure host %s for pool %s: %w", name, r.Pool, cerr)
	}
	h.switching = true
	for _, v := range victims {
		v.busy = "destroy"
	}
	hv := h.hv
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		h.switching = false
		a.mu.Unlock()
	}()

	l := a.log.With().Str("op", "reconfigure").Str("host", name).Str("from", from).Str("to", r.Pool).Logger()
	start := time.Now()
	slices.SortFunc(victims, func(x, y *vm) int { return strings.Compare(x.spec.Name, y.spec.Name) })
	var destroyed []string
	for _, v := range victims {
		err := hv.Destroy(ctx, v.spec.Name)
		if errors.Is(err, ErrNotFound) {
			err = nil
		}
		a.mu.Lock()
		if err != nil {
			for _, w := range victims {
				if w.busy == "destroy" {
					w.busy = ""
				}
			}
			a.saveAndUnlock()
			logDone(l, start, err, "reconfiguration failed")
			return Reconfigured{}, fmt.Errorf("reconfigure host %s: destroy vm %s: %w", name, v.spec.Name, err)
		}
		delete(a.vms, v.spec.Name)
		a.touchLocked(v.spec.Name)
		a.mu.Unlock()
		destroyed = append(destroyed, v.spec.Name)
	}
	// The new pool's image, present and whole on the host: put onto a
	// host with an image_dir (and the other images there deleted), else
	// its files checked against their sums where the agent reads them.
	var imageTook time.Duration
	if img != nil {
		t0 := time.Now()
		var err error
		if ih, ok := hv.(ImageHypervisor); ok && h.cfg.ImageDir != "" {
			var names []string
			if names, err = a.placeImage(ctx, ih, h.cfg.ImageDir, img, nil); err == nil {
				err = ih.PruneImages(ctx, h.cfg.ImageDir, names)
			}
		} else {
			err = img.Verify()
		}
		if err != nil {
			a.mu.Lock()
			a.saveAndUnlock()
			logDone(l, start, err, "reconfiguration failed")
			return Reconfigured{}, fmt.Errorf("reconfigure host %s for pool %s: image %s: %w", name, r.Pool, r.Image, err)
		}
		imageTook = time.Since(t0)
	}
	// A host whose hypervisor keeps its pool (a Slurm node's partition)
	// is moved there; work of the hypervisor's own users on it may end
	// first, within its limit, else the host stays where it was (ErrBusy).
	if ph, ok := hv.(PoolHypervisor); ok && from != r.Pool {
		if err := ph.SetPool(ctx, from, r.Pool); err != nil {
			a.mu.Lock()
			a.saveAndUnlock()
			logDone(l, start, err, "reconfiguration failed")
			return Reconfigured{}, fmt.Errorf("reconfigure host %s for pool %s: %w", name, r.Pool, err)
		}
	}
	a.mu.Lock()
	h.pool = r.Pool
	a.saveAndUnlock()
	if d := a.site.SwitchDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			logDone(l, start, ctx.Err(), "reconfiguration interrupted before its switch delay ended (the daemon stopping, or giving up on the step): the host is labelled for the new pool already; the daemon finishes or undoes the switch, at its next start if it is stopping")
			return Reconfigured{}, fmt.Errorf("reconfigure host %s: %w (the pool label is %s already)", name, ctx.Err(), r.Pool)
		case <-t.C:
		}
	}
	logDone(l.With().Strs("destroyed", destroyed).Logger(), start, nil, "host reconfigured")
	a.mu.Lock()
	h.switching = false
	a.mu.Unlock()
	sts := a.observe(ctx, name)
	a.mu.Lock()
	defer a.mu.Unlock()
	if destroyed == nil {
		destroyed = []string{}
	}
	return Reconfigured{Host: a.hostLocked(sts[0]), From: from, Destroyed: destroyed, Seconds: time.Since(start).Seconds(),
		ImageSeconds: imageTook.Seconds()}, nil
}

// checkReconfigure checks a reconfiguration's fields.
func checkReconfigure(r Reconfigure) error {
	var errs []error
	if r.Pool == "" {
		errs = append(errs, errors.New("pool: is required"))
	} else if msg := checkPoolName(r.Pool); msg != "" {
		// The host's VMs carry its pool in their domain's metadata, and
		// the daemon names pools by its job types: a pool's name.
		errs = append(errs, fmt.Errorf("pool: %s", msg))
	}
	if msg := CheckImageName(r.Image); r.Image != "" && msg != "" {
		errs = append(errs, fmt.Errorf("image: %s", msg))
	}
	if msg := checkPoolName(r.ExpectPool); r.ExpectPool != "" && msg != "" {
		errs = append(errs, fmt.Errorf("expect_pool: %s", msg))
	}
	if len(r.Released) > MaxReleased {
		errs = append(errs, fmt.Errorf("released: at most %d jobs, not %d", MaxReleased, len(r.Released)))
	} else {
		for i, j := range r.Released {
			msg := domxml.CheckLabel(j)
			if j == "" {
				msg = "must not be empty"
			}
			if msg != "" {
				errs = append(errs, fmt.Errorf("released[%d]: %s", i, msg))
				break // one is enough to say what is wrong
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// CheckImageName says what is wrong with an image's name, or "".
func CheckImageName(n string) string {
	if len(n) > MaxPoolName || !yamlx.IsName(n) {
		return fmt.Sprintf("must be an image name (a-z, 0-9, -) of at most %d characters, not %.64q", MaxPoolName, n)
	}
	return ""
}

// checkPoolName says what is wrong with a pool's name, or "".
func checkPoolName(p string) string {
	if len(p) > MaxPoolName || !yamlx.IsName(p) {
		return fmt.Sprintf("must be a pool name (a-z, 0-9, -) of at most %d characters, not %.64q", MaxPoolName, p)
	}
	return ""
}
