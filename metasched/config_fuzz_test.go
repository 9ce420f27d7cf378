package metasched

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/yamlx"
	"github.com/metasched/metasched/internal/yamlx/yamlxtest"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/policy"
	"github.com/metasched/metasched/selection"
)

// FuzzParseConfig decodes the daemon's configuration files: a file is
// either refused, with every problem naming the file and a field or a
// line, or gives a configuration whose values keep the rules of the file
// (docs/reference/configuration.md) and that comes back the same
// from its own encoding.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(configFull))
	f.Add([]byte(configBase))
	f.Add([]byte(configBase + "policy: {name: optimal, solve: true}\nexecutor: {name: host-command}\nswitch_delay: 1s\nmin_pool_hosts: 0\n"))
	f.Add([]byte(configBase + "executor: {name: host-command, run_as: nobody, allow_users: true, max_output_bytes: 4096, output_bytes_per_second: 2048}\n"))
	f.Add([]byte(configBase + "executor: {name: host-command, run_as: 65534, allow_users: false}\n"))
	f.Add([]byte(configBase + "executor: {name: host-command, accounts: {alice: alice-jobs, 'cert:bob': 2001}, env: [TMPDIR]}\n"))
	f.Add([]byte(configBase + "executor: {name: guest, poll: 250ms, max_output_bytes: 4096}\n"))
	for _, tc := range configErrorCases {
		f.Add([]byte(tc.yaml))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("c.yaml", data)
		if err != nil {
			if c != nil {
				t.Errorf("ParseConfig returned a configuration with the error %v", err)
			}
			if err := yamlxtest.CheckError("c.yaml", err); err != nil {
				t.Fatal(err)
			}
			return
		}
		checkConfig(t, c)
		js, err := json.Marshal(configFile(c))
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig("c.yaml", js)
		if err != nil {
			t.Fatalf("the configuration's own encoding is refused: %v\n%s", err, js)
		}
		if diff := cmp.Diff(c, back); diff != "" {
			t.Fatalf("configuration after a round trip (-parsed +again):\n%s", diff)
		}
	})
}

// checkConfig fails the test when a value of an accepted configuration
// breaks the rules of the file.
func checkConfig(t *testing.T, c *Config) {
	t.Helper()
	var bad []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	_, port, err := net.SplitHostPort(c.Listen)
	check(err == nil && port != "", "listen %q", c.Listen)
	check(c.DataDir != "" && c.Grid != "", "data_dir %q, grid %q", c.DataDir, c.Grid)
	check(len(c.JobTypes) > 0, "no job types")
	for i, jt := range c.JobTypes {
		check(yamlx.IsName(jt.Name) && slices.IndexFunc(c.JobTypes, func(o api.JobType) bool { return o.Name == jt.Name }) == i,
			"job_types[%d].name %q", i, jt.Name)
		// A job of the type without a vm of its own gets this one: it
		// keeps the limits of a job's vm.
		check(jt.VCPUs >= 1 && jt.VCPUs <= selection.MaxVCPUs, "job_types[%d].vm.vcpus %d", i, jt.VCPUs)
		check(jt.MemoryMiB >= 1 && jt.MemoryMiB <= selection.MaxMemoryMiB, "job_types[%d].vm.memory_mib %d", i, jt.MemoryMiB)
		check(jt.HoldingCost > 0 && !math.IsInf(jt.HoldingCost, 0), "job_types[%d].holding_cost %g", i, jt.HoldingCost)
	}
	for i, a := range c.Agents {
		check(yamlx.IsName(a.Site) && slices.IndexFunc(c.Agents, func(o AgentConfig) bool { return o.Site == a.Site }) == i,
			"agents[%d].site %q", i, a.Site)
		u, err := url.Parse(a.Address)
		check(err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "", "agents[%d].address %q", i, a.Address)
		check(err == nil && (u.Scheme == "https") == (a.TokenFile == ""), "agents[%d] at %q with token_file %q", i, a.Address, a.TokenFile)
		check(err == nil && (u.Scheme == "https" || tlsx.Loopback(u.Host)), "agents[%d]: plain HTTP to %q", i, a.Address)
		check(err == nil && (u.Scheme == "http" || c.TLS != nil), "agents[%d]: https without the daemon's tls", i)
	}
	check(c.TLS != nil || tlsx.Loopback(c.Listen), "plain HTTP on listen %q", c.Listen)
	p := c.Policy
	check(slices.Contains(policy.Names, p.Name), "policy.name %q", p.Name)
	check(p.Name == "heuristic" && p.K >= 1 || p.Name != "heuristic" && p.K == 0, "policy %s with K %d", p.Name, p.K)
	check(p.Name == "optimal" && (p.Table != "") != p.Solve || p.Name != "optimal" && p.Table == "" && !p.Solve,
		"policy %s with table %q and solve %v", p.Name, p.Table, p.Solve)
	e := c.Executor
	check(slices.Contains(Executors, e.Name), "executor.name %q", e.Name)
	check(e.Name == "emulated" && e.TimeScale > 0 && e.TimeScale <= 1e6 || e.Name != "emulated" && e.TimeScale == 0,
		"executor %s with time_scale %g", e.Name, e.TimeScale)
	check(e.Name == HostCommand || e.RunAs == "" && !e.AllowUsers, "executor %s with run_as %q and allow_users %v", e.Name, e.RunAs, e.AllowUsers)
	check(e.RunAs == "" || isUserName(e.RunAs) || isDigits(e.RunAs), "executor.run_as %q", e.RunAs)
	check(e.Name == HostCommand || e.Accounts == nil, "executor %s with accounts", e.Name)
	for owner, u := range e.Accounts {
		check(ownerRE.MatchString(owner) && (isUserName(u) || isDigits(u)), "executor.accounts.%s %q", owner, u)
	}
	check(e.Name == HostCommand || e.Name == "guest" || e.MaxOutputBytes == 0 && e.OutputBytesPerSecond == 0,
		"executor %s with max_output_bytes %d and output_bytes_per_second %d", e.Name, e.MaxOutputBytes, e.OutputBytesPerSecond)
	check(e.Name == "guest" || e.Poll == 0, "executor %s with poll %v", e.Name, e.Poll)
	check(c.SwitchDelay >= 0, "switch_delay %v", c.SwitchDelay)
	check(slices.Contains(AgentLosses, c.OnAgentLoss), "on_agent_loss %q", c.OnAgentLoss)
	check(c.AgentLossGrace >= 0 && c.AgentLossGrace <= MaxAgentLossGrace, "agent_loss_grace %v", c.AgentLossGrace)
	check(c.MinPoolHosts >= 0, "min_pool_hosts %d", c.MinPoolHosts)
	cal := c.Calibration
	check(cal.MaxAge >= MinCalibrationMaxAge, "calibration.max_age %v", cal.MaxAge)
	check(cal.BenchSeconds >= 1 && cal.BenchSeconds <= MaxBenchSeconds, "calibration.bench_seconds %d", cal.BenchSeconds)
	check(cal.ProbeBytes >= MinProbeBytes && cal.ProbeBytes <= MaxProbeBytes, "calibration.probe_bytes %d", cal.ProbeBytes)
	check(c.VMHeadroom.VCPUs >= 0 && c.VMHeadroom.MemoryMiB >= 0 && c.VMHeadroom.MemoryMiB%2 == 0, "vm_headroom %+v", c.VMHeadroom)
	if len(bad) > 0 {
		t.Fatalf("accepted configuration breaks its rules: %v\n%+v", bad, c)
	}
}

