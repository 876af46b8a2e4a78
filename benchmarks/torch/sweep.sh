#!/usr/bin/env bash
# The PyTorch end-to-end sweep: torchvision models and a Transformer trained by
# PyTorch itself, synchronized by DDP (gloo; plain and with its fp16 hook) and by gradsync.torch
# (WFBP, P3 fp32, fp16, qsgd8) - the same compute for every contender - over links of several
# rates between network namespaces (benchmarks/e2e/topology.sh), next to compute-only runs and
# gradsync's hooks in a world of one. Then report.py writes results.json, table.md (with every
# goal) and the throughput-vs-bandwidth plots. Run as root; `sweep.sh --help` lists the options.
# `--loopback` runs the same on this machine's loopback instead (no namespaces, no shaping): the
# check that everything runs, not a measurement.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
E2E_DIR=$REPO/benchmarks/e2e
source "$E2E_DIR/record.sh"

models=vgg16,resnet50,transformer nodes=2 links=unlimited,10gbit,1gbit,300mbit
# bench.py's contenders; the default runs all but fusion, ddp-view, ddp-powersgd and the ddp-gs-* comm hooks
known_contenders=compute,hooks,ddp,ddp-fp16,wfbp,p3,p3-fp16,p3-qsgd8,auto,fusion,ddp-view,ddp-powersgd,ddp-gs-fp16,ddp-gs-qsgd8
contenders=${known_contenders%,fusion,ddp-view,ddp-powersgd,ddp-gs-fp16,ddp-gs-qsgd8}
iterations=10 warmup=2 threads=1 rounds=1 run_timeout=3600 install=1 loopback=0 python=/usr/bin/python3
pythonpath= out=$REPO/build/e2e-torch/$(date +%Y%m%d-%H%M%S)
# Batch per rank and input of each model: seconds of compute per iteration on one core (VGG-16
# ~46 GFLOP an image at 224x224, a quarter of it at 112; ResNet-50 ~12; the Transformer, 44M
# parameters, ~6 x parameters FLOP a token). Calibrate with --set on another machine.
declare -A BATCH=([vgg16]=16 [resnet50]=16 [transformer]=8) INPUT=([vgg16]=3x112x112 [resnet50]=3x128x128 [transformer]=128)

usage() {
  cat <<EOF
usage: sweep.sh [options]
  --models LIST       torchvision model names or transformer (default $models)
  --set MODEL=BATCH:INPUT  batch per rank and input (CxHxW, or the sequence length) of a model,
                      e.g. --set vgg16=8:3x224x224 (repeatable; defaults: $(for m in "${!BATCH[@]}"; do printf '%s=%s:%s ' "$m" "${BATCH[$m]}" "${INPUT[$m]}"; done))
  --nodes N           nodes, one rank each (default $nodes)
  --links LIST        unlimited or tc rates such as 300mbit, 1gbit, 10gbit (default $links)
  --contenders LIST   of $known_contenders (default $contenders)
  --iterations N      per run (default $iterations); the first --warmup are not counted
  --warmup N          (default $warmup)
  --threads N         compute threads per rank (default $threads)
  --rounds R          run every contender R times per model and link, alternating (contender after
                      contender, then again): report.py gives the median of the rounds and their
                      spread (default $rounds)
  --python PATH       the interpreter every contender runs under (default /usr/bin/python3: Debian's
                      PyTorch 1.13 on OpenBLAS, checked); a venv's (PyTorch 2.x) must have gradsync
                      pip-installed (scripts/test_torch.sh does) and torchvision
  --pythonpath DIR    where the gradsync package is (default: build/default/python with
                      /usr/bin/python3, none with --python)
  --out DIR           results (default build/e2e-torch/<date>-<time>)
  --run-timeout S     end a run after S seconds (default $run_timeout)
  --loopback          no namespaces: every rank on this machine's loopback, links must be unlimited
  --no-install        do not install missing Debian packages (scripts/setup.sh)
EOF
}

die() {
  echo "sweep: $*" >&2
  exit 2
}

while [ $# -gt 0 ]; do
  case $1 in
    --models | --nodes | --links | --contenders | --iterations | --warmup | --threads | --rounds | --python | --pythonpath | --out | --run-timeout)
      [ $# -ge 2 ] || die "$1 needs a value"
      opt=${1#--}
      printf -v "${opt//-/_}" %s "$2"
      shift 2
      ;;
    --set)
      [ $# -ge 2 ] && [[ $2 =~ ^([a-z0-9_]+)=([0-9]+):([0-9x]+)$ ]] || die "--set needs MODEL=BATCH:INPUT, e.g. vgg16=8:3x224x224"
      BATCH[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]} INPUT[${BASH_REMATCH[1]}]=${BASH_REMATCH[3]}
      shift 2
      ;;
    --loopback) loopback=1 && shift ;;
    --no-install) install=0 && shift ;;
    -h | --help) usage && exit 0 ;;
    *) usage >&2 && die "unknown option '$1'" ;;
  esac
