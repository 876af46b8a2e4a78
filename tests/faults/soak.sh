#!/usr/bin/env bash
# Soak: gradsync-train on 4 ranks for many iterations, alternately in-process and under
# mpirun, each run with the next collective in turn (every one, in both, over 10 runs) and the
# rest of its policies (slicing, priority, codec, window) drawn at random.
# Every run must finish within its wall-clock limit (no hang), its processes' resident memory must
# grow by less than --max-growth after warm-up (the first quarter of the run), and every rank must
# end with the same weights (--print-digest). Writes DIR/soak.md and each run's log and memory
# samples under DIR; exits 1 if any check fails, 77 (ctest: skipped) without mpirun.
#
# usage: soak.sh --trainer PATH --out DIR [--runs N] [--iterations N] [--seed S] [--max-growth PCT]
set -uo pipefail
trainer='' out='' runs=4 iterations=2000 seed=1 max_growth=2
while [ $# -gt 0 ]; do
  case $1 in
    --trainer) trainer=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --iterations) iterations=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --max-growth) max_growth=$2; shift 2 ;;
    *) echo "usage: soak.sh --trainer PATH --out DIR [--runs N] [--iterations N] [--seed S] [--max-growth PCT]" >&2; exit 2 ;;
  esac
done
[ -n "$trainer" ] && [ -n "$out" ] || { echo "usage: soak.sh --trainer PATH --out DIR [--runs N]" >&2; exit 2; }
[ -x "$trainer" ] || { echo "soak SKIPPED: $trainer is not built"; exit 77; }
command -v mpirun >/dev/null || { echo "soak SKIPPED: mpirun is missing (apt-get install openmpi-bin)"; exit 77; }
rm -rf "$out"
mkdir -p "$out"

