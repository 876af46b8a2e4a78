#!/usr/bin/env bash
# How much DGT's best-effort datagrams cost the reliable traffic on the emulated links: the
# table1.sh setting (2 nodes, links shaped with strict DSCP priority, P3's parameter server) for
# the baseline and for DGT with the low-priority class's queue at each depth in --queues (1000:
# the device's default, as table1.sh runs; 0: every datagram dropped at the sender, so none is on
# the link). Prints the median iteration time over the last --window iterations (the loss has
# fallen by then, so many blocks are unimportant) and the bytes each class carried. Run as root.
#
#   benchmarks/dgt/low_queue.sh [--model vgg11:0.25:200mbit] [--iterations 250] [--window 100]
#                               [--queues 1000,20,0] [--trainer PATH] [--out DIR]      # ~10 min
set -uo pipefail
DGT_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$DGT_DIR/../.." && pwd)
source "$REPO/benchmarks/e2e/topology.sh"

spec=vgg11:0.25:200mbit iterations=250 window=100 queues=1000,20,0
trainer=$REPO/build/default/trainer/gradsync-train out=$REPO/build/dgt/low-queue-$(date +%Y%m%d-%H%M%S)
die() { echo "low_queue: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --model | --iterations | --window | --queues | --trainer | --out)
      [ $# -ge 2 ] || die "$1 needs a value"
      opt=${1#--} && [ "$opt" = model ] && opt=spec
      printf -v "$opt" %s "$2"
      shift 2 ;;
    -h | --help) sed -n '2,11p' "$0" && exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $iterations =~ ^[0-9]+$ && $window =~ ^[0-9]+$ && $window -ge 1 && $window -le $iterations ]] ||
  die "--iterations and --window must be whole numbers, 1 <= window <= iterations"
IFS=: read -r model width link <<<"$spec"
[ -n "$link" ] || die "--model takes model:width:link (vgg11:0.25:200mbit), got '$spec'"
[ "$(id -u)" -eq 0 ] || die "network namespaces need root"
[ -x "$trainer" ] || die "no gradsync-train at $trainer (cmake --build build/default --target gradsync-train)"
mkdir -p "$out" || die "cannot create $out"

# run TAG COLLECTIVE QUEUE: one run on a fresh topology; the link's class counters into TAG.tc
run() {
  TOPO_DSCP_PRIO=1 TOPO_LOW_QUEUE=$3
  [ "$3" = default ] && TOPO_LOW_QUEUE=
  topo_create 2 || die "cannot create the topology"
  topo_shape all "$link"
  topo_mpirun "$out/$1.log" -np 2 --host "$(topo_hosts)" "$trainer" --model "$model" --width "$width" --batch 32 \
    --threads 1 --iterations "$iterations" --eval-every 100000 --seed 1 --slicing fixed:40000 --priority forward \
    --collective "$2" -q --metrics "$out/$1.json" || echo "low_queue: $1 failed (see $out/$1.log)" >&2
  tc -n "$(topo_ns 0)" -s class show dev eth0 >"$out/$1.tc"
  topo_destroy
}
echo "low_queue: $model x$width at $link, $iterations iterations; results in $out"
run baseline ps default
IFS=, read -ra depth <<<"$queues"
for q in "${depth[@]}"; do
  [[ $q =~ ^[0-9]+$ ]] || die "--queues takes packet counts, got '$q'"
  run "dgt.q$q" dgt "$q"
done
python3 - "$out" "$window" <<'PY'
import glob, json, os, re, statistics, sys
out, window = sys.argv[1], int(sys.argv[2])
def classes(path):  # bytes sent per HTB class on node 0's uplink
    text = open(path).read()
    return {c: int(b) for c, b in re.findall(r"class htb 1:(\d+) .*?\n Sent (\d+) bytes", text)}
rows = ["| run | low-priority queue (packets) | median iteration, last %d (s) | vs baseline | reliable MB / iteration | best-effort MB / iteration on the link | blocks best-effort / dropped (rank 0, last %d) |" % (window, window),
        "|---|---|---|---|---|---|---|"]
base = None
for tag in ["baseline"] + sorted((os.path.basename(p)[:-5] for p in glob.glob(f"{out}/dgt.q*.json")), key=lambda t: -int(t[5:])):
    m = json.load(open(f"{out}/{tag}.json"))
    n = len(m["iteration_seconds"])
    t = statistics.median(m["iteration_seconds"][-window:])
    base = base or t
    c = classes(f"{out}/{tag}.tc")
    blocks = m["iteration_blocks"][-window:]
    be, dropped = sum(b[1] for b in blocks), sum(b[2] for b in blocks)
    rows.append(f"| {tag} | {tag[5:] if tag != 'baseline' else '-'} | {t:.3f} | {100 * (t / base - 1):+.1f}% | "
                f"{c.get('10', 0) / n / 1e6:.2f} | {c.get('20', 0) / n / 1e6:.2f} | {be} / {dropped} |")
open(f"{out}/table.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
