package metasched

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

// history is the ring of chart samples.
type history struct {
	mu      sync.Mutex
	samples []api.Sample
}

func (h *history) add(s api.Sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) == api.HistorySamples {
		h.samples = slices.Delete(h.samples, 0, 1)
	}
	h.samples = append(h.samples, s)
}

// last returns the newest sample.
func (h *history) last() (api.Sample, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.samples) == 0 {
		return api.Sample{}, false
	}
	return h.samples[len(h.samples)-1], true
}

func (h *history) all() []api.Sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.samples)
}

func newInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sample reads one chart point from the pools.
func sample(now time.Time, pools []api.Pool) api.Sample {
	s := api.Sample{At: now, Queue: map[string]int{}, Jobs: map[string]int{}, Servers: map[string]int{}}
	for _, p := range pools {
		s.Queue[p.Name], s.Jobs[p.Name], s.Servers[p.Name] = p.Queued, p.Jobs, len(p.Hosts)
	}
	s.CostRate = holdingCostRate(pools)
	return s
}

// holdingCostRate is Σ c_i j_i over the pools.
func holdingCostRate(pools []api.Pool) float64 {
	r := 0.0
	for _, p := range pools {
		r += p.HoldingCost * float64(p.Jobs)
	}
	return r
}

// sampleLoop records a chart sample every second.
func (d *Daemon) sampleLoop(ctx context.Context) {
	t := d.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		d.hist.add(sample(d.now(), d.Pools()))
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// Sample is the newest chart sample, or one taken now when the daemon
// has none yet.
func (d *Daemon) Sample() api.Sample {
	if s, ok := d.hist.last(); ok {
		return s
	}
	return sample(d.now(), d.Pools())
}

// History is the chart samples of the last api.HistorySamples seconds,
// oldest first.
func (d *Daemon) History() []api.Sample { return d.hist.all() }
