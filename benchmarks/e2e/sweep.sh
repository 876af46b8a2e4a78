#!/usr/bin/env bash
# End-to-end sweep: gradsync-train under mpirun and PyTorch DDP across network namespaces, over
# links of several rates, next to compute-only runs of both; then report.py writes the JSON, the
# markdown table and the plots. With --accuracy: time to a test accuracy on Fashion-MNIST instead
# (no compute-only runs). With --rounds R every run R times, alternating (all the policies of a
# model and link, then all again), so that the machine's drifting load reaches every policy alike:
# report.py gives the median of the rounds and their spread. DDP runs under --python: Debian's
# PyTorch by default (on OpenBLAS, installed and checked by ../torch_blas.py), or a venv's (its
# wheel's own MKL and oneDNN).
# Run as root from anywhere; `sweep.sh --help` lists the options.
set -uo pipefail
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$E2E_DIR/../.." && pwd)
source "$E2E_DIR/topology.sh"
source "$E2E_DIR/policies.sh"
source "$E2E_DIR/record.sh"
declare -A POLICY_TRAINER=() # --trainer-of

models=vgg11,resnet20 width=1 nodes=2 links=unlimited,10gbit,1gbit,300mbit policies=$ALL_POLICIES
iterations=12 warmup=2 batch=32 threads=1 rounds=1 run_timeout=900 install=1 trace=0
dataset=synthetic accuracy="" eval_every=0 eval_samples=0 lr=0.05 seed=1
python=/usr/bin/python3 trainer=$REPO/build/default/trainer/gradsync-train out=$REPO/build/e2e/$(date +%Y%m%d-%H%M%S)

