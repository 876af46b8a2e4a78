#!/usr/bin/env bash
# Two ranks training on one GPU: `mpirun -np 2 gradsync-train-cuda`, both ranks
# on GPU 0, gradients kept on the device (cuda::OnDevice: the device codecs encode them, Open MPI
# carries the encoded bytes through host memory). Self-checking; writes a markdown report.
#   1. test_on_device_gpu: the device synchronizer against the host one (bit for bit) on this GPU;
#   2. ResNet-20 (3x32x32, batch 128 per rank, synthetic): 1 rank alone, then 2 ranks with WFBP
#      (whole layers, fifo), P3 fp32, P3 fp16, P3 qsgd8 (40k-element slices, forward order), all
#      on the ring; median iteration time, the share of it blocked in wait_for, and every rank's
#      weights digest, which must agree;
#   3. convergence: Fashion-MNIST (synthetic 1x28x28 images when DATA_DIR has none), 2 ranks x
#      batch B (fp32 and qsgd8) against 1 rank x batch 2B, test accuracy within TOLERANCE;
#   4. one attempt with --collective nccl (NCCL refuses two ranks on one GPU, we expect): its answer.
# Exits non-zero when a check fails (NCCL's refusal is reported, not a failure).
#
#   BUILD_DIR=build/gpu bash benchmarks/gpu/two_ranks.sh     # binaries built elsewhere; mpirun from PATH
#   HOST=1 BUILD_DIR=build/default bash benchmarks/gpu/two_ranks.sh
#       # dry run on a machine without a GPU: host gradsync-train, tiny sizes, same flags and parsing
# Knobs (environment): ITERATIONS (100), CONV_ITERATIONS (300), BATCH (128), CONV_BATCH (64),
# DATA_DIR (/usr/share/datasets/fashion-mnist), TOLERANCE (0.03), OUT (report; default
# $BUILD_DIR/two_ranks.md), RUN_TIMEOUT (seconds per run, 60; a run that times out ends the script).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${BUILD_DIR:-$here/../../build/gpu}" && pwd)
host=${HOST:-}
out=${OUT:-$build/two_ranks.md}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

die() { echo "two_ranks.sh: $*" >&2; exit 1; }
command -v mpirun >/dev/null || die "no mpirun on PATH: install openmpi-bin (or put the one the binaries were built with on PATH)"
if [ -n "$host" ]; then
  train=$build/trainer/gradsync-train
  iterations=${ITERATIONS:-6} conv_iterations=${CONV_ITERATIONS:-20} batch=${BATCH:-4} conv_batch=${CONV_BATCH:-8}
  width=0.25 threads=1 device="host CPU (HOST=1 dry run: flags and parsing only, no GPU figures)"
else
  train=$build/trainer/gradsync-train-cuda
  iterations=${ITERATIONS:-100} conv_iterations=${CONV_ITERATIONS:-300} batch=${BATCH:-128} conv_batch=${CONV_BATCH:-64}
  width=1 threads=4
  command -v nvidia-smi >/dev/null || die "no nvidia-smi: run this on the GPU machine (or HOST=1 for a dry run)"
  device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
  [ -n "$device" ] || die "nvidia-smi sees no GPU"
fi
[ -x "$train" ] || die "$train is missing: build it (cmake --build $build --target $(basename "$train"))"
run_timeout=${RUN_TIMEOUT:-60}
tolerance=${TOLERANCE:-$([ -n "$host" ] && echo 1 || echo 0.03)}  # a dry run's few iterations prove nothing
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
warmup=$(( iterations / 10 ))
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2)  # unbound: each rank's threads spread out
failed=0
report=()
fail() { echo "FAILED: $*" >&2; report+=("**FAILED**: $*"); failed=1; }
write_report() {
  {
    echo "# Two ranks on one GPU"
    echo
    echo "Written by \`benchmarks/gpu/two_ranks.sh\` on $device, $(date -u +%Y-%m-%d), binaries in $build."
    echo "Both ranks on GPU 0 under \`${mpi[*]}\`; gradients stay on the device (cuda::OnDevice)."
    printf '%s\n' "${report[@]}"
  } >"$out"
  cat "$out"
}
# attempt LOG COMMAND...: runs it within RUN_TIMEOUT, output to LOG; its exit status. A run that
# times out ends the script (the next would likely hang alike and spend the GPU's time).
attempt() {
  local log=$1 rc=0
  shift
  timeout "$run_timeout" "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 124 ]; then
    tail -20 "$log" >&2
    fail "timed out after ${run_timeout} s: $*"
    write_report
    die "stopped after a timeout"
  fi
  [ "$rc" -eq 0 ] || tail -20 "$log" >&2
  return "$rc"
}

