#!/usr/bin/env bash
# DGT's Table 1 on gradsync-train: the parameter server all reliable (baseline) against DGT
# (important blocks reliable, the rest as best-effort datagrams), across network namespaces whose
# links are shaped (a rate per model) with strict DSCP priority (the datagrams' CS1 waits for everything
# else), same models, seeds and data (Fashion-MNIST), test accuracy every --eval-every iterations.
# report.py writes table.md (iterations, batch completion time, time to the target accuracy,
# blocks dropped) and accuracy.png (test accuracy against training time). Run as root.
set -uo pipefail
DGT_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$DGT_DIR/../.." && pwd)
source "$REPO/benchmarks/e2e/topology.sh"

models=alexnet-bn:0.25:100mbit,vgg11:0.25:200mbit nodes=2 seeds=1 iterations=1874 eval_every=40 eval_samples=2000
batch=32 target=0.8 inflight=8 protocols=baseline,dgt
dgt=dgt:p0=2 install=1 run_timeout=3600
trainer=$REPO/build/default/trainer/gradsync-train out=$REPO/build/dgt/$(date +%Y%m%d-%H%M%S)

usage() {
  cat <<USAGE
usage: table1.sh [options]
  --models LIST      model:width:link triples, link a tc rate (default $models): links scaled
                     so that communication is comparable to compute, as in the paper's setting
  --nodes N          nodes, one rank each, every one a server of its share (default $nodes)
  --seeds LIST       seeds, each run by both protocols (default $seeds)
  --protocols LIST   which of them to run (default $protocols; one alone, e.g. to compare
                     DGT at another budget with a baseline run before)
  --iterations N     training budget per run (default $iterations: two epochs on 2 nodes; the lr
                     schedule spans it)
  --eval-every N     test accuracy every N iterations (default $eval_every)
  --eval-samples N   those on the last N test samples (default $eval_samples); epoch ends and
                     the final accuracy on the whole test set (10,000)
  --batch N          per rank (default $batch)
  --inflight N       units in flight per rank, both protocols (default $inflight; the library's is 2)
  --target A         test accuracy whose time is reported (default $target)
  --dgt SPEC         DGT's collective, e.g. dgt:alpha=0.3:p0=1:block=1024 (the paper's; default $dgt)
  --trainer PATH     gradsync-train built with MPI (default build/default/trainer/gradsync-train)
  --out DIR          results (default build/dgt/<date>-<time>)
  --run-timeout S    end a run after S seconds (default $run_timeout)
  --no-install       do not install missing Debian packages
USAGE
}
die() { echo "table1: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case $1 in
    --models | --nodes | --seeds | --protocols | --iterations | --eval-every | --eval-samples | --batch | --inflight | --target | --dgt | --trainer | --out | --run-timeout)
      [ $# -ge 2 ] || die "$1 needs a value"
      opt=${1#--}
      printf -v "${opt//-/_}" %s "$2"
      shift 2 ;;
    --no-install) install=0 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) usage >&2 && die "unknown option '$1'" ;;
  esac
done
for n in nodes iterations eval_every eval_samples batch inflight run_timeout; do
  [[ ${!n} =~ ^[0-9]+$ && ${!n} -gt 0 ]] || die "--${n//_/-} must be a positive whole number, got '${!n}'"
done
[ "$nodes" -ge 2 ] || die "--nodes must be at least 2"
[[ $dgt == dgt || $dgt == dgt:* ]] || die "--dgt must be a dgt collective spec (dgt[:alpha=A][:p0=P][:block=N]), got '$dgt'"
IFS=, read -ra model_list <<<"$models"
IFS=, read -ra seed_list <<<"$seeds"
IFS=, read -ra protocol_list <<<"$protocols"
for p in "${protocol_list[@]}"; do
  [[ $p == baseline || $p == dgt ]] || die "--protocols takes baseline and/or dgt, got '$p'"
done
for m in "${model_list[@]}"; do
  [[ $m =~ ^[a-z0-9-]+:[0-9]*\.?[0-9]+:[0-9]+(k|m|g)bit$ ]] || die "--models takes model:width:link triples (alexnet-bn:0.25:100mbit), got '$m'"
done
[ "$(id -u)" -eq 0 ] || die "network namespaces need root: run as root (sudo $0 ...)"
[ -x "$trainer" ] || die "no gradsync-train at $trainer: build it (cmake --preset default && cmake --build build/default --target gradsync-train) or pass --trainer PATH"
[ $install = 0 ] || bash "$REPO/scripts/setup.sh" iproute2 openmpi-bin python3 gnuplot-nox || die "installing packages failed"

mkdir -p "$out/raw" || die "cannot create $out"
TOPO_DSCP_PRIO=1
topo_create "$nodes" || die "cannot create the topology"
echo "table1: $nodes nodes, links with DSCP priority; results in $out"
TOPO_TIMEOUT=$run_timeout
failed=0
for spec in "${model_list[@]}"; do
  IFS=: read -r model width link <<<"$spec"
  topo_shape all "$link"
  echo "table1: $model x$width at $link: one TCP stream $(awk -v b="$(topo_linkspeed 0 1 2)" 'BEGIN {printf "%.3f", b / 1e9}') Gbit/s"
  for seed in "${seed_list[@]}"; do
    for proto in "${protocol_list[@]}"; do
      tag=$model.$proto.s$seed
      collective=ps && [ $proto = dgt ] && collective=$dgt
      echo "table1: $tag"
      topo_mpirun "$out/raw/$tag.log" -np "$nodes" --host "$(topo_hosts)" "$trainer" --model "$model" \
        --width "$width" --batch "$batch" --threads 1 --iterations "$iterations" --eval-every "$eval_every" \
        --eval-samples "$eval_samples" --seed "$seed" \
        --slicing fixed:40000 --priority forward --collective "$collective" --inflight "$inflight" -q --metrics "$out/raw/$tag.json" ||
        { echo "table1: $tag failed (see $out/raw/$tag.log)" >&2; failed=1; }
    done
  done
done
topo_destroy
python3 "$DGT_DIR/report.py" "$out" --target "$target" || exit 1
cat "$out/table.md"
exit $failed
