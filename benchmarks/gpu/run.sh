#!/usr/bin/env bash
# On a machine with a GPU: build with CUDA for the local GPU, run the CUDA tests (device results
# against host results on the same inputs, NCCL against the reference sum on every visible GPU),
# the device codec benchmark, the CUDA trainer against PyTorch (ResNet-20 and VGG-11, fp32 and
# mixed: four gradsync-train-cuda runs, one PyTorch process) and two ranks training on the one GPU
# (two_ranks.sh), and write benchmarks/gpu/results.md.
#
#   bash benchmarks/gpu/run.sh            # build dir: build/gpu (BUILD_DIR=... to change)
#   SKIP_BUILD=1 BUILD_DIR=dir bash benchmarks/gpu/run.sh
#                                         # run what was built elsewhere for this GPU's architecture
#                                         # (the same layout as a build dir; no toolchain needed;
#                                         # bundle.sh packs one with the libraries it needs)
#   LOGS=dir                              # every step's log and JSON, and a copy of results.md
#                                         # (default: BUILD_DIR/run-logs)
#
# GPU time is scarce, so one failing step does not stop the others: each runs under a time limit,
# its log is kept, the results say which failed, and the script exits 1 if any did.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build/gpu}
out=benchmarks/gpu/results.md
jobs=${JOBS:-$(nproc)}
logs=${LOGS:-$build/run-logs}
mkdir -p "$logs"

die() { echo "benchmarks/gpu/run.sh: $*" >&2; exit 1; }
failed=()
# step NAME SECONDS COMMAND...: runs COMMAND with its output in $logs/NAME.log (and on the
# terminal), killed after SECONDS; a failure is recorded, not fatal.
step() {
  local name=$1 limit=$2 rc
  shift 2
  echo "== $name"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] && return 0
  failed+=("$name (exit $rc$([ "$rc" = 124 ] && echo ", killed after $limit s"))")
  return 1
}

# ---- a GPU must be visible: fail loudly, never report host numbers as GPU ones ----
command -v nvidia-smi >/dev/null || die "no nvidia-smi: this machine has no NVIDIA driver; run this script on a GPU machine"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "$gpus" -gt 0 ] || die "nvidia-smi sees no GPU (check CUDA_VISIBLE_DEVICES and the driver); run this script on a GPU machine"

# ---- configure and build ----
tests=(tests/cuda/test_cuda_twins tests/cuda/test_device_codecs tests/trainer/test_trainer_gpu)
if [ -z "${SKIP_BUILD:-}" ]; then
  command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "no nvcc: install the CUDA toolkit (or add /usr/local/cuda/bin to PATH)"
  export PATH=$PATH:/usr/local/cuda/bin
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGRADSYNC_BUILD_TESTS=ON -DGRADSYNC_GPU_TESTS=ON \
    -DCMAKE_CUDA_ARCHITECTURES=native
  targets=(test_cuda_twins test_device_codecs bench_gpu_codec test_trainer_gpu gradsync-train-cuda gradsync-train)
  grep -q '^GRADSYNC_NCCL_LIBRARY:.*nccl' "$build/CMakeCache.txt" && targets+=(test_nccl test_nccl_usage)
  cmake --build "$build" -j"$jobs" --target "${targets[@]}" || die "the build failed"
fi
[ -x "$build/tests/cuda/test_nccl" ] && tests+=(tests/cuda/test_nccl tests/cuda/test_nccl_usage)

# ---- cuDNN at run time (the CUDA trainer links libcudnn.so.9): the machine's, else the copy that
# PyTorch's wheels carry (nvidia-cudnn) ----
if ldd "$build/trainer/gradsync-train-cuda" 2>/dev/null | grep -q 'libcudnn.* not found'; then
  cudnn_lib=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' \
    2>/dev/null || true)
  [ -n "$cudnn_lib" ] && [ -e "$cudnn_lib/libcudnn.so.9" ] ||
    die "libcudnn.so.9 not found: install cuDNN 9 (or PyTorch's nvidia-cudnn wheel), or add its directory to LD_LIBRARY_PATH"
  export LD_LIBRARY_PATH=$cudnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "== cuDNN from $cudnn_lib"
fi