# ---- 1. the device synchronizer against the host one on this GPU ----
if [ -z "$host" ]; then
  gpu_test=$build/tests/cuda/test_on_device_gpu
  if [ -x "$gpu_test" ]; then
    if attempt "$work/gpu_test.log" "$gpu_test"; then
      report+=("test_on_device_gpu: passed ($(tail -1 "$work/gpu_test.log" | tr -d '\033' | sed 's/\[[0-9;]*m//g'))")
    else
      fail "test_on_device_gpu (device synchronizer against the host one)"
    fi
  else
    fail "$gpu_test is missing (build target test_on_device_gpu)"
  fi
fi

# Median iteration seconds after warm-up, share of them blocked in wait_for, images/s (all ranks).
summarize() {  # $1 metrics json, $2 ranks
  python3 - "$1" "$warmup" "$2" <<'PY'
import json, statistics, sys
m = json.load(open(sys.argv[1])); skip = int(sys.argv[2]); ranks = int(sys.argv[3])
it, wait = m["iteration_seconds"][skip:], m["iteration_wait_seconds"][skip:]
med = statistics.median(it)
print(f"{med * 1e3:.1f} {100 * sum(wait) / sum(it):.1f} {ranks * m['config']['batch_per_rank'] / med:.0f} "
      f"{m['sync']['rank0_exposed_wait_seconds']:.2f}")
PY
}
# The digests every rank printed, and whether they agree.
digests_agree() {  # $1 log
  local n
  n=$(grep -o 'weights digest [0-9a-f]*' "$1" | sort -u | wc -l)
  [ "$(grep -c 'weights digest' "$1")" -eq 2 ] && [ "$n" -eq 1 ]
}

# ---- 2. iteration time: 1 rank alone, then 2 ranks on the one GPU ----
common=(--model resnet20 --width "$width" --dataset synthetic --input 3x32x32 --classes 10 --synthetic-size 4096
        --batch "$batch" --iterations "$iterations" --threads "$threads" --no-eval -q --timeout 30)
report+=("" "## ResNet-20 x$width, 3x32x32, batch $batch per rank, $iterations iterations (median after $warmup)" ""
         "| run | ms / iteration | blocked in wait_for | images/s | rank 0 wait_for s | replicas |"
         "|---|---|---|---|---|---|")
if attempt "$work/one.log" "$train" "${common[@]}" --ranks 1 --sync local --metrics "$work/one.json"; then
  read -r ms share rate waited < <(summarize "$work/one.json" 1) || fail "1-rank baseline: no metrics"
  report+=("| 1 rank alone (compute only) | $ms | - | $rate | - | - |")
else
  fail "1-rank baseline"
