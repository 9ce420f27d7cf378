package metasched

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/metasched/api"
)

// configFull is a configuration with most fields.
const configFull = `
listen: 0.0.0.0:8080
tls: {cert_file: daemon.pem, key_file: daemon-key.pem, ca_file: /etc/pki/ms/ca.pem}
data_dir: data
grid: grid.yaml
job_types:
  - {name: render, vm: {vcpus: 2, memory_mib: 2048}, holding_cost: 2, image: debian}
  - {name: batch, vm: {vcpus: 1, memory_mib: 512}}
agents:
  - {site: spain, address: "https://10.0.0.2:9101/"}
  - {site: latam, address: "http://127.0.0.1:9102", token_file: latam.token}
policy: {name: optimal, table: render.policy}
executor: {name: emulated, time_scale: 0.01}
switch_delay: 2s
on_agent_loss: fail
agent_loss_grace: 2m
hold_after: 90s
max_unproven_connections: 300
max_unproven_per_address: 30
idempotency_retention: 72h
retention:
  switches: {max_age: 0s, max_count: 500}
  job_dirs: 1h
calibration: {max_age: 30m, bench_seconds: 5, probe_bytes: 1048576, auto: false, taskfarm: bin/taskfarm}
vm_headroom: {vcpus: 2, memory_mib: 1024}
`

// configBase is the smallest valid configuration.
const configBase = "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 1, memory_mib: 64}}]\ninsecure_http: true\n"