RANDOM=$seed
# pick VAR ARGS...: sets VAR to one of ARGS at random. Not $(pick ...): bash reseeds RANDOM in a
# subshell, and --seed would no longer choose the policies.
pick() {
  local -n into=$1
  shift
  local a=("$@")
  into=${a[RANDOM % ${#a[@]}]}
}
slicings=(fixed:40000 fixed:10000 whole fusion:1MiB slicefuse:40000)
priorities=(forward fifo)
codecs=(fp32 fp16 bf16 qsgd4 qsgd8 onebit topk ef+qsgd4 ef+fp16)
collectives=(ring ps reduce-broadcast hierarchical:2 hybrid)
windows=(1 2 4)
COMMON=(--model resnet20 --width 0.25 --dataset synthetic --batch 8 --synthetic-size 960 --no-eval --quiet
  --print-digest --timeout 60 --iterations "$iterations")
# Seconds a run may take before it counts as hung: generous for a loaded 2-core machine.
limit=$((iterations / 4 + 120))

# Samples the resident memory (kB) of gradsync-train processes at or under PID every 0.2 s into FILE
# as "seconds pid kB" until PID is gone: often enough that a run of a few seconds (the smoke under
# mpirun on a fast machine) still gives each process the samples growth() needs.
sample_rss() {
  local root=$1 file=$2 t0=$EPOCHREALTIME
  while kill -0 "$root" 2>/dev/null; do
    # One awk over every process's status file per sample: forks cost more than the reading.
    awk -v t="$EPOCHREALTIME" -v t0="$t0" '/^Name:/ {name = $2}
      /^VmRSS:/ && name == "gradsync-train" {split(FILENAME, f, "/"); printf "%.2f %s %s\n", t - t0, f[3], $2}' \
      /proc/"$root"/status $(pgrep -P "$root" | sed 's|.*|/proc/&/status|') 2>/dev/null >>"$file"
    sleep 0.2
  done
}

# Growth of each process's memory from the end of warm-up (the median of the samples in the
# second quarter of its life) to its end (the median of its last 4 samples), in percent: the largest.
growth() {
  /usr/bin/python3 - "$1" <<'PY'
import collections, statistics, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    t, pid, kb = line.split()
    by[pid].append((float(t), int(kb)))
worst = None
for s in by.values():
    if len(s) < 12:
        continue
    t0, t1 = s[0][0], s[-1][0]
    base = statistics.median(kb for t, kb in s if t0 + (t1 - t0) / 4 <= t <= t0 + (t1 - t0) / 2)
    end = statistics.median(kb for _, kb in s[-4:])
    g = 100.0 * (end - base) / base
    worst = g if worst is None else max(worst, g)
print("n/a" if worst is None else f"{worst:.2f}")
PY
}

rows=()
failures=0
for ((run = 1; run <= runs; run++)); do
  mode=in-process
  [ $((run % 2)) = 0 ] && mode=mpi
  pick slicing "${slicings[@]}"
  pick priority "${priorities[@]}"
  pick codec "${codecs[@]}"
  pick window "${windows[@]}"
  policy=(--slicing "$slicing" --priority "$priority" --codec "$codec"
    --collective "${collectives[$(((run - 1) % ${#collectives[@]}))]}" --inflight "$window" --seed $((seed * 100 + run)))
  log=$out/run$run.log rss=$out/run$run.rss
  : >"$rss"
  t0=$(date +%s.%N)
  if [ $mode = mpi ]; then
    mpirun --allow-run-as-root --oversubscribe -np 4 "$trainer" "${COMMON[@]}" --threads 1 "${policy[@]}" >"$log" 2>&1 &
  else
    "$trainer" "${COMMON[@]}" --ranks 4 --threads 2 "${policy[@]}" >"$log" 2>&1 &
  fi
  job=$!
  sample_rss $job "$rss" &
  sampler=$!
  hung=0
  while kill -0 $job 2>/dev/null; do
    if awk -v a="$t0" -v b="$(date +%s.%N)" -v l=$limit 'BEGIN {exit !(b - a > l)}'; then
      hung=1
      pkill -9 -P $job 2>/dev/null
      kill -9 $job 2>/dev/null
      break
    fi
    sleep 1
  done
  wait $job
  rc=$?
  wait $sampler 2>/dev/null
  seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.0f", b - a}')
  digests=$(sed -n 's/.*gradsync-train: rank \([0-9]*\) weights digest \([0-9a-f]*\).*/\1 \2/p' "$log" | sort -n)
  distinct=$(echo "$digests" | awk 'NF {print $2}' | sort -u | wc -l)
  ranks_seen=$(echo "$digests" | awk 'NF' | wc -l)
  grew=$(growth "$rss")
  ok=1 why=()
  [ $hung = 0 ] || { ok=0; why+=("hung (killed after ${limit} s)"); }
  [ $rc = 0 ] || { ok=0; why+=("exit $rc: $(grep -a -m1 -iE 'error|terminate' "$log" | cut -c1-200)"); }
  [ "$ranks_seen" = 4 ] && [ "$distinct" = 1 ] || { ok=0; why+=("replicas: $ranks_seen digests, $distinct distinct"); }
  if [ "$grew" = n/a ]; then
    ok=0 why+=("memory not measured: fewer than 12 samples of each process (raise --iterations)")
  elif ! awk -v g="$grew" -v m="$max_growth" 'BEGIN {exit !(g < m)}'; then
    ok=0 why+=("memory grew $grew% (limit $max_growth%)")
  fi
  mark=pass
  [ $ok = 1 ] || { mark=FAIL; failures=$((failures + 1)); }
  replicas="$distinct digest(s) over $ranks_seen ranks"
  [ "$distinct" = 1 ] && [ "$ranks_seen" = 4 ] && replicas="identical ($(echo "$digests" | awk 'NR == 1 {print $2}'))"
  rows+=("| $run | $mode | \`${policy[*]}\` | $seconds | $grew% | $replicas | $mark${why[*]:+: ${why[*]}} |")
  echo "soak: run $run [$mark] $mode ${policy[*]}: ${seconds} s, memory growth $grew%, replicas $replicas ${why[*]}" >&2
done

{
  echo "# Soak: $runs runs x 4 ranks x $iterations iterations ($(date -u +%Y-%m-%d), $(nproc) cores)"
  echo
  echo "\`${COMMON[*]}\`; in-process runs \`--ranks 4 --threads 2\`, MPI runs \`mpirun -np 4 ... --threads 1\`."
  echo "Memory: each process's resident set at its end against the end of warm-up (the median over the"
  echo "second quarter of its life); the largest growth over the run's processes."
  echo
  echo "| run | ranks | policies | seconds | memory growth after warm-up | final weights of the 4 ranks | check |"
  echo "|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out/soak.md"
cat "$out/soak.md"
[ $failures -eq 0 ] || { echo "soak: $failures run(s) FAILED" >&2; exit 1; }
echo "soak: every run passed"