# ---- tests: each Catch2 program directly (no ctest), so a build made elsewhere runs too ----
for t in "${tests[@]}"; do
  [ -x "$build/$t" ] || die "$build/$t is missing: build it (or drop SKIP_BUILD)"
done
for t in "${tests[@]}"; do step "$(basename "$t")" 180 "$build/$t"; done

# ---- device codec benchmark ----
json=$logs/bench_gpu_codec.json
rm -f "$json"
step bench_gpu_codec 300 "$build/benchmarks/gpu/bench_gpu_codec" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true --benchmark_out="$json" --benchmark_out_format=json

# ---- trainer throughput against PyTorch: ResNet-20 and VGG-11 (CIFAR shape), batch 128, 1 rank ----
# images/s = batch / the median iteration time of iterations 31..230 (the first ones time cuDNN's
# algorithms), from the metrics JSON's iteration_seconds; PyTorch's the same way (pytorch_resnet20.py).
train() {  # $1 executable, $2 model, $3 precision, $4 iterations: metrics in $logs/<exe>_<model>_<precision>.json
  local name
  name=$(basename "$1")_$2_$3
  rm -f "$logs/$name.json"
  step "$name" 240 "$1" --model "$2" --width 1 --dataset synthetic --input 3x32x32 --classes 10 --synthetic-size 8192 \
    --batch 128 --lr 0.001 --iterations "$4" --threads "$(nproc)" --ranks 1 --sync local --no-eval -q \
    --precision "$3" --metrics "$logs/$name.json" >/dev/null
}
rate() {  # $1 metrics JSON, $2 warm-up iterations -> images/s, or - where the run failed
  python3 -c 'import json, statistics, sys
s = json.load(open(sys.argv[1]))["iteration_seconds"][int(sys.argv[2]):]
print(round(128 / statistics.median(s)))' "$1" "$2" 2>/dev/null || echo -
}
rates=""  # "model gradsync_fp32 gradsync_mixed" lines
for model in resnet20 vgg11; do
  for precision in fp32 mixed; do train "$build/trainer/gradsync-train-cuda" "$model" "$precision" 230; done
  rates+="$model $(rate "$logs/gradsync-train-cuda_${model}_fp32.json" 30) \
$(rate "$logs/gradsync-train-cuda_${model}_mixed.json" 30)"$'\n'
done
host_rate=-  # the host build, where it was carried along (it needs the Debian libraries it links)
if [ -x "$build/trainer/gradsync-train" ]; then
  train "$build/trainer/gradsync-train" resnet20 fp32 12
  host_rate=$(rate "$logs/gradsync-train_resnet20_fp32.json" 2)
fi
torch_rates="" torch_version=""
# PyTorch with the libraries its wheels carry: a bundle's LD_LIBRARY_PATH (bundle.sh's env.sh) may
# name another cuDNN, which PyTorch would load in place of its own.
torch_python=(env -u LD_LIBRARY_PATH python3)
if "${torch_python[@]}" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
  step pytorch 300 "${torch_python[@]}" benchmarks/gpu/pytorch_resnet20.py --models resnet20,vgg11
  torch_rates=$(grep -E '^(resnet20|vgg11) ' "$logs/pytorch.log")  # "model fp32 tf32 amp" lines
  torch_version=$("${torch_python[@]}" -c 'import torch; v = torch.backends.cudnn.version(); print(f"{torch.__version__} (cuDNN {v // 10000}.{v // 100 % 100}.{v % 100})")')
fi

# ---- two ranks on the one GPU (MPI, device codecs), where mpirun and the script exist ----
two_ranks=""
if [ -f benchmarks/gpu/two_ranks.sh ] && command -v mpirun >/dev/null; then
  step two_ranks 360 env BUILD_DIR="$build" OUT="$logs/two_ranks.md" bash benchmarks/gpu/two_ranks.sh
  [ -f "$logs/two_ranks.md" ] && two_ranks=$(sed 's/^#/##/' "$logs/two_ranks.md")