func TestParseConfig(t *testing.T) {
	got, err := ParseConfig("/etc/ms/serve.yaml", []byte(configFull))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Listen: "0.0.0.0:8080", DataDir: "/etc/ms/data", Grid: "/etc/ms/grid.yaml",
		TLS:      &tlsx.Files{Cert: "/etc/ms/daemon.pem", Key: "/etc/ms/daemon-key.pem", CA: "/etc/pki/ms/ca.pem"},
		JobTypes: []api.JobType{{Name: "render", VCPUs: 2, MemoryMiB: 2048, HoldingCost: 2, Image: "debian"}, {Name: "batch", VCPUs: 1, MemoryMiB: 512, HoldingCost: 1}},
		Agents:   []AgentConfig{{Site: "spain", Address: "https://10.0.0.2:9101"}, {Site: "latam", Address: "http://127.0.0.1:9102", TokenFile: "/etc/ms/latam.token"}},
		Policy:   PolicyConfig{Name: "optimal", Table: "/etc/ms/render.policy"},
		Executor: ExecutorConfig{Name: "emulated", TimeScale: 0.01}, SwitchDelay: 2 * time.Second, OnAgentLoss: "fail", AgentLossGrace: 2 * time.Minute, MinPoolHosts: 2,
		HoldAfter:            90 * time.Second,
		Unproven:             httpsrv.Limits{MaxUnproven: 300, MaxUnprovenPerAddress: 30},
		IdempotencyRetention: 72 * time.Hour,
		Retention:            RetentionConfig{SwitchMaxAge: 0, SwitchMaxCount: 500, JobDirs: time.Hour},
		Calibration:          CalibrationConfig{MaxAge: 30 * time.Minute, BenchSeconds: 5, ProbeBytes: 1 << 20, OnDemand: true, TaskFarm: "/etc/ms/bin/taskfarm"},
		VMHeadroom:           VMHeadroom{VCPUs: 2, MemoryMiB: 1024},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got, err = ParseConfig("serve.yaml", []byte(configBase))
	if err != nil {
		t.Fatal(err)
	}
	want = &Config{Listen: DefaultListen, DataDir: DefaultDataDir, Grid: "g.yaml",
		JobTypes: []api.JobType{{Name: "a", VCPUs: 1, MemoryMiB: 64, HoldingCost: 1}},
		Policy:   PolicyConfig{Name: "heuristic", K: 5}, Executor: ExecutorConfig{Name: "emulated", TimeScale: DefaultTimeScale}, OnAgentLoss: "requeue", AgentLossGrace: DefaultAgentLossGrace, MinPoolHosts: 2,
		HoldAfter:   DefaultHoldAfter,
		Unproven:    httpsrv.Limits{MaxUnproven: httpsrv.DefaultMaxUnproven, MaxUnprovenPerAddress: httpsrv.DefaultMaxUnprovenPerAddress},
		Retention:   RetentionConfig{SwitchMaxAge: 30 * 24 * time.Hour, SwitchMaxCount: 10000, JobDirs: 24 * time.Hour},
		Calibration: CalibrationConfig{MaxAge: time.Hour, BenchSeconds: 10, ProbeBytes: 8 << 20}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		yaml string
		want ExecutorConfig
	}{
		{"{name: host-command, run_as: nobody, max_output_bytes: 1048576, output_bytes_per_second: 65536}",
			ExecutorConfig{Name: "host-command", RunAs: "nobody", MaxOutputBytes: 1 << 20, OutputBytesPerSecond: 1 << 16}},
		// run_as may be left out (a daemon that is not root runs the
		// commands as itself; one that is root refuses to start).
		{"{name: host-command}", ExecutorConfig{Name: "host-command"}},
		{"{name: host-command, run_as: 65534, allow_users: true}", ExecutorConfig{Name: "host-command", RunAs: "65534", AllowUsers: true}},
		{"{name: host-command, run_as: '1001', allow_users: false}", ExecutorConfig{Name: "host-command", RunAs: "1001"}},
		{"{name: host-command, run_as: metasched-jobs_2.a$}", ExecutorConfig{Name: "host-command", RunAs: "metasched-jobs_2.a$"}},
		// Only the syntax: whether the machine has the user, and that it
		// is not root, is checked when the daemon starts.
		{"{name: host-command, run_as: root}", ExecutorConfig{Name: "host-command", RunAs: "root"}},
		// An account per owner: a token's name, or a certificate's.
		{"{name: host-command, accounts: {alice: alice-jobs, 'cert:bob': 2001, operator: '2002'}}",
			ExecutorConfig{Name: "host-command", Accounts: map[string]string{"alice": "alice-jobs", "cert:bob": "2001", "operator": "2002"}}},
		// Variables of the daemon's environment a job gets besides its own.
		{"{name: host-command, env: [TMPDIR, OMP_NUM_THREADS, _x]}", ExecutorConfig{Name: "host-command", Env: []string{"TMPDIR", "OMP_NUM_THREADS", "_x"}}},
	} {
		got, err = ParseConfig("serve.yaml", []byte(configBase+"executor: "+tc.yaml+"\n"))
		if err != nil {
			t.Errorf("%s: %v", tc.yaml, err)
			continue
		}
		if !cmp.Equal(got.Executor, tc.want) {
			t.Errorf("%s: executor %+v, want %+v", tc.yaml, got.Executor, tc.want)
		}
	}
	got, err = ParseConfig("serve.yaml", []byte(configBase+
		"executor: {name: guest, poll: 200ms, max_output_bytes: 2048, output_bytes_per_second: 4096}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (ExecutorConfig{Name: "guest", Poll: 200 * time.Millisecond, MaxOutputBytes: 2048, OutputBytesPerSecond: 4096}); !cmp.Equal(got.Executor, want) {
		t.Errorf("executor %+v, want %+v", got.Executor, want)
	}
	got, err = ParseConfig("serve.yaml", []byte(configBase+"walltime: {default: 10m, max: 2h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (WalltimeConfig{Default: 10 * time.Minute, Max: 2 * time.Hour}); got.Walltime != want {
		t.Errorf("walltime %+v, want %+v", got.Walltime, want)
	}
	if s := want.Policy.String(); s != "heuristic K=5" {
		t.Errorf("policy string %q", s)
	}
}

// configErrorCases are invalid configurations and a part of their errors
// (TestParseConfigErrors), and seeds of FuzzParseConfig.
var configErrorCases = []struct{ name, yaml, want string }{
	{"no grid", "job_types: [{name: a, vm: {vcpus: 1, memory_mib: 64}}]\n", "c.yaml: grid: missing required field"},
	{"no job types", "grid: g.yaml\n", "c.yaml: job_types: missing required field"},
	{"empty job types", "grid: g.yaml\njob_types: []\n", "job_types: must list at least one job type"},
	{"unknown field", configBase + "colour: red\n", "c.yaml: colour: unknown field"},
	{"bad listen", configBase + "listen: here\n", `listen: must be HOST:PORT, not "here"`},
	{"duplicate type", "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 1, memory_mib: 64}}, {name: a, vm: {vcpus: 1, memory_mib: 64}}]\n", `job_types[1].name: job type "a" is listed twice`},
	{"zero vcpus", "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 0, memory_mib: 64}}]\n", "job_types[0].vm.vcpus: must be >= 1, not 0"},
	// A job of the type without a vm gets the type's: it keeps a job's limits.
	{"huge vcpus", "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 2000, memory_mib: 64}}]\n", "job_types[0].vm.vcpus: must be at most 1024 (the limit of a job's vm), not 2000"},
	{"huge memory", "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 1, memory_mib: 99999999}}]\n", "job_types[0].vm.memory_mib: must be at most 16777216 (the limit of a job's vm), not 99999999"},
	{"no vm", "grid: g.yaml\njob_types: [{name: a}]\n", "job_types[0].vm: missing required field"},
	{"bad image", "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 1, memory_mib: 64}, image: Debian}]\n", `job_types[0].image: must be an image name (a-z, 0-9, -) of at most 256 characters, not "Debian"`},
	{"negative holding", "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 1, memory_mib: 64}, holding_cost: -1}]\n", "job_types[0].holding_cost: must be > 0, not -1"},
	{"bad agent address", configBase + "agents: [{site: s, address: 'localhost:9101', token_file: t}]\n", `agents[0].address: must be an agent's URL`},
	{"agent with an empty token file", configBase + "agents: [{site: s, address: 'http://127.0.0.1:1', token_file: ''}]\n", "agents[0].token_file: must not be empty"},
	{"agent without token", configBase + "agents: [{site: s, address: 'http://127.0.0.1:1'}]\n", "agents[0].token_file: missing required field"},
	{"two agents for a site", configBase + "agents: [{site: s, address: 'http://127.0.0.1:1', token_file: t}, {site: s, address: 'http://127.0.0.1:2', token_file: t}]\n", `agents[1].site: site "s" has two agents`},
	{"no tls", "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 1, memory_mib: 64}}]\n", "c.yaml: tls: is required: {cert_file, key_file, ca_file}"},
	{"plain off loopback", configBase + "listen: 0.0.0.0:8080\n", `c.yaml: insecure_http: plain HTTP is served on a loopback address only (127.0.0.1, ::1, localhost), not on listen "0.0.0.0:8080": give tls`},
	{"plain agent off loopback", configBase + "agents: [{site: s, address: 'http://10.0.0.2:9101', token_file: t}]\n", `agents[0].address: plain HTTP goes to a loopback address only (127.0.0.1, ::1, localhost), not "http://10.0.0.2:9101": use https and tls`},
	{"https agent without tls", configBase + "agents: [{site: s, address: 'https://10.0.0.2:9101'}]\n", "agents[0].address: an https agent needs the daemon's tls"},
	{"https agent with a token", "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 1, memory_mib: 64}}]\ntls: {cert_file: d.pem, key_file: d-key.pem, ca_file: ca.pem}\nagents: [{site: s, address: 'https://10.0.0.2:9101', token_file: t}]\n",
		"agents[0].token_file: must not be given for an https agent: the daemon proves itself by its certificate"},
	{"tls without key", "grid: g.yaml\njob_types: [{name: a, vm: {vcpus: 1, memory_mib: 64}}]\ntls: {cert_file: d.pem, ca_file: ca.pem}\n", "c.yaml: tls.key_file: missing required field"},
	{"unknown policy", configBase + "policy: {name: magic}\n", "policy.name: must be one of heuristic, optimal, static, best-static, none"},
	{"K on static", configBase + "policy: {name: static, K: 3}\n", "policy.K: applies to the heuristic policy only"},
	{"K zero", configBase + "policy: {name: heuristic, K: 0}\n", "policy.K: must be >= 1, not 0"},
	{"optimal without table", configBase + "policy: {name: optimal}\n", "optimal needs table: FILE (a solved policy) or solve: true"},
	{"optimal with both", configBase + "policy: {name: optimal, table: t.policy, solve: true}\n", "policy.solve: give either table or solve: true, not both"},
	{"table on heuristic", configBase + "policy: {name: heuristic, table: t.policy}\n", "policy.table: applies to the optimal policy only"},
	{"unknown executor", configBase + "executor: {name: slurm}\n", "executor.name: must be one of emulated, host-command, guest"},
	{"old command executor", configBase + "executor: {name: command}\n",
		`c.yaml: executor.name: "command" is now "host-command": it runs jobs' commands on the daemon's own machine (give run_as: USER, an unprivileged user of that machine, which the commands run as; a daemon that runs as root needs it)`},
	{"old command executor with run_as", configBase + "executor: {name: command, run_as: nobody, max_output_bytes: 4096}\n", `executor.name: "command" is now "host-command"`},
	{"run_as on emulated", configBase + "executor: {name: emulated, run_as: nobody}\n", "c.yaml: executor.run_as: applies to the host-command executor only"},
	{"run_as on guest", configBase + "executor: {name: guest, run_as: nobody}\n", "c.yaml: executor.run_as: applies to the host-command executor only"},
	{"allow_users on guest", configBase + "executor: {name: guest, allow_users: true}\n", "c.yaml: executor.allow_users: applies to the host-command executor only"},
	{"allow_users on emulated", configBase + "executor: {allow_users: false, name: emulated}\n", "c.yaml: executor.allow_users: applies to the host-command executor only"},
	{"env on guest", configBase + "executor: {name: guest, env: [TMPDIR]}\n", "c.yaml: executor.env: applies to the host-command executor only"},
	{"env not a list", configBase + "executor: {name: host-command, env: TMPDIR}\n", "c.yaml: executor.env: must be a list"},
	{"env bad name", configBase + "executor: {name: host-command, env: [TMPDIR, 'A=B']}\n", `c.yaml: executor.env[1]: must be a variable name (a letter or '_', then letters, digits and '_', at most 128), not "A=B"`},
	{"env a number", configBase + "executor: {name: host-command, env: [1]}\n", "c.yaml: executor.env[0]: must be a string"},
	{"env METASCHED_", configBase + "executor: {name: host-command, env: [METASCHED_JOB_ID]}\n", "c.yaml: executor.env[0]: METASCHED_JOB_ID is set for every job by the daemon: name only what it does not set"},
	{"env PATH", configBase + "executor: {name: host-command, env: [PATH]}\n", "c.yaml: executor.env[0]: PATH is set for every job by the daemon: name only what it does not set"},
	{"env twice", configBase + "executor: {name: host-command, env: [TMPDIR, TMPDIR]}\n", "c.yaml: executor.env[1]: TMPDIR is listed twice"},
	{"allow_users not a bool", configBase + "executor: {name: host-command, allow_users: yes please}\n", "c.yaml: executor.allow_users: must be true or false"},
	{"empty run_as", configBase + "executor: {name: host-command, run_as: ''}\n", `c.yaml: executor.run_as: must be a user name of the daemon's machine (letters, digits, '.', '_', '-', at most 256 characters) or a numeric uid, not ""`},
	{"run_as with a space", configBase + "executor: {name: host-command, run_as: 'job user'}\n", `executor.run_as: must be a user name of the daemon's machine`},
	{"run_as with a slash", configBase + "executor: {name: host-command, run_as: ../root}\n", `executor.run_as: must be a user name of the daemon's machine`},
	{"run_as an option", configBase + "executor: {name: host-command, run_as: -u}\n", `executor.run_as: must be a user name of the daemon's machine`},
	{"run_as negative", configBase + "executor: {name: host-command, run_as: -1}\n", "executor.run_as: must be a user name or a uid from 0 to 4294967294, not -1"},
	{"run_as huge uid", configBase + "executor: {name: host-command, run_as: '4294967295'}\n", `executor.run_as: must be a user name or a uid from 0 to 4294967294, not "4294967295"`},
	{"accounts on emulated", configBase + "executor: {name: emulated, accounts: {alice: nobody}}\n", "c.yaml: executor.accounts: applies to the host-command executor only"},
	{"accounts a list", configBase + "executor: {name: host-command, accounts: [alice]}\n", "c.yaml: executor.accounts: must be a mapping"},
	{"accounts owner not a name", configBase + "executor: {name: host-command, accounts: {Alice: nobody}}\n", "c.yaml: executor.accounts.Alice: is not an owner of jobs: a token's name"},
	{"accounts owner of another kind", configBase + "executor: {name: host-command, accounts: {'tls:alice': nobody}}\n", "executor.accounts.tls:alice: is not an owner of jobs"},
	{"accounts user with a space", configBase + "executor: {name: host-command, accounts: {alice: 'job user'}}\n", "c.yaml: executor.accounts.alice: must be a user name of the daemon's machine"},
	{"accounts negative uid", configBase + "executor: {name: host-command, accounts: {alice: -5}}\n", "c.yaml: executor.accounts.alice: must be a user name or a uid from 0 to 4294967294, not -5"},
	{"accounts owner twice", configBase + "executor: {name: host-command, accounts: {alice: a, alice: b}}\n", "executor.accounts.alice"},
	{"run_as a list", configBase + "executor: {name: host-command, run_as: [nobody]}\n", "executor.run_as: must be a string"},
	{"bad walltime", configBase + "walltime: {default: long}\n", `walltime.default: not a duration like 2s or 1m: "long"`},
	{"walltime default above max", configBase + "walltime: {default: 2h, max: 1h}\n", "walltime.default: must be at most max (1h0m0s), not 2h0m0s"},
	{"tiny walltime", configBase + "walltime: {max: 10ms}\n", "walltime.max: must be at least 1s, not 10ms"},
	{"walltime unknown", configBase + "walltime: {min: 1h}\n", "walltime.min: unknown field"},
	{"poll on host-command", configBase + "executor: {name: host-command, poll: 1s}\n", "executor.poll: applies to the guest executor only"},
	{"bad guest poll", configBase + "executor: {name: guest, poll: soon}\n", `executor.poll: not a duration like 2s or 1m: "soon"`},
	{"tiny guest poll", configBase + "executor: {name: guest, poll: 1ms}\n", "executor.poll: must be at least 10ms, not 1ms"},
	{"long guest poll", configBase + "executor: {name: guest, poll: 2h}\n", "executor.poll: must be at most 1m0s, not 2h0m0s"},
	{"time scale on guest", configBase + "executor: {name: guest, time_scale: 2}\n", "executor.time_scale: applies to the emulated executor only"},
	{"time scale on host-command", configBase + "executor: {name: host-command, time_scale: 2}\n", "executor.time_scale: applies to the emulated executor only"},
	{"zero time scale", configBase + "executor: {name: emulated, time_scale: 0}\n", "executor.time_scale: must be > 0"},
	{"bad switch delay", configBase + "switch_delay: later\n", `switch_delay: not a duration like 2s or 1m: "later"`},
	{"bad min pool hosts", configBase + "min_pool_hosts: -1\n", `min_pool_hosts: must be >= 0, not -1`},
	{"bad agent loss grace", configBase + "agent_loss_grace: 25h\n", "agent_loss_grace: must be at most 24h0m0s"},
	{"bad agent loss", configBase + "on_agent_loss: panic\n", "on_agent_loss: must be one of requeue, fail"},
	{"output cap on emulated", configBase + "executor: {name: emulated, max_output_bytes: 4096}\n", "executor.max_output_bytes: applies to the host-command and guest executors only"},
	{"small output cap", configBase + "executor: {name: host-command, max_output_bytes: 10}\n", "executor.max_output_bytes: must be at least 1024 and at most 1073741824, not 10"},
	{"zero output rate", configBase + "executor: {name: host-command, output_bytes_per_second: 0}\n", "executor.output_bytes_per_second: must be at least 1024"},
	{"negative hold", configBase + "hold_after: -1s\n", `hold_after: must be >= 0`},
	{"hold too long", configBase + "hold_after: 48h\n", `hold_after: must be at most 24h0m0s, not 48h0m0s`},
	{"zero unproven", configBase + "max_unproven_connections: 0\n", "c.yaml: max_unproven_connections: must be a whole number within 1 and 1048576, not 0"},
	{"unproven per address above all", configBase + "max_unproven_connections: 100\nmax_unproven_per_address: 101\n",
		"c.yaml: max_unproven_per_address: must be at most max_unproven_connections (100), not 101"},
	{"bad idempotency retention", configBase + "idempotency_retention: forever\n", `idempotency_retention: not a duration like 2s or 1m: "forever"`},
	{"short idempotency retention", configBase + "idempotency_retention: 1h\n", "idempotency_retention: must be at least 24h0m0s, not 1h0m0s"},
	{"unknown retention", configBase + "retention: {jobs: 1h}\n", "retention.jobs: unknown field"},
	{"unknown switches retention", configBase + "retention: {switches: {keep: 3}}\n", "retention.switches.keep: unknown field"},
	{"short switch age", configBase + "retention: {switches: {max_age: 10s}}\n", "retention.switches.max_age: must be 0 (no age limit) or at least 1m0s, not 10s"},
	{"bad switch age", configBase + "retention: {switches: {max_age: forever}}\n", `retention.switches.max_age: not a duration like 2s or 1m: "forever"`},
	{"negative switch count", configBase + "retention: {switches: {max_count: -1}}\n", "retention.switches.max_count: must be >= 0 (0: no count limit), not -1"},
	{"no switch limit", configBase + "retention: {switches: {max_age: 0s, max_count: 0}}\n", "retention.switches: max_age and max_count are both 0: every finished switch would be kept forever"},
	{"negative headroom", configBase + "vm_headroom: {vcpus: -1, memory_mib: 0}\n", "c.yaml: vm_headroom.vcpus: must be >= 0, not -1"},
	{"huge headroom", configBase + "vm_headroom: {vcpus: 2000}\n", "c.yaml: vm_headroom.vcpus: must be at most 1024 (the limit of a job's vm), not 2000"},
	{"odd memory headroom", configBase + "vm_headroom: {memory_mib: 129}\n", "c.yaml: vm_headroom.memory_mib: must be a multiple of 2 MiB (a QEMU VM grows by DIMMs, sized in 2 MiB units), not 129"},
	{"negative memory headroom", configBase + "vm_headroom: {memory_mib: -2}\n", "c.yaml: vm_headroom.memory_mib: must be >= 0, not -2"},
	{"headroom field", configBase + "vm_headroom: {disk_gib: 2}\n", "c.yaml: vm_headroom.disk_gib: unknown field"},
	{"headroom not a map", configBase + "vm_headroom: 2\n", "c.yaml: vm_headroom: must be a mapping"},
	{"negative job dirs", configBase + "retention: {job_dirs: -1h}\n", "retention.job_dirs: must be >= 0, not -1h"},
	{"unknown calibration", configBase + "calibration: {every: 1h}\n", "calibration.every: unknown field"},
	{"short calibration age", configBase + "calibration: {max_age: 10s}\n", "calibration.max_age: must be at least 1m0s, not 10s"},
	{"bad calibration age", configBase + "calibration: {max_age: often}\n", `calibration.max_age: not a duration like 2s or 1m: "often"`},
	{"zero bench", configBase + "calibration: {bench_seconds: 0}\n", "calibration.bench_seconds: must be at least 1 and at most 600, not 0"},
	{"long bench", configBase + "calibration: {bench_seconds: 3600}\n", "calibration.bench_seconds: must be at least 1 and at most 600, not 3600"},
	{"empty taskfarm", configBase + "calibration: {taskfarm: ''}\n", "calibration.taskfarm: must not be empty"},
	{"small probe", configBase + "calibration: {probe_bytes: 10}\n", "calibration.probe_bytes: must be at least 65536 and at most 1073741824, not 10"},
	{"bad auto", configBase + "calibration: {auto: sometimes}\n", "calibration.auto:"},
	{"store without engine", configBase + "store: {}\n", "c.yaml: store.etcd: missing required field"},
	{"store engine", configBase + "store: {bolt: {}}\n", "c.yaml: store.bolt: unknown field"},
	{"etcd without endpoints", configBase + "store: {etcd: {prefix: /m/}}\n", "c.yaml: store.etcd.endpoints: missing required field"},
	{"etcd no endpoint", configBase + "store: {etcd: {endpoints: []}}\n", "store.etcd.endpoints: must list at least one etcd member's client URL"},
	{"etcd bad endpoint", configBase + "store: {etcd: {endpoints: [10.0.0.5:2379]}}\n", `store.etcd.endpoints[0]: must be an etcd member's client URL like https://10.0.0.5:2379, not "10.0.0.5:2379"`},
	{"etcd plain remote", configBase + "store: {etcd: {endpoints: [http://10.0.0.5:2379]}}\n", `store.etcd.endpoints[0]: plain HTTP goes to a loopback address only, not "http://10.0.0.5:2379": use https and tls`},
	{"etcd https without tls", configBase + "store: {etcd: {endpoints: [https://10.0.0.5:2379]}}\n", "store.etcd.tls: is required for the https endpoint"},
	{"etcd endpoint twice", configBase + "store: {etcd: {endpoints: [http://127.0.0.1:2379, http://127.0.0.1:2379/]}}\n", `store.etcd.endpoints[1]: "http://127.0.0.1:2379/" is listed twice`},
	{"etcd bad prefix", configBase + "store: {etcd: {endpoints: [http://127.0.0.1:2379], prefix: metasched}}\n", `store.etcd.prefix: must be a key prefix like /metasched/, not "metasched"`},
	{"etcd short lease", configBase + "store: {etcd: {endpoints: [http://127.0.0.1:2379], lease_ttl: 1s}}\n", "store.etcd.lease_ttl: must be at least 2s, not 1s"},
	{"etcd fractional lease", configBase + "store: {etcd: {endpoints: [http://127.0.0.1:2379], lease_ttl: 2500ms}}\n", "store.etcd.lease_ttl: must be whole seconds (an etcd lease's TTL is), not 2.5s"},
	{"etcd bad lease", configBase + "store: {etcd: {endpoints: [http://127.0.0.1:2379], lease_ttl: ten}}\n", `store.etcd.lease_ttl: not a duration like 2s or 1m: "ten"`},
	{"etcd tls field", configBase + "store: {etcd: {endpoints: [http://127.0.0.1:2379], tls: {cert: a}}}\n", "store.etcd.tls.cert: unknown field"},
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range configErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("c.yaml", []byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// The store in etcd: endpoints, a prefix made to end in a slash, etcd's
// TLS files relative to the configuration's directory.
func TestParseConfigStore(t *testing.T) {
	got, err := ParseConfig("/etc/metasched/serve.yaml", []byte(configBase+
		"store: {etcd: {endpoints: [https://10.0.0.5:2379/, https://10.0.0.6:2379], prefix: /grid-a, lease_ttl: 15s, tls: {cert_file: etcd.pem, key_file: etcd-key.pem, ca_file: etcd-ca.pem}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &StoreEtcd{Endpoints: []string{"https://10.0.0.5:2379", "https://10.0.0.6:2379"}, Prefix: "/grid-a/", LeaseTTL: 15 * time.Second,
		TLS: &tlsx.Files{Cert: "/etc/metasched/etcd.pem", Key: "/etc/metasched/etcd-key.pem", CA: "/etc/metasched/etcd-ca.pem"}}
	if diff := cmp.Diff(want, got.Store); diff != "" {
		t.Errorf("store (-want +got):\n%s", diff)
	}
	got, err = ParseConfig("serve.yaml", []byte(configBase+"store: {etcd: {endpoints: [http://127.0.0.1:2379]}}\n"))
	if err != nil || got.Store == nil || got.Store.Prefix != DefaultEtcdPrefix || got.Store.TLS != nil || got.Store.LeaseTTL != 0 {
		t.Errorf("a loopback etcd: %+v, %v", got.Store, err)
	}
	got, err = ParseConfig("serve.yaml", []byte(configBase))
	if err != nil {
		t.Fatal(err)
	}
	if got.Store != nil {
		t.Errorf("no store given: %+v, want the file in data_dir (nil)", got.Store)
	}
}