usage() {
  cat <<EOF
usage: sweep.sh [options]
  --models LIST      vgg11,resnet20 (default $models)
  --width W          width multiplier of the models (default $width)
  --nodes N          nodes, one rank each (default $nodes)
  --links LIST       unlimited or tc rates such as 300mbit, 1gbit, 10gbit (default $links)
  --policies LIST    of ${!POLICY_BITS[*]} (default $ALL_POLICIES)
  --define NAME=FLAGS  a policy of your own, fp32 on the wire: gradsync-train FLAGS, e.g.
                     --define p3-640k='--slicing fixed:640000 --priority forward' (repeatable; add NAME to --policies)
  --iterations N     per run (default $iterations); the first --warmup are not counted
  --warmup N         (default $warmup)
  --batch N          per rank (default $batch); --threads N compute threads per rank (default $threads)
  --rounds R         run every policy (and the compute-only runs) R times per model and link,
                     alternating: report.py gives the median of the rounds and their spread, and
                     marks a policy at or below DDP only where every round is (default $rounds)
  --lr LR            base learning rate of both trainers (default $lr; cosine schedule, 0.2 epochs
                     of warm-up, momentum 0.9, weight decay 5e-4: gradsync-train's defaults)
  --seed N           of both trainers (default $seed)
  time to accuracy (the lossy comparison; no compute-only runs):
  --accuracy A       report the training time until rank 0's test accuracy first reaches A
                     (needs --dataset fashion-mnist and --eval-every)
  --dataset D        synthetic (default: throughput) or fashion-mnist
  --eval-every N     evaluate every N iterations (and at every epoch's end, on the whole test set)
  --eval-samples N   those evaluations on the last N test samples only (default: all 10,000)
  --trainer PATH     gradsync-train (default build/default/trainer/gradsync-train)
  --trainer-of NAME=PATH  run policy NAME with another gradsync-train build, e.g. the commit before
                     a change beside it in the same alternating rounds (repeatable; with --define:
                     --define p3-old='<p3's flags>' --trainer-of p3-old=/tmp/old/gradsync-train)
  --python PATH      the interpreter DDP runs under (default $python: Debian's PyTorch on OpenBLAS;
                     a venv's, e.g. ~/.cache/gradsync/venv-torch-2.15.0/bin/python, for PyTorch 2.x)
  --out DIR          results (default build/e2e/<date>-<time>)
  --trace            also write gradsync-train --trace for every run
  --run-timeout S    end a run after S seconds (default $run_timeout)
  --no-install       do not install missing Debian packages (scripts/setup.sh)
EOF
}

die() {
  echo "sweep: $*" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case $1 in
    --models | --width | --nodes | --links | --policies | --iterations | --warmup | --batch | --threads | --rounds | --trainer | --python | --out | --run-timeout | \
      --lr | --seed | --accuracy | --dataset | --eval-every | --eval-samples)
      [ $# -ge 2 ] || die "$1 needs a value"
      opt=${1#--}
      printf -v "${opt//-/_}" %s "$2"
      shift 2
      ;;
    --trainer-of)
      [ $# -ge 2 ] && [[ $2 == ?*=?* ]] || die "--trainer-of needs NAME=PATH"
      POLICY_TRAINER[${2%%=*}]=${2#*=}
      shift 2
      ;;
    --define)
      [ $# -ge 2 ] && [[ $2 =~ ^[a-z0-9][a-z0-9._-]*=. ]] || die "--define needs NAME=FLAGS (NAME: a-z, 0-9, . _ -)"
      name=${2%%=*}
      [ -z "${POLICY_BITS[$name]:-}" ] || die "--define $name: a policy of that name exists"
      codec=$(sed -n 's/.*--codec[ =]\([^ ]*\).*/\1/p' <<<"${2#*=}")
      [ -z "$codec" ] || [ "$codec" = fp32 ] || die "--define $name: only fp32 policies (the wire bound counts 32 bits a parameter)"
      POLICY_FLAGS[$name]=${2#*=} POLICY_BITS[$name]=32
      shift 2
      ;;
    --trace) trace=1 && shift ;;
    --no-install) install=0 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) usage >&2 && die "unknown option '$1'" ;;
  esac
done

# ---- check the input before touching the machine ----
for n in nodes iterations warmup batch threads rounds run_timeout seed eval_every eval_samples; do
  [[ ${!n} =~ ^[0-9]+$ ]] || die "--${n//_/-} must be a whole number, got '${!n}'"
done
[ "$nodes" -ge 2 ] || die "--nodes must be at least 2"
[ "$rounds" -ge 1 ] || die "--rounds must be at least 1"
[ "$iterations" -gt "$warmup" ] || die "--iterations ($iterations) must exceed --warmup ($warmup)"
[[ $width =~ ^[0-9]*\.?[0-9]+$ ]] || die "--width must be a positive number, got '$width'"
[[ $lr =~ ^[0-9]*\.?[0-9]+([eE]-?[0-9]+)?$ ]] || die "--lr must be a positive number, got '$lr'"
[[ $dataset == synthetic || $dataset == fashion-mnist ]] || die "unknown dataset '$dataset' (valid: synthetic, fashion-mnist)"
if [ -n "$accuracy" ]; then
  [[ $accuracy =~ ^0?\.[0-9]+$ ]] || die "--accuracy must be a fraction in (0, 1) such as 0.85, got '$accuracy'"
  [ "$dataset" = fashion-mnist ] || die "--accuracy needs --dataset fashion-mnist (synthetic test accuracy means little)"
  [ "$eval_every" -gt 0 ] || die "--accuracy needs --eval-every N (how often rank 0 evaluates)"
fi
[ "$eval_every" -eq 0 ] || [ "$dataset" = fashion-mnist ] || die "--eval-every needs --dataset fashion-mnist"
no_eval=(--no-eval) # gradsync-train's: on synthetic data only the time counts
[ "$dataset" = synthetic ] || no_eval=()
IFS=, read -ra model_list <<<"$models"
IFS=, read -ra link_list <<<"$links"
IFS=, read -ra policy_list <<<"$policies"
for m in "${model_list[@]}"; do
  [[ $m == vgg11 || $m == resnet20 ]] || die "unknown model '$m' (valid: vgg11, resnet20: the models ddp.py has too)"
done
for l in "${link_list[@]}"; do
  [[ $l == unlimited || $l =~ ^[0-9]+(k|m|g)bit$ ]] || die "unknown link '$l' (valid: unlimited, or a tc rate like 300mbit, 1gbit)"
done
for p in "${!POLICY_TRAINER[@]}"; do
  [ -n "${POLICY_BITS[$p]:-}" ] && [ -z "${DDP_HOOK[$p]:-}" ] || die "--trainer-of $p: not a gradsync policy (--define it first)"
  [ -x "${POLICY_TRAINER[$p]}" ] || die "--trainer-of $p: no executable at ${POLICY_TRAINER[$p]}"
done
with_ddp=0
for p in "${policy_list[@]}"; do
  [ -n "${POLICY_BITS[$p]:-}" ] || die "unknown policy '$p' (valid: ${!POLICY_BITS[*]})"
  [ -z "${DDP_HOOK[$p]:-}" ] || with_ddp=1
done
[ "$(id -u)" -eq 0 ] || die "network namespaces need root: run as root (sudo $0 ...)"
[ -x "$python" ] || die "--python $python is not an executable interpreter"
debian_torch=0
[ "$python" = /usr/bin/python3 ] && debian_torch=1
[ -x "$trainer" ] || die "no gradsync-train at $trainer: build it (cmake --preset default && cmake --build build/default --target gradsync-train) or pass --trainer PATH"

# ---- what the sweep needs from Debian, installed like every other dependency ----
packages=(iproute2 openmpi-bin python3 gnuplot-nox)
[ $with_ddp = 1 ] && [ $debian_torch = 1 ] && packages+=(python3-torch)
if [ $install = 1 ]; then
  bash "$REPO/scripts/setup.sh" "${packages[@]}" || die "installing ${packages[*]} failed"
fi
for tool in ip tc mpirun /usr/bin/python3; do
  command -v $tool >/dev/null || die "$tool is missing: apt-get install ${packages[*]} (or drop --no-install)"
done
if [ $with_ddp = 1 ]; then
  "$python" -c "import torch.distributed" 2>/dev/null ||
    die "$python cannot import torch.distributed for the ddp policies: apt-get install python3-torch, pip install torch into that venv, or drop them from --policies"
  peer=$("$python" -c 'import torch; print(torch.__version__)')
  # OpenBLAS under PyTorch, checked (and installed unless --no-install) out here, where apt can
  # reach the archive; its kernels' core type exported for the DDP ranks (../torch_blas.py)
  # (a wheel's torch brings its own BLAS: only checked)
  no_install=()
  [ $install = 1 ] && [ $debian_torch = 1 ] || no_install=(--no-install)
  "$python" "$E2E_DIR/../torch_blas.py" --threads "$threads" "${no_install[@]}" ||
    die "PyTorch must run on OpenBLAS, not on the reference BLAS (see the line above)"
  if [ $debian_torch = 1 ]; then
    coretype=$(/usr/bin/python3 "$E2E_DIR/../torch_blas.py" --coretype) || die "torch_blas.py --coretype failed"
    [ -z "$coretype" ] || export OPENBLAS_CORETYPE=$coretype
  fi
fi
[ "$dataset" != fashion-mnist ] || [ -s /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] ||
  die "Fashion-MNIST is missing: apt-get install dataset-fashion-mnist (scripts/setup.sh installs it)"

mkdir -p "$out/raw" || die "cannot create $out"
runs=$out/runs.jsonl
: >"$runs"
failed=0

topo_create "$nodes"
export TOPO_TIMEOUT=$run_timeout
ports=$(for i in $(topo_nodes); do printf 'p%s,' "$i"; done)
ports=${ports%,}

machine_busy_seconds() { # CPU time of all cores since boot, idle excluded (/proc/stat)
  awk -v hz="$(getconf CLK_TCK)" '/^cpu / {printf "%.3f\n", ($2 + $3 + $4 + $7 + $8 + $9) / hz}' /proc/stat
}

# measure TAG LINK POLICY KIND COMMAND...: runs COMMAND (rank 0 writes raw/TAG.json) while the
# bridge ports' counters are sampled, and records the run.
measure() {
  local tag=$1 link=$2 policy=$3 kind=$4 start rc
  shift 4
  # (ip itself, not the topo_exec function, in the background: $! must be the monitor's own pid)
  ip netns exec "$(topo_ns br)" /usr/bin/python3 "$E2E_DIR/linkmon.py" --ports "$ports" --out "$out/raw/$tag.link.tsv" &
  local monitor=$!
  local before
  start=$(date +%s.%N)
  before="$(machine_busy_seconds) $(topo_cpu_seconds)"
  "$@"
  rc=$?
  kill -TERM $monitor
  wait $monitor
  # Runs of one process per node write a metrics file per rank: node 0's is the run's.
  [ ! -e "$out/raw/$tag.rank0.json" ] || mv -f "$out/raw/$tag.rank0.json" "$out/raw/$tag.json"
  local took
  local took others
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  # Cores the rest of the machine kept busy meanwhile (a build, other jobs): all CPU time on the
  # machine less the topology's (unknown without a cgroup v2 hierarchy).
  others=$(echo "$before $(machine_busy_seconds) $(topo_cpu_seconds)" |
    awk -v t="$took" 'NF == 4 {printf "%.2f", (($3 - $1) - ($4 - $2)) / t}')
  record model="$model" width="$width" nodes="$nodes" link="$link" policy="$policy" kind="$kind" \
    bits="${POLICY_BITS[$policy]:-32}" warmup="$warmup" accuracy="$accuracy" round="$round" rc=$rc metrics="raw/$tag.json" log="raw/$tag.log" \
    samples="raw/$tag.link.tsv" seconds="$took" others_cores="$others"
  if [ $rc -eq 0 ] && [ -s "$out/raw/$tag.json" ]; then
    echo "  $tag: $(/usr/bin/python3 "$E2E_DIR/report.py" --median "$out/raw/$tag.json" "$warmup") s/iteration ($took s; other processes kept ${others:-?} cores busy)"
  else
    failed=$((failed + 1))
    echo "  $tag: FAILED (status $rc; see $out/raw/$tag.log)"
  fi
}

use_model() { # sets the model of the runs that follow, and the settings both trainers share
  model=$1
  train=(--model "$model" --width "$width" --batch "$batch" --threads "$threads" --iterations "$iterations"
    --lr "$lr" --seed "$seed" --dataset "$dataset")
  [ "$eval_every" -eq 0 ] || train+=(--eval-every "$eval_every")
  [ "$eval_samples" -eq 0 ] || train+=(--eval-samples "$eval_samples")
}

gradsync_run() { # tag link policy
  local tag=$1 extra=()
  [ $trace = 1 ] && extra=(--trace "$out/raw/$tag.trace.json")
  measure "$tag" "$2" "$3" gradsync topo_mpirun "$out/raw/$tag.log" -np "$nodes" --host "$(topo_hosts)" \
    "${POLICY_TRAINER[$3]:-$trainer}" "${train[@]}" ${POLICY_FLAGS[$3]} "${no_eval[@]}" -q --metrics "$out/raw/$tag.json" "${extra[@]}"
}

ddp_port=29500
ddp_run() { # tag link policy
  ddp_port=$((ddp_port + 1)) # a fresh port: the last run's may still be in TIME_WAIT
  measure "$1" "$2" "$3" ddp topo_on_each_node "$out/raw/$1.log" env RANK=%RANK% WORLD_SIZE="$nodes" \
    MASTER_ADDR="$(topo_addr 0)" MASTER_PORT=$ddp_port GLOO_SOCKET_IFNAME=eth0 \
    "$python" "$E2E_DIR/ddp.py" "${train[@]}" --hook "${DDP_HOOK[$3]}" --metrics "$out/raw/$1.json"
}

# Compute only, before each model's runs on each link, in every round (the machine's load drifts:
# the bound must be measured next to what it bounds): every node runs its own replica at once with no
# synchronization, so the cores are shared as in the synchronized runs; node 0's times count. On
# shaped links also with line-rate traffic: the compute the cores leave at that link's rate.
compute_runs() { # link
  local tag=$model.$1.compute$round_tag
  local compute=("$trainer" "${train[@]}" --ranks 1 --sync local --no-eval -q)
  measure "$tag" "$1" compute gradsync topo_on_each_node "$out/raw/$tag.log" "${compute[@]}" \
    --metrics "$out/raw/$tag.rank%RANK%.json"
  if [ "$1" != unlimited ]; then # the same while the links carry line-rate TCP (topo_traffic_start)
    tag=$model.$1.compute-traffic$round_tag
    topo_traffic_start
    measure "$tag" "$1" compute-traffic gradsync topo_on_each_node "$out/raw/$tag.log" "${compute[@]}" \
      --metrics "$out/raw/$tag.rank%RANK%.json"
    topo_traffic_stop
  fi
  [ $with_ddp = 1 ] || return 0
  tag=$model.$1.ddp-compute$round_tag
  measure "$tag" "$1" ddp-compute ddp topo_on_each_node "$out/raw/$tag.log" "$python" "$E2E_DIR/ddp.py" \
    "${train[@]}" --compute-only --metrics "$out/raw/$tag.rank%RANK%.json"
}

# The sweep itself; one function, so that bash has read all of it before it starts: editing or
# checking out this file during a sweep (hours) cannot change what the running sweep does.
main() {
  echo "sweep: $nodes nodes ($TOPO_ID), models $models x$width, links $links, policies $policies${peer:+ (DDP: PyTorch $peer)}, $rounds round(s) of $iterations iterations ($warmup warm-up), $dataset${accuracy:+, time to $accuracy test accuracy}, results in $out"
  record_machine
  record rounds="$rounds" iterations="$iterations" warmup="$warmup" batch="$batch" threads="$threads" dataset="$dataset" \
    ddp_python="$python" ddp_torch="${peer:-}"
  for p in "${!POLICY_TRAINER[@]}"; do record trainer_of="$p=${POLICY_TRAINER[$p]}"; done
  for link in "${link_list[@]}"; do
    topo_shape all "$link"
    bps=$(topo_linkspeed 0 1 1)
    record link="$link" measured_bps="${bps:-0}"
    echo "link $link: one TCP stream carries $(awk -v b="${bps:-0}" 'BEGIN {printf "%.2f", b / 1e9}') Gbit/s"
    for m in "${model_list[@]}"; do
      use_model "$m"
      for round in $(seq "$rounds"); do
        round_tag= # the raw files of round 2 of 3: MODEL.LINK.POLICY.r2.*
        [ "$rounds" -eq 1 ] || round_tag=.r$round
        [ -n "$accuracy" ] || compute_runs "$link"
        for policy in "${policy_list[@]}"; do
          if [ -n "${DDP_HOOK[$policy]:-}" ]; then
            ddp_run "$model.$link.$policy$round_tag" "$link" "$policy"
          else
            gradsync_run "$model.$link.$policy$round_tag" "$link" "$policy"
          fi
        done
      done
    done
  done
  topo_destroy

  /usr/bin/python3 "$E2E_DIR/report.py" "$out" ${accuracy:+--accuracy "$accuracy"} || die "report.py failed on $out"
  [ $failed -eq 0 ] || die "$failed run(s) failed: their logs are in $out/raw"
}

main
exit