fi
trainer_table=$(python3 - "$rates" "$torch_rates" "$torch_version" "$host_rate" "$(nproc)" <<'PY'
import sys
ours, torch, version, host, cores = sys.argv[1:]
ours = {l.split()[0]: l.split()[1:] for l in ours.splitlines() if l.strip()}
torch = {l.split()[0]: l.split()[1:] for l in torch.splitlines() if l.strip()}
names = {"resnet20": "ResNet-20", "vgg11": "VGG-11"}
def ratio(a, b):
    return f"{int(a) / int(b):.2f}x" if a.isdigit() and b.isdigit() else "-"
rows = ["| model | gradsync fp32 | PyTorch fp32 | ratio | PyTorch TF32 (default) | gradsync mixed | PyTorch AMP | ratio |",
        "|---|---|---|---|---|---|---|---|"]
for m, (f32, mixed) in ours.items():
    t32, ttf, tamp = torch.get(m, ["", "", ""])
    rows.append(f"| {names[m]} | {f32} | {t32 or '-'} | {ratio(f32, t32)} | {ttf or '-'} | {mixed} | {tamp or '-'} "
                f"| {ratio(mixed, tamp)} |")
print(f"""Images/s, 3x32x32, batch 128, 1 rank: batch / the median iteration time of 200 iterations after
30 warm-up ones. gradsync-train-cuda: cuDNN convolutions and batch norm, fp32 without TF32
(mixed: fp16 tensor cores, fp32 accumulation). PyTorch {version or '(not installed)'} on the same GPU with
cudnn.benchmark, the batch resident on the GPU, iterations timed by CUDA events; its fp32 has
cudnn.allow_tf32 off (gradsync's arithmetic), TF32 is its default.

""" + "\n".join(rows) + ("" if host == "-" else f"""

Host build, ResNet-20 fp32 on {cores} cores: {host} images/s (10 iterations after 2)."""))
PY
)
# ---- results table ----
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
tested="every GPU test program passed: ${tests[*]##*/} (device against host on the same inputs, NCCL
against the reference sum)"
[ ${#failed[@]} -eq 0 ] || tested="FAILED: ${failed[*]}; the logs are in $logs"
python3 - "$json" "$out" "$device" "$gpus" "$trainer_table" "$tested" "$two_ranks" <<'PY'
import json, os, sys
path, out, device, gpus, trainer, tested, two_ranks = sys.argv[1:]
try:
    runs = json.load(open(path))["benchmarks"]
except (OSError, ValueError, KeyError):  # the benchmark failed: its log says why
    runs = []
med = {r["run_name"].split("/min_time")[0].removesuffix("/manual_time"): r["bytes_per_second"] / 1e9
       for r in runs if r.get("aggregate_name") == "median"}
base = med.get("memcpy", float("nan"))
steps = ["encode", "decode_add", "decode_add_encode"]
rows = ["| codec | " + " | ".join(f"{s} GB/s | {s} / memcpy" for s in steps) + " |", "|---" * (1 + 2 * len(steps)) + "|"]
for name in [k.split("/", 1)[1] for k in med if k.startswith("encode/")]:
    cells = [med.get(f"{s}/{name}", float("nan")) for s in steps]
    rows.append(f"| {name} | " + " | ".join(f"{v:.1f} | {v / base:.2f}x" for v in cells) + " |")
codecs = "\n".join(rows) if med else "(the codec benchmark did not finish: see its log)"
open(out, "w").write(f"""# GPU results

Written by `bash benchmarks/gpu/run.sh` on {device} ({gpus} GPU(s) visible). Tests: {tested}.

## Device codecs (64 MiB fp32 unit, 4 buffer sets in turn so none is in L2, medians of 3, GB/s of fp32 input; cudaMemcpy D2D {base:.1f} GB/s)

Residual on for onebit, topk and ef+ (as in training); decode_add is the asynchronous one (a
WireStatus checked after the run); decode_add_encode is the collectives' owner step (one kernel;
top-k: its decode, then its encode). Goals: fp16, bf16, qsgd4, qsgd8 encode and
decode_add >= 0.7x; onebit encode >= 0.5x; topk:0.01 encode >= 0.15x.

{codecs}

## Trainer

{trainer}
""" + (f"\n{two_ranks}\n" if two_ranks else ""))
PY
echo "wrote $out"
cp "$out" "$logs"/
[ ${#failed[@]} -eq 0 ] || die "failed: ${failed[*]}"
