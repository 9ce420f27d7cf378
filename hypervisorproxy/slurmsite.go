package hypervisorproxy

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/internal/yamlx"
)

// KindSlurm is the Kind of a VM that is an allocation on a Slurm node.
const KindSlurm = "slurm"

// slurmName is what Slurm accepts as a node or partition name here.
var slurmName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$`)

// IsSlurmURI says whether uri names a Slurm node (slurm:NODE), well
// formed or not.
func IsSlurmURI(uri string) bool { return strings.HasPrefix(uri, SlurmScheme+":") }

// SlurmNode returns the node of a Slurm host's URI, slurm:NODE.
func SlurmNode(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != SlurmScheme || u.Opaque == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("must be slurm:NODE for a node of the site's Slurm cluster, not %q", uri)
	}
	if !slurmName.MatchString(u.Opaque) {
		return "", fmt.Errorf("%q: %q is not a Slurm node name", uri, u.Opaque)
	}
	return u.Opaque, nil
}

// parseSlurm decodes a site file's slurm block.
func parseSlurm(v yamlx.Value, dir string) *SlurmSite {
	m, ok := v.Map(slurmFields...)
	if !ok {
		return nil
	}
	s := &SlurmSite{SwitchTimeout: DefaultSlurmSwitchTimeout, Partitions: map[string]string{}}
	if m.Has("conf") {
		s.Conf = m.File("conf", false, dir)
	}
	if b, ok := m.Str("bin", false); ok {
		if !filepath.IsAbs(b) || filepath.Clean(b) != b {
			m.Errorf("bin", "must be a clean absolute directory, not %q", b)
		}
		s.Bin = b
	}
	if pv, ok := m.Get("partitions", true); ok {
		if pools, ok := pv.Keys(); ok {
			pm, _ := pv.Map(pools...)
			if len(pools) == 0 {
				m.Errorf("partitions", "must map at least one pool to its partition")
			}
			seen := map[string]string{}
			for _, pool := range pools {
				if !yamlx.IsName(pool) {
					pm.Errorf(pool, "must be keyed by a pool name (a-z, 0-9, -), not %q", pool)
					continue
				}
				part, ok := pm.Str(pool, true)
				if !ok {
					continue
				}
				switch {
				case !slurmName.MatchString(part):
					pm.Errorf(pool, "%q is not a Slurm partition name", part)
				case seen[part] != "":
					pm.Errorf(pool, "partition %q is pool %s's already: a partition is one pool", part, seen[part])
				default:
					seen[part] = pool
					s.Partitions[pool] = part
				}
			}
		}
	}
	if tv, ok := m.Get("switch_timeout", false); ok {
		if str, ok := tv.Str(); ok {
			x, err := time.ParseDuration(str)
			switch {
			case err != nil:
				tv.Errorf("not a duration like 30s or 2m: %q", str)
			case x <= 0:
				tv.Errorf("must be > 0")
			default:
				s.SwitchTimeout = x
			}
		}
	}
	return s
}

// checkSlurmHosts holds a site to one kind of host: with a slurm block,
// every host is listed, with a slurm:NODE URI and a pool of the block's
// partitions if it names one; without, no host is a Slurm node.
func checkSlurmHosts(top *yamlx.Map, s *Site) {
	slurmHost := func(h SiteHost) bool { return IsSlurmURI(h.URI) }
	if s.Slurm == nil {
		if i := slices.IndexFunc(s.Hosts, slurmHost); i >= 0 {
			top.Errorf("hosts", "host %s is a Slurm node (%s), but the site has no slurm block", s.Hosts[i].Name, s.Hosts[i].URI)
		}
		return
	}
	if len(s.Hosts) == 0 {
		top.Errorf("hosts", "must list the Slurm nodes the site gives the grid (uri slurm:NODE): a Slurm site's hosts are not generated")
	}
	for _, field := range []string{"images", "network", "cpu_quota", "migration_tls"} {
		if top.Has(field) {
			top.Errorf(field, "does not apply to a Slurm site: its jobs run on the nodes themselves")
		}
	}
	for _, h := range s.Hosts {
		switch {
		case !slurmHost(h):
			top.Errorf("hosts", "host %s: uri %s: a Slurm site's hosts are its nodes, slurm:NODE", h.Name, h.URI)
		case h.Pool != "" && s.Slurm.Partitions[h.Pool] == "":
			top.Errorf("hosts", "host %s: pool %s has no partition in slurm.partitions", h.Name, h.Pool)
		}
	}
}
