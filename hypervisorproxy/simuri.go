package hypervisorproxy

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A simulated host (package sim) is named by a URI of the scheme sim:
//
//	sim:///NAME?cpus=8&memory_mib=16384&create=2s&destroy=0s&resize=0s&migrate=5s
//
// cpus and memory_mib are the host's size (required); mhz its clock
// (default 2000); create, destroy, resize and migrate how long each
// operation takes (default 0).

// SimScheme is the URI scheme of simulated hosts.
const SimScheme = "sim"

// SimDelays are how long a simulated host's operations take.
type SimDelays struct {
	Create, Destroy, Resize, Migrate time.Duration
}

// SimSpec is a simulated host (package sim): its name, size and delays.
type SimSpec struct {
	Name      string
	CPUs      int
	MemoryMiB int
	MHz       int
	Delays    SimDelays
}

// MaxSimCPUs and MaxSimMemoryMiB bound a simulated host's size.
const (
	MaxSimCPUs      = 1 << 16
	MaxSimMemoryMiB = 1 << 30
	// MaxSimDelay bounds an operation's delay.
	MaxSimDelay = time.Hour
)

// URI is the URI of the simulated host s.
func (s SimSpec) URI() string {
	q := url.Values{}
	q.Set("cpus", strconv.Itoa(s.CPUs))
	q.Set("memory_mib", strconv.Itoa(s.MemoryMiB))
	if s.MHz != 0 {
		q.Set("mhz", strconv.Itoa(s.MHz))
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"create", s.Delays.Create}, {"destroy", s.Delays.Destroy}, {"resize", s.Delays.Resize}, {"migrate", s.Delays.Migrate}} {
		if d.v != 0 {
			q.Set(d.key, d.v.String())
		}
	}
	return SimScheme + ":///" + url.PathEscape(s.Name) + "?" + q.Encode()
}

// ParseSimURI reads a simulated host's URI; the errors say what is wrong.
func ParseSimURI(uri string) (SimSpec, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != SimScheme {
		return SimSpec{}, fmt.Errorf("%q is not a simulated host's URI (sim:///NAME?cpus=N&memory_mib=M)", uri)
	}
	s := SimSpec{Name: strings.TrimPrefix(u.Path, "/"), MHz: 2000}
	if s.Name == "" || strings.Contains(s.Name, "/") || u.Host != "" {
		return SimSpec{}, fmt.Errorf("%q: a simulated host's URI is sim:///NAME, with a name and no host", uri)
	}
	q := u.Query()
	for key := range q {
		if !slices.Contains([]string{"cpus", "memory_mib", "mhz", "create", "destroy", "resize", "migrate"}, key) {
			return SimSpec{}, fmt.Errorf("%q: unknown parameter %q (cpus, memory_mib, mhz, create, destroy, resize, migrate)", uri, key)
		}
	}
	for _, f := range []struct {
		key      string
		v        *int
		min, max int
		required bool
	}{{"cpus", &s.CPUs, 1, MaxSimCPUs, true}, {"memory_mib", &s.MemoryMiB, 1, MaxSimMemoryMiB, true}, {"mhz", &s.MHz, 1, 1 << 20, false}} {
		v := q.Get(f.key)
		if v == "" {
			if f.required {
				return SimSpec{}, fmt.Errorf("%q: %s: required", uri, f.key)
			}
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < f.min || n > f.max {
			return SimSpec{}, fmt.Errorf("%q: %s: must be a whole number from %d to %d, not %q", uri, f.key, f.min, f.max, v)
		}
		*f.v = n
	}
	for _, f := range []struct {
		key string
		v   *time.Duration
	}{{"create", &s.Delays.Create}, {"destroy", &s.Delays.Destroy}, {"resize", &s.Delays.Resize}, {"migrate", &s.Delays.Migrate}} {
		v := q.Get(f.key)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > MaxSimDelay {
			return SimSpec{}, fmt.Errorf("%q: %s: must be a duration from 0s to %v, like 2s, not %q", uri, f.key, MaxSimDelay, v)
		}
		*f.v = d
	}
	return s, nil
}

// SimURI is the URI of a simulated host with no delays.
func SimURI(name string, cpus, memoryMiB int) string {
	return SimSpec{Name: name, CPUs: cpus, MemoryMiB: memoryMiB}.URI()
}
