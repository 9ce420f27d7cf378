package hypervisorproxy_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/internal/yamlx"
	"github.com/metasched/metasched/internal/yamlx/yamlxtest"
)

// FuzzParseSite decodes site files: a file is either refused, with every
// problem naming the file and a field or a line, or gives a site whose
// values are within their documented rules and that comes back the same
// from its own encoding.
func FuzzParseSite(f *testing.F) {
	f.Add([]byte(siteFull))
	f.Add([]byte(siteOK + siteHost))
	f.Add([]byte(siteOK + "grid: g.yaml\npool: render\n"))
	for _, tc := range siteErrorCases {
		f.Add([]byte(tc.yaml))
	}
	files, _ := filepath.Glob("../examples/site-*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := hp.ParseSite("s.yaml", data)
		if err != nil {
			if s != nil {
				t.Errorf("ParseSite returned a site with the error %v", err)
			}
			if err := yamlxtest.CheckError("s.yaml", err); err != nil {
				t.Fatal(err)
			}
			return
		}
		checkSite(t, s)
		js, err := json.Marshal(siteFile(s))
		if err != nil {
			t.Fatal(err)
		}
		back, err := hp.ParseSite("s.yaml", js)
		if err != nil {
			t.Fatalf("the site's own encoding is refused: %v\n%s", err, js)
		}
		if diff := cmp.Diff(s, back); diff != "" {
			t.Fatalf("site after a round trip (-parsed +again):\n%s", diff)
		}
	})
}

// checkSite fails the test when a value of an accepted site breaks the
// rules of a site file.
func checkSite(t *testing.T, s *hp.Site) {
	t.Helper()
	var bad []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	check(yamlx.IsName(s.Site), "site %q", s.Site)
	_, port, err := net.SplitHostPort(s.Listen)
	check(err == nil && port != "", "listen %q", s.Listen)
	check(s.TokenFile != "", "token_file empty")
	check(s.SwitchDelay >= 0, "switch_delay %v", s.SwitchDelay)
	check(s.MigrationProgressTimeout > 0, "migration_progress_timeout %v", s.MigrationProgressTimeout)
	check(s.MigrationPorts[0] >= 1 && s.MigrationPorts[0] <= s.MigrationPorts[1] && s.MigrationPorts[1] <= 65535,
		"migration_ports %v", s.MigrationPorts)
	check(s.Pool == "" || yamlx.IsName(s.Pool), "pool %q", s.Pool)
	check(len(s.Hosts) > 0 || s.Grid != "", "neither hosts nor a grid")
	seen := map[string]bool{}
	for i, h := range s.Hosts {
		check(yamlx.IsName(h.Name) && !seen[h.Name], "hosts[%d].name %q", i, h.Name)
		seen[h.Name] = true
		check(h.URI != "", "hosts[%d].uri empty", i)
		check(h.Pool == "" || yamlx.IsName(h.Pool), "hosts[%d].pool %q", i, h.Pool)
	}
	if len(bad) > 0 {
		t.Fatalf("accepted site breaks its rules: %v\n%+v", bad, s)
	}
}

// siteFile is the site file of s.
func siteFile(s *hp.Site) map[string]any {
	out := map[string]any{
		"site": s.Site, "listen": s.Listen, "token_file": s.TokenFile,
		"switch_delay":               s.SwitchDelay.String(),
		"migration_progress_timeout": s.MigrationProgressTimeout.String(),
		"migration_ports":            fmt.Sprintf("%d-%d", s.MigrationPorts[0], s.MigrationPorts[1]),
	}
	for k, v := range map[string]string{"grid": s.Grid, "pool": s.Pool, "data_dir": s.DataDir} {
		if v != "" {
			out[k] = v
		}
	}
	if s.Hosts != nil {
		out["hosts"] = s.Hosts
	}
	return out
}