fi
for setting in "WFBP fp32|whole|fifo|fp32" "P3 fp32|fixed:40000|forward|fp32" "P3 fp16|fixed:40000|forward|fp16" \
               "P3 qsgd8|fixed:40000|forward|qsgd8"; do
  IFS='|' read -r label slicing priority codec <<<"$setting"
  log=$work/${label// /_}.log json=$work/${label// /_}.json
  echo "== 2 ranks, $label" >&2
  if attempt "$log" "${mpi[@]}" "$train" "${common[@]}" --slicing "$slicing" --priority "$priority" --codec "$codec" \
      --collective ring --print-digest --metrics "$json"; then
    read -r ms share rate waited < <(summarize "$json" 2) || fail "$label: no metrics"
    if digests_agree "$log"; then same="identical"; else same="**differ**"; fail "$label: replicas differ"; fi
    report+=("| 2 ranks, $label ($slicing, $priority, $codec, ring) | $ms | $share % | $rate | $waited | $same |")
  else
    fail "$label run (log above)"
  fi
done

# ---- 3. convergence: 2 ranks x B against 1 rank x 2B (same global batch, learning rate, data) ----
if [ -f "$data_dir/train-images-idx3-ubyte.gz" ]; then
  data=(--dataset fashion-mnist --data-dir "$data_dir") data_name="Fashion-MNIST"
else
  data=(--dataset synthetic --input 1x28x28 --classes 10 --synthetic-size 16384) data_name="synthetic 1x28x28 (no Fashion-MNIST in $data_dir)"
fi
conv=(--model resnet20 --width "$width" "${data[@]}" --iterations "$conv_iterations" --lr 0.05 --threads "$threads"
      -q --timeout 30)
accuracy() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$1"; }
report+=("" "## Convergence: ResNet-20 x$width on $data_name, $conv_iterations iterations, global batch $(( 2 * conv_batch ))" ""
         "| run | test accuracy | replicas |" "|---|---|---|")
one_acc=
if attempt "$work/conv1.log" "$train" "${conv[@]}" --ranks 1 --sync local --batch $(( 2 * conv_batch )) \
    --metrics "$work/conv1.json"; then
  one_acc=$(accuracy "$work/conv1.json") || fail "convergence: 1-rank run wrote no accuracy"
  report+=("| 1 rank x $(( 2 * conv_batch )) | $one_acc | - |")
else
  fail "convergence: 1-rank run"
fi
for codec in fp32 qsgd8; do
  log=$work/conv2_$codec.log
  if attempt "$log" "${mpi[@]}" "$train" "${conv[@]}" --batch "$conv_batch" --codec "$codec" --print-digest \
      --metrics "$work/conv2_$codec.json"; then
    acc=$(accuracy "$work/conv2_$codec.json") || fail "convergence $codec: no accuracy"
    if digests_agree "$log"; then same="identical"; else same="**differ**"; fail "convergence $codec: replicas differ"; fi
    report+=("| 2 ranks x $conv_batch, P3 $codec | $acc | $same |")
    if [ -n "$one_acc" ] && ! python3 -c 'import sys; a, b, t = map(float, sys.argv[1:]); sys.exit(abs(a - b) > t)' \
        "$acc" "$one_acc" "$tolerance"; then
      fail "convergence $codec: 2 ranks reach $acc, 1 rank $one_acc (tolerance $tolerance)"
    fi
  else
    fail "convergence: 2-rank $codec run"
  fi
done

# ---- 4. NCCL with two ranks on one GPU ----
if [ -z "$host" ]; then
  log=$work/nccl.log
  set +e
  nccl_args=("${common[@]}")  # 5 iterations: the answer is whether NCCL starts at all
  for i in "${!nccl_args[@]}"; do [ "${nccl_args[$i]}" = --iterations ] && nccl_args[i + 1]=5; done
  NCCL_DEBUG=WARN timeout 40 "${mpi[@]}" -x NCCL_DEBUG "$train" "${nccl_args[@]}" --collective nccl \
    --print-digest >"$log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ] && digests_agree "$log"; then
    answer="NCCL accepted two ranks on one GPU; 5 iterations ran and the replicas agree"
  elif [ "$rc" -eq 124 ]; then
    answer="no answer within 40 s (killed); last lines: $(tail -3 "$log" | tr '\n' ' ' | cut -c1-300)"
  else
    # gradsync-train's own words: its first error, else its command line's complaint (never
    # Open MPI's or PMIx's chatter about their plugins)
    said=$(grep -v -i -E 'pmix|dlopen' "$log" | grep -m1 'error:' | cut -c1-300)
    [ -n "$said" ] || said=$(grep -v -i -E 'pmix|dlopen' "$log" | grep -m1 -E 'required|invalid|unknown' | cut -c1-300)
    answer="exit $rc. NCCL: \`$(grep -m1 'NCCL WARN' "$log" | cut -c1-200)\`; gradsync-train: \`$said\`"
  fi
  set -e
  cp "$log" "$(dirname "$out")/two_ranks_nccl.log"  # NCCL's own words, whatever they were
  report+=("" "## --collective nccl, 2 ranks on GPU 0" "" "$answer")
fi

write_report
[ "$failed" -eq 0 ] || die "some checks failed (above)"
echo "two_ranks.sh: all checks passed; report in $out" >&2
