package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metasched/metasched/metasched/api"
)

var fixtureOutputs = api.OutputList{Job: "j-000000000006", Attempt: 2,
	Files:   []api.OutputFile{{Name: "logs/summary.json", Size: 12}, {Name: "result.bin", Size: int64(len(binInput))}},
	Missing: []string{"frames.tar"}}

func TestOutputsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	list := daemonRoute{Method: "GET", Path: "/v1/jobs/j-000000000006/outputs", Answer: fixtureOutputs}
	runDaemonCases(t, []daemonCase{
		{name: "outputs", args: []string{"outputs", "j-000000000006"}, routes: []daemonRoute{list}},
		{name: "outputs-json", args: []string{"outputs", "j-000000000006", "--output", "json"}, routes: []daemonRoute{list}, want: fixtureOutputs},
		{name: "outputs-out", args: []string{"outputs", "j-000000000006", "--out", dir}, routes: []daemonRoute{list,
			{Method: "GET", Path: "/v1/jobs/j-000000000006/outputs/logs/summary.json", Answer: `{"frames":3}`},
			{Method: "GET", Path: "/v1/jobs/j-000000000006/outputs/result.bin", Answer: string(binInput)}}},
	})
	for name, want := range map[string]string{"logs/summary.json": `{"frames":3}`, "result.bin": string(binInput)} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s under --out: %q, %v; want %q", name, got, err, want)
		}
	}
}

// A name that would leave --out's directory is refused, and nothing is
// written outside it.
func TestOutputsCommandRefusesEscape(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A symbolic link inside DIR to outside it: a name through it is refused too.
	if err := os.Symlink(base, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, want string }{
		{"../evil", `output "../evil": refused, it would be written outside`},
		{"/etc/evil", `output "/etc/evil": refused, it would be written outside`},
		{"link/evil", "output link/evil: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := api.OutputList{Job: "j-000000000006", Attempt: 1, Files: []api.OutputFile{{Name: tc.name, Size: 4}}}
			routes := []daemonRoute{{Method: "GET", Path: "/v1/jobs/j-000000000006/outputs", Answer: l}}
			if tc.name == "link/evil" {
				routes = append(routes, daemonRoute{Method: "GET", Path: "/v1/jobs/j-000000000006/outputs/link/evil", Answer: "evil"})
			}
			f := newFakeDaemon(t, daemonToken, routes...)
			code, _, errOut := runDaemonCmd(t, f.URL, daemonToken, "outputs", "j-000000000006", "--out", dir)
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, errOut, tc.want)
			}
			if _, err := os.Stat(filepath.Join(base, "evil")); err == nil {
				t.Errorf("%s was written outside --out", tc.name)
			}
		})
	}
}
