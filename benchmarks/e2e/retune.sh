#!/usr/bin/env bash
# Online re-tuning on real links: gradsync-train --slicing auto (--tune, spelt so that
# Open MPI leaves it alone) --retune-every under mpirun across topology.sh's network namespaces,
# every link shaped to FROM; a few seconds into training the script reshapes every link to TO
# under the running job (tc, as a congested or rerouted network would). Checks that every rank
# re-tunes at the same iteration to the same setting, that a re-check read the change (and
# switched, or kept a setting the tuner picks at TO too), and that the replicas end identical.
# Then (not with --check) it measures at TO what the job would have run at without re-tuning: the
# setting chosen at FROM, P3's default, and --tune started at TO, each a fresh run. Writes DIR/retune.md and each run's log and metrics under
# DIR. Exits 1 if a check fails, 77 (ctest: skipped) where namespaces or mpirun are unavailable.
#
# usage: retune.sh --trainer PATH --out DIR [--check] [--nodes N] [--from RATE] [--to RATE]
#                  [--after SECONDS] [--iterations N] [--every N]
#   --check       only the re-tuned run and its checks (ctest)
#   --nodes       ranks, one per namespace (default 2)
#   --from, --to  tc rates before and after the change (default 1gbit, 30mbit)
#   --after       seconds of training at FROM before the change (default 6)
#   --iterations  of the re-tuned run (default 160); of each comparison run: 60
#   --every       --retune-every (default 4)
set -uo pipefail
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
trainer='' out='' check=0 nodes=2 from=1gbit to=30mbit after=6 iterations=160 every=4
usage() {
  sed -n '12,19p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case $1 in
    --check) check=1; shift ;;
    --trainer | --out | --nodes | --from | --to | --after | --iterations | --every)
      [ $# -ge 2 ] || usage
      v=${1#--}
      printf -v "$v" %s "$2"
      shift 2 ;;
    *) echo "retune.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[ -n "$trainer" ] && [ -n "$out" ] || usage
trainer=$(readlink -f "$trainer")
# Our own names and subnet, apart from a sweep's or the fault tests' running beside us.
export TOPO_PREFIX=gsr TOPO_NET=10.79.0
source "$E2E_DIR/topology.sh"
topo_skip_unless_usable retune "$trainer"
rm -rf "$out"
mkdir -p "$out"
topo_create "$nodes" # torn down on EXIT, INT and TERM
topo_shape all "$from"

# ResNet-20 at batch 8: its 1.1 MB of gradients are hidden behind compute at 1 Gbit/s and take
# several times the compute at 30 Mbit/s, so the tuner may choose differently on the two.
COMMON=(--model resnet20 --width 1 --dataset synthetic --batch 8 --synthetic-size 4000 --threads 1 --seed 7
  --no-eval -q --timeout 60)
MPI=(-np "$nodes" --host "$(topo_hosts)" --tag-output)
fail() {
  echo "retune: FAIL: $*" >&2
  exit 1
}
# job NAME trainer-args...: one mpirun across the nodes; its log and rank 0's metrics in DIR.
job() {
  local name=$1
  shift
  TOPO_TIMEOUT=600 topo_mpirun "$out/$name.log" "${MPI[@]}" "$trainer" "${COMMON[@]}" \
    --metrics "$out/$name.json" "$@" || fail "$name: mpirun exited $? (see $out/$name.log)"
}
# The change: once rank 0 has printed its start-up choice (training starts right after it),
# wait --after seconds and reshape every link.
reshape() {
  local log=$out/retuned.log
  until grep -aq -- "--tune: link" "$log" 2>/dev/null; do sleep 0.1; done
  sleep "$after"
  topo_shape all "$to"
  date +%s.%N >"$out/reshaped.t"
}

job_retuned() {
  reshape &
  local shaper=$!
  job retuned --slicing auto --retune-every "$every" --iterations "$iterations" --print-digest
  kill "$shaper" 2>/dev/null
  wait "$shaper" 2>/dev/null
  [ -s "$out/reshaped.t" ] || fail "the run ended before the links changed (raise --iterations or lower --after)"
}
job_retuned

# ---- the checks ----
log=$out/retuned.log
mapfile -t digests < <(sed -n 's/.*gradsync-train: rank \([0-9]*\) weights digest \(.*\)/\1 \2/p' "$log" | sort -n)
[ ${#digests[@]} = "$nodes" ] || fail "${#digests[@]} of $nodes ranks printed their weights digest ($log)"
[ "$(printf '%s\n' "${digests[@]}" | cut -d' ' -f2- | sort -u | wc -l)" = 1 ] || fail "the replicas differ: ${digests[*]}"
reference=''
for r in $(topo_nodes); do
  mine=$(sed -n "s/.*gradsync-train: rank $r: --retune-every: //p" "$log")
  [ -n "$mine" ] || fail "rank $r never re-checked the link ($log)"
  [ -z "$reference" ] && reference=$mine
  [ "$mine" = "$reference" ] || fail "rank $r re-tuned differently from rank 0: '$mine' against '$reference'"
done
startup=$(grep -a -m1 -- "--tune: link" "$log" | sed 's/.*gradsync-train: //')
setting_before=$(sed -n 's/.*chose \(--slicing .* --credit [0-9]*\) .*/\1/p' <<<"$startup")
# The first re-check that read the change: a rate off the one measured at start-up by a factor 2
# in the change's direction (it switches, or keeps a setting the tuner picks at the new rate too).
bits() { awk -v r="$1" 'BEGIN { n = r + 0; u = substr(r, length(n) + 1, 1); print n * (u == "k" ? 1e3 : u == "m" ? 1e6 : 1e9) }'; }
down=$(awk -v a="$(bits "$to")" -v b="$(bits "$from")" 'BEGIN { print (a < b) }')
seen=$(awk -v start="$(sed -n 's/^--tune: link \([0-9.e+-]*\) Gbit.*/\1/p' <<<"$startup")" -v down="$down" '
  match($0, /measures [0-9.e+-]+ Gbit/) {
    r = substr($0, RSTART + 9, RLENGTH - 14) + 0
    if (down ? r < start / 2 : r > start * 2) { print; exit }
  }' <<<"$reference")
[ -n "$seen" ] || fail "no re-check read the change from $from to $to (start-up: $startup; re-checks: $reference)"
switched_at=$(sed -n 's/after iteration \([0-9]*\) .*/\1/p' <<<"$seen")
setting_after=$(sed -n 's/.*\(switched to\|kept\) //p' <<<"$seen")
echo "retune: every rank ($nodes) re-checked alike, read the change after iteration $switched_at and ended with the same weights" >&2
echo "  start-up: $startup" >&2
printf '  %s\n' "$reference" >&2
[ "$check" = 1 ] && exit 0

# ---- at TO, without re-tuning ----
# median_after FILE SKIP: the median of rank 0's iteration times after the first SKIP.
median_after() {
  python3 -c 'import json,statistics,sys; t=json.load(open(sys.argv[1]))["iteration_seconds"][int(sys.argv[2]):]; print(f"{statistics.median(t):.3f}" if t else "n/a")' "$1" "$2"
}
compare=(--iterations 60)
# shellcheck disable=SC2086 # the settings are flag lists
job stale "${compare[@]}" $setting_before
job p3_default "${compare[@]}"
job tuned_at_to "${compare[@]}" --slicing auto
chosen_at_to=$(grep -a -m1 -- "--tune: link" "$out/tuned_at_to.log" | sed -n 's/.*chose \(--slicing .* --credit [0-9]*\) .*/\1/p')
retuned=$(median_after "$out/retuned.json" $((switched_at + 2)))
{
  echo "Online re-tuning across $nodes network namespaces: links $from, reshaped to $to ${after} s into the run"
  echo "(ResNet-20, batch 8 per rank, 1 compute thread per rank; medians of rank 0's iterations)."
  echo
  echo "Start-up: $startup"
  echo
  printf -- '- %s\n' "${reference//$'\n'/$'\n'- }"
  echo
  echo "| run at $to | setting | s/iteration | vs re-tuned |"
  echo "|---|---|---|---|"
  echo "| re-tuned (after the re-check at iteration $switched_at that read the change, 2 left out) | $setting_after | $retuned | 1.00 |"
  for run in stale p3_default tuned_at_to; do
    case $run in
      stale) label="kept the start-up choice (no --retune-every)" setting=$setting_before ;;
      p3_default) label="P3's default" setting="--slicing fixed:40000 (library window)" ;;
      tuned_at_to) label="--tune started at $to" setting=$chosen_at_to ;;
    esac
    m=$(median_after "$out/$run.json" 4)
    echo "| $label | $setting | $m | $(awk -v a="$m" -v b="$retuned" 'BEGIN {printf "%.2f", a / b}') |"
  done
} >"$out/retune.md"
cat "$out/retune.md"