// executorFile is the executor's part of a configuration file: every
// field that its executor takes and that is not at its default.
func executorFile(e ExecutorConfig) map[string]any {
	out := map[string]any{"name": e.Name}
	if e.Name == "emulated" {
		out["time_scale"] = e.TimeScale
	}
	if e.RunAs != "" {
		out["run_as"] = e.RunAs
	}
	if e.Name == HostCommand {
		out["allow_users"] = e.AllowUsers
	}
	if e.Accounts != nil {
		out["accounts"] = e.Accounts
	}
	if e.Env != nil {
		out["env"] = e.Env
	}
	if e.MaxOutputBytes != 0 {
		out["max_output_bytes"] = e.MaxOutputBytes
	}
	if e.OutputBytesPerSecond != 0 {
		out["output_bytes_per_second"] = e.OutputBytesPerSecond
	}
	if e.Poll != 0 {
		out["poll"] = e.Poll.String()
	}
	return out
}

// configFile is the configuration file of c.
func configFile(c *Config) map[string]any {
	types := make([]map[string]any, len(c.JobTypes))
	for i, jt := range c.JobTypes {
		types[i] = map[string]any{"name": jt.Name, "vm": map[string]int{"vcpus": jt.VCPUs, "memory_mib": jt.MemoryMiB},
			"holding_cost": jt.HoldingCost}
		if jt.Image != "" {
			types[i]["image"] = jt.Image
		}
	}
	out := map[string]any{
		"listen": c.Listen, "data_dir": c.DataDir, "grid": c.Grid, "job_types": types,
		"policy": c.Policy, "executor": executorFile(c.Executor), "switch_delay": c.SwitchDelay.String(),
		"on_agent_loss": c.OnAgentLoss, "agent_loss_grace": c.AgentLossGrace.String(), "min_pool_hosts": c.MinPoolHosts, "hold_after": c.HoldAfter.String(),
		"max_unproven_connections": c.Unproven.MaxUnproven, "max_unproven_per_address": c.Unproven.MaxUnprovenPerAddress,
		"retention": map[string]any{"job_dirs": c.Retention.JobDirs.String(),
			"switches": map[string]any{"max_age": c.Retention.SwitchMaxAge.String(), "max_count": c.Retention.SwitchMaxCount}},
		"calibration": map[string]any{"max_age": c.Calibration.MaxAge.String(), "bench_seconds": c.Calibration.BenchSeconds,
			"probe_bytes": c.Calibration.ProbeBytes, "auto": !c.Calibration.OnDemand},
	}
	if c.Calibration.TaskFarm != "" {
		out["calibration"].(map[string]any)["taskfarm"] = c.Calibration.TaskFarm
	}
	if c.TLS != nil {
		out["tls"] = map[string]string{"cert_file": c.TLS.Cert, "key_file": c.TLS.Key, "ca_file": c.TLS.CA}
	} else {
		out["insecure_http"] = true
	}
	if c.IdempotencyRetention != 0 {
		out["idempotency_retention"] = c.IdempotencyRetention.String()
	}
	if c.Agents != nil {
		out["agents"] = c.Agents
	}
	if c.VMHeadroom != (VMHeadroom{}) {
		out["vm_headroom"] = c.VMHeadroom
	}
	return out
}
