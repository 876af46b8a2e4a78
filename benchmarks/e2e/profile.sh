#!/usr/bin/env bash
# Where gradsync's CPU goes over a real link: one policy across N namespaced nodes, rank 0 under
# `perf record -g` for a window after warm-up, its threads' CPU time from /proc, and
# gradsync-train --trace; then the same model alone (compute only, also profiled) for comparison.
# summarize_profile.py summarizes all of it in DIR/summary.md. `profile.sh --help` lists the options.
set -uo pipefail
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$E2E_DIR/../.." && pwd)
source "$E2E_DIR/topology.sh"
source "$E2E_DIR/policies.sh"

model=vgg11 width=1 policy=p3 link=1gbit nodes=2 iterations=14 compute_iterations=40 delay=12 seconds=10 install=1
trainer=$REPO/build/default/trainer/gradsync-train out=$REPO/build/e2e/profile-$(date +%Y%m%d-%H%M%S)

usage() {
  cat <<EOF
usage: profile.sh [options]
  --model M --width W     (default $model x$width; batch 32, 1 compute thread per rank)
  --policy P              one of ${!POLICY_FLAGS[*]} (default $policy)
  --link RATE             unlimited or a tc rate (default $link); --nodes N (default $nodes)
  --iterations N          of the synchronized run (default $iterations), and of the compute-only
  --compute-iterations N  run (default $compute_iterations): both must outlast --delay + --seconds
  --delay S --seconds S   perf starts S seconds after rank 0 does (default $delay) and records S (default $seconds)
  --trainer PATH --out DIR --no-install
EOF
}
die() {
  echo "profile: $*" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
    --model | --width | --policy | --link | --nodes | --iterations | --compute-iterations | --delay | --seconds | --trainer | --out)
      [ $# -ge 2 ] || die "$1 needs a value"
      opt=${1#--}
      printf -v "${opt//-/_}" %s "$2"
      shift 2
      ;;
    --no-install) install=0 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) usage >&2 && die "unknown option '$1'" ;;
  esac
done

main() {
  [ -n "${POLICY_FLAGS[$policy]:-}" ] || die "unknown policy '$policy' (valid: ${!POLICY_FLAGS[*]}; ddp is not profiled here)"
  [ "$(id -u)" -eq 0 ] || die "network namespaces and perf need root: run as root (sudo $0 ...)"
  [ -x "$trainer" ] || die "no gradsync-train at $trainer: build it (cmake --build build/default --target gradsync-train) or pass --trainer PATH"
  [ $install = 0 ] || bash "$REPO/scripts/setup.sh" iproute2 openmpi-bin python3 linux-perf || die "installing failed"
  command -v perf >/dev/null || die "perf is missing: apt-get install linux-perf"
  mkdir -p "$out" || die "cannot create $out"
  local common=(--model "$model" --width "$width" --batch 32 --threads 1 --dataset synthetic --no-eval -q)

  topo_create "$nodes"
  topo_shape all "$link"
  echo "profile: $model x$width, $policy at $link, $nodes nodes; results in $out"
  topo_mpirun "$out/run.log" -np "$nodes" --host "$(topo_hosts)" "$trainer" "${common[@]}" \
    --iterations "$iterations" ${POLICY_FLAGS[$policy]} --trace "$out/trace.json" --metrics "$out/metrics.json" &
  local job=$!
  profile_rank 0 "$out/sync"
  wait $job || die "the synchronized run failed: see $out/run.log"

  # Compute only: every node runs its own replica at once with no synchronization (the cores
  # shared as in the synchronized run), node 0's profiled the same way.
  topo_on_each_node "$out/compute.log" "$trainer" "${common[@]}" --iterations "$compute_iterations" --ranks 1 \
    --sync local --trace "$out/compute-trace.json.%RANK%" --metrics "$out/compute-metrics.json.%RANK%" &
  job=$!
  profile_rank 0 "$out/compute"
  wait $job || die "the compute-only run failed: see $out/compute.log"
  mv "$out/compute-trace.json.0" "$out/compute-trace.json" && mv "$out/compute-metrics.json.0" "$out/compute-metrics.json"
  topo_destroy

  /usr/bin/python3 "$E2E_DIR/summarize_profile.py" "$out" | tee "$out/summary.md"
}

# profile_rank NODE PREFIX: finds gradsync-train in the node's namespace, waits --delay, then
# records it with perf for --seconds, with its threads' CPU times before and after.
profile_rank() {
  local node=$1 prefix=$2 pid="" _
  for _ in $(seq 600); do
    pid=$(for p in $(ip netns pids "$(topo_ns "$node")"); do
      # (argv[0]: the process name is "exe" once gradsync-train re-executes itself)
      [[ $(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | head -1) == */gradsync-train ]] && echo "$p"
    done | head -1)
    [ -n "$pid" ] && break
    sleep 0.1
  done
  [ -n "$pid" ] || die "gradsync-train did not start on node $node"
  sleep "$delay"
  local start
  start=$(date +%s.%N)
  cpu_times "$pid" >"$prefix.cpu-before"
  perf record -g -p "$pid" -o "$prefix.perf.data" -- sleep "$seconds" 2>"$prefix.perf.log"
  cpu_times "$pid" >"$prefix.cpu-after"
  # A process gone before the window closed has no threads left to read: its CPU would read 0.
  [ -d "/proc/$pid/task" ] || die "node $node's gradsync-train ($prefix) ended inside the perf window: raise" \
    "--iterations / --compute-iterations or lower --delay ($delay s) + --seconds ($seconds s)"
  awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}' >"$prefix.window"
  perf report -i "$prefix.perf.data" --no-children --sort sym --stdio -g none --percent-limit 0.5 \
    >"$prefix.symbols.txt" 2>/dev/null
  perf report -i "$prefix.perf.data" --no-children --sort pid,sym --stdio -g none --percent-limit 0.3 \
    >"$prefix.threads-symbols.txt" 2>/dev/null
}

# cpu_times PID: the CPU accounting summarize_profile.py compares before and after the window, one line each:
#   thread TID CPU_NS RUNQUEUE_WAIT_NS    per thread of PID (/proc/.../schedstat)
#   ours SECONDS                          CPU time of everything the topology runs (its cgroup)
#   machine BUSY_TICKS STEAL_TICKS        all cores (/proc/stat), steal: taken by the hypervisor
cpu_times() {
  local task
  for task in /proc/"$1"/task/*; do
    echo "thread ${task##*/} $(cut -d' ' -f1,2 "$task/schedstat" 2>/dev/null)"
  done
  echo "ours $(topo_cpu_seconds)"
  awk '/^cpu / {print "machine", $2 + $3 + $4 + $7 + $8 + $9, $9}' /proc/stat
}

main
exit