done

# ---- check the input before touching the machine ----
for n in nodes iterations warmup threads rounds run_timeout; do
  [[ ${!n} =~ ^[0-9]+$ ]] || die "--${n//_/-} must be a whole number, got '${!n}'"
done
[ "$nodes" -ge 2 ] || die "--nodes must be at least 2"
[ "$rounds" -ge 1 ] || die "--rounds must be at least 1"
[ "$iterations" -gt "$warmup" ] || die "--iterations ($iterations) must exceed --warmup ($warmup)"
IFS=, read -ra model_list <<<"$models"
IFS=, read -ra link_list <<<"$links"
IFS=, read -ra contender_list <<<"$contenders"
for m in "${model_list[@]}"; do
  [ -n "${BATCH[$m]:-}" ] || die "no batch and input for model '$m': add --set $m=BATCH:INPUT"
done
for l in "${link_list[@]}"; do
  [[ $l == unlimited || $l =~ ^[0-9]+(k|m|g)bit$ ]] || die "unknown link '$l' (valid: unlimited, or a tc rate like 300mbit, 1gbit)"
  [ $loopback = 0 ] || [ "$l" = unlimited ] || die "--loopback has no shaping: use --links unlimited"
done
for c in "${contender_list[@]}"; do
  [[ ,$known_contenders, == *",$c,"* ]] || die "unknown contender '$c'"
done
[ $loopback = 1 ] || [ "$(id -u)" -eq 0 ] || die "network namespaces need root: run as root, or pass --loopback"

[ -x "$python" ] || die "--python $python is not an executable interpreter"
debian_torch=0
[ "$python" = /usr/bin/python3 ] && debian_torch=1
[ $debian_torch = 0 ] || [ -n "$pythonpath" ] || pythonpath=$REPO/build/default/python

# ---- what the sweep needs from Debian; Debian's PyTorch must run on OpenBLAS, as a user's would ----
packages=(iproute2 openmpi-bin gnuplot-nox)
[ $debian_torch = 0 ] || packages+=(python3-torch python3-torchvision libopenblas0-pthread)
if [ $install = 1 ]; then
  bash "$REPO/scripts/setup.sh" "${packages[@]}" || die "installing ${packages[*]} failed"
fi
coretype=
if [ $debian_torch = 1 ]; then
  blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)
  [[ $blas == *openblas* ]] ||
    die "PyTorch's BLAS is $blas, not OpenBLAS: apt-get install libopenblas0-pthread (update-alternatives --config libblas.so.3-x86_64-linux-gnu)"
  # OpenBLAS picks its kernels by CPU model; on a CPU it does not know (a VM's) it may take an older
  # core than the flags allow: then every rank gets the one torch_blas.py names, as a user would set.
  coretype=$(/usr/bin/python3 "$REPO/benchmarks/torch_blas.py" --coretype) || die "torch_blas.py --coretype failed"
else # a wheel: its own BLAS (MKL) and oneDNN, recorded by bench.py from torch.__config__
  blas="the wheel's own ($("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null))"
fi
PYTHONPATH=$pythonpath "$python" -c "import gradsync.torch, torchvision" ||
  die "$python cannot import gradsync.torch${pythonpath:+ from $pythonpath} or torchvision: build gradsync_python (cmake --build build/default --target gradsync_python), pip install gradsync and torchvision into that environment (scripts/test_torch.sh), or pass --pythonpath"
export PYTHONPATH=$pythonpath OMP_NUM_THREADS=$threads
mpi_env=(-x PYTHONPATH -x OMP_NUM_THREADS)
[ -z "$coretype" ] || { export OPENBLAS_CORETYPE=$coretype; mpi_env+=(-x OPENBLAS_CORETYPE); }

mkdir -p "$out/raw" || die "cannot create $out"
runs=$out/runs.jsonl
: >"$runs"
failed=0

# ---- where the ranks run: the namespace topology, or loopback ----
source "$E2E_DIR/topology.sh"
export TOPO_TIMEOUT=$run_timeout
if [ $loopback = 0 ]; then
  topo_create "$nodes"
  mpi_run() { # log args...: the ranks across the nodes, every byte over the shaped links
    topo_mpirun "$1" -np "$nodes" --host "$(topo_hosts)" "${mpi_env[@]}" "${@:2}"
  }
  master=$(topo_addr 0) iface=eth0
