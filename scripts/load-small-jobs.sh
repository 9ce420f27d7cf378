#!/usr/bin/env bash
# load-small-jobs.sh: the daemon on a generated grid with a stream of small
# jobs, and how fast they go through.
#
#   [TIME_SCALE=S] scripts/load-small-jobs.sh [METASCHED] [CLUSTERS] [HOSTS_PER_CLUSTER] [JOBS]
#
# Defaults: bin/metasched, 50 clusters of 20 hosts (1,000 hosts), 3,000
# jobs, TIME_SCALE 0.01 (the emulated executor's; 1 runs each job for its
# predicted time, 2.5 to 10 s). It starts `metasched serve` on loopback (a port the kernel picks)
# with in-process agents on the test driver, the emulated executor and
# policy none, one pool of every host; submits JOBS jobs of 1 to 8 tasks
# (seeded, the same every run) from 16 clients at once; then samples the
# jobs running and done every second (the daemon's metasched_jobs metric)
# until every job has ended, and prints the samples and the jobs done per
# second over the run. Everything is under a temporary directory, removed
# at the end; the daemon is stopped by its PID. Needs curl.
set -euo pipefail

bin=${1:-bin/metasched}
clusters=${2:-50}
per=${3:-20}
jobs=${4:-3000}
bin=$(realpath "$bin")

dir=$(mktemp -d)
daemon=
cleanup() {
	if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT

# The grid: clusters in regions of 10, fast links inside a region, slower
# ones between neighbouring regions.
{
	echo "clusters:"
	for ((c = 0; c < clusters; c++)); do
		perf=$((1 + c % 4))e9
		echo "  - {name: c$c, machines: $per, cores: 8, memory_mib: 16384, perf: $perf, lan_mbps: 1000, uplink_mbps: $((100 + 10 * (c % 7)))}"
	done
	echo "links:"
	for ((c = 1; c < clusters; c++)); do
		if ((c % 10 == 0)); then mbps=20; else mbps=$((200 + 5 * (c % 9))); fi
		echo "  - {between: [c$((c - 1)), c$c], mbps: $mbps}"
	done
} >"$dir/grid.yaml"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$dir/serve.yaml" <<EOF
listen: 127.0.0.1:$port
insecure_http: true
data_dir: $dir/data
grid: $dir/grid.yaml
job_types:
  - {name: small, vm: {vcpus: 1, memory_mib: 1024}}
policy: {name: none}
executor: {name: emulated, time_scale: ${TIME_SCALE:-0.01}}
EOF

"$bin" serve --config "$dir/serve.yaml" >"$dir/serve.log" 2>&1 &
daemon=$!
for _ in $(seq 600); do
	[ -s "$dir/data/token" ] && curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
	kill -0 "$daemon" 2>/dev/null || { cat "$dir/serve.log"; exit 1; }
	sleep 0.1
done
token=$(cat "$dir/data/token")
api=http://127.0.0.1:$port

# The jobs: 1 to 8 tasks of 1e10 operations (2.5 to 10 s a task on these
# machines; a hundredth of it emulated), 1 kB each to and from the master.
mkdir "$dir/jobs"
RANDOM=37
for ((i = 0; i < jobs; i++)); do
	printf '{"name": "small-%d", "type": "small", "tasks": %d, "task_ops": 1e10, "task_bytes": 1000}\n' "$i" $((1 + RANDOM % 8)) >"$dir/jobs/$i.json"
done
sum=0
for f in "$dir"/jobs/*.json; do sum=$((sum + $(sed 's/.*"tasks": \([0-9]*\).*/\1/' "$f"))); done
echo "grid: $clusters clusters of $per hosts; $jobs jobs of 1 to 8 tasks ($sum tasks)"

metric() { curl -fsS "$api/metrics" | awk -v s="$1" '$0 ~ "^metasched_jobs\\{state=\""s"\"\\}" {print $2+0}'; }

start=$(date +%s.%N)
ls "$dir"/jobs/*.json | xargs -P 16 -I{} curl -fsS -o /dev/null -H "Authorization: Bearer $token" \
	-H 'Content-Type: application/json' --data-binary @{} "$api/v1/jobs"
submitted=$(date +%s.%N)
echo "submitted in $(echo "$submitted - $start" | bc) s"

echo "t_s running done"
peak=0
while :; do
	now=$(date +%s.%N)
	running=$(metric running); done_=$(metric done); failed=$(metric failed)
	running=${running:-0}; done_=${done_:-0}; failed=${failed:-0}
	printf '%.0f %s %s\n' "$(echo "$now - $start" | bc)" "$running" "$done_"
	((running > peak)) && peak=$running
	if ((done_ + failed >= jobs)); then break; fi
	kill -0 "$daemon" 2>/dev/null || { tail -20 "$dir/serve.log"; exit 1; }
	sleep 1
done
end=$(date +%s.%N)
total=$(echo "$end - $start" | bc)
echo "every job ended in $total s: $done_ done, $failed failed, at most $peak running at once, $(echo "scale=1; $done_ / $total" | bc) jobs/s"