else
  TOPO_NODES=$nodes
  topo_exec() { "${@:2}"; } # every "node" is this machine (topo_on_each_node runs through it)
  mpi_run() {
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 10 "$run_timeout" mpirun --oversubscribe \
      --bind-to none -np "$nodes" --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
      "${mpi_env[@]}" "${@:2}" >"$1" 2>&1
  }
  master=127.0.0.1 iface=lo
fi

free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }

# run MODEL LINK CONTENDER ROUND: one run, rank 0's metrics in raw/MODEL.LINK.CONTENDER[.rROUND].json.
run() {
  local model=$1 link=$2 contender=$3 round=$4 tag=$1.$2.$3 rc start
  [ "$rounds" -eq 1 ] || tag+=.r$round
  local log=$out/raw/$tag.log metrics=$out/raw/$tag.json
  local bench=("$python" -P "$HERE/bench.py" --model "$model" --contender "$contender" --batch "${BATCH[$model]}"
    --input "${INPUT[$model]}" --iterations "$iterations" --threads "$threads" --timeout "$run_timeout")
  : >"$log"
  start=$(date +%s.%N)
  case $contender in
    compute | hooks) # every node its own replica at once: the cores shared as in the synchronized runs
      topo_on_each_node "$log" "${bench[@]}" --metrics "$out/raw/$tag.rank%RANK%.json"
      rc=$?
      mv -f "$out/raw/$tag.rank0.json" "$metrics" 2>/dev/null
      ;;
    ddp-gs-*) # mpirun's ranks for gradsync's hook, DDP's rendezvous beside them
      MASTER_ADDR=$master MASTER_PORT=$(free_port) GLOO_SOCKET_IFNAME=$iface \
        mpi_run "$log" -x MASTER_ADDR -x MASTER_PORT -x GLOO_SOCKET_IFNAME "${bench[@]}" --metrics "$metrics"
      rc=$?
      ;;
    ddp*)
      topo_on_each_node "$log" env RANK=%RANK% WORLD_SIZE="$nodes" MASTER_ADDR="$master" MASTER_PORT="$(free_port)" \
        GLOO_SOCKET_IFNAME=$iface "${bench[@]}" --metrics "$metrics"
      rc=$?
      ;;
    *)
      mpi_run "$log" "${bench[@]}" --metrics "$metrics"
      rc=$?
      ;;
  esac
  local took
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  record model="$model" nodes="$nodes" link="$link" contender="$contender" batch="${BATCH[$model]}" \
    input="${INPUT[$model]}" warmup="$warmup" round="$round" rc=$rc metrics="raw/$tag.json" log="raw/$tag.log" seconds="$took"
  if [ $rc -eq 0 ] && [ -s "$metrics" ]; then
    echo "  $tag: $(/usr/bin/python3 "$HERE/report.py" --median "$metrics" "$warmup") s/iteration ($took s)"
  else
    failed=$((failed + 1))
    echo "  $tag: FAILED (status $rc; see $log)"
  fi
}

# One function, read whole before it starts: editing this file during a sweep changes nothing.
main() {
  echo "sweep: $nodes nodes$([ $loopback = 1 ] && echo ' on loopback'), models $models, links $links, contenders $contenders, $rounds round(s) of $iterations iterations ($warmup warm-up), BLAS $blas${coretype:+ (OPENBLAS_CORETYPE=$coretype)}, results in $out"
  record_machine
  record python="$python" torch="$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)" threads="$threads" rounds="$rounds" loopback="$loopback"
  for link in "${link_list[@]}"; do
    local bps=0
    if [ $loopback = 0 ]; then
      topo_shape all "$link"
      bps=$(topo_linkspeed 0 1 1)
    fi
    record link="$link" measured_bps="${bps:-0}"
    for model in "${model_list[@]}"; do
      for round in $(seq "$rounds"); do
        for contender in "${contender_list[@]}"; do
          # compute only next to each link's runs (the machine's load drifts: the bound is measured
          # beside what it bounds); the hooks, which need no network, once per model and round
          [ "$contender" = hooks ] && [ "$link" != "${link_list[0]}" ] && continue
          run "$model" "$link" "$contender" "$round"
        done
      done
    done
  done
  [ $loopback = 1 ] || topo_destroy
  /usr/bin/python3 "$HERE/report.py" "$out" || die "report.py failed on $out"
  [ $failed -eq 0 ] || die "$failed run(s) failed: their logs are in $out/raw"
}

main
exit
