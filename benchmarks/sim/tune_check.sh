#!/usr/bin/env bash
# The auto-tuner against the settings it chooses from, measured (the goal: --tune within 5%
# of the best fixed setting at every link speed). Per model: a profile run (no link emulation,
# --profile); then per link speed, in one pass, gradsync-train --tune --tune-profile on that
# profile and the same run at each fixed setting of FIXED (P3's default among them), all on 2
# in-process ranks with emulated per-pair links (--bandwidth). Writes results/tune_check.md.
#
#   benchmarks/sim/tune_check.sh                     # ~15 min on 2 cores
#   benchmarks/sim/tune_check.sh --models resnet20 --iterations 12 --out /tmp/tc
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
trainer=$root/build/dev/trainer/gradsync-train
out=$here/results
models=vgg11,resnet20 iterations=20 warmup=4 batch=32
declare -A MODEL_FLAGS=([vgg11]="--model vgg11 --width 0.25" [resnet20]="--model resnet20 --width 1")
declare -A MODEL_LINKS=([vgg11]="100mbit,300mbit,1gbit" [resnet20]="10mbit,30mbit,100mbit")
# The fixed settings the tuned run is measured against: slicing, units in flight, credit MiB
# (P3's default: fixed:40000 with the library's window, 2 units / 4 MiB).
FIXED=("whole 1 4" "fixed:640000 1 4" "fixed:160000 2 4" "fixed:40000 2 4" "fixed:10000 2 4" "fixed:10000 4 8")

die() { echo "tune_check.sh: error: $*" >&2; exit 1; }
while (($#)); do
  case $1 in
    --models | --iterations | --warmup | --batch | --trainer | --out)
      (($# >= 2)) || die "$1 needs a value"; v=${1#--}; printf -v "$v" %s "$2"; shift 2 ;;
    *) die "unknown argument '$1' (--models, --iterations, --warmup, --batch, --trainer, --out)" ;;
  esac
done
[[ -x $trainer ]] || die "no gradsync-train at $trainer (cmake --build build/dev --target gradsync-train; or --trainer)"
((warmup < iterations)) || die "--warmup must be below --iterations"
mkdir -p "$out/tune_check"
raw=$out/tune_check

# run NAME ARGS...: one run on 2 in-process ranks -> raw/NAME.json (--metrics) and raw/NAME.log
run() {
  local name=$1; shift
  "$trainer" ${MODEL_FLAGS[$model]} --dataset synthetic --batch "$batch" --ranks 2 --threads 2 \
    --iterations "$iterations" --no-eval -q --priority forward --codec fp32 \
    --metrics "$raw/$name.json" "$@" >"$raw/$name.log" 2>&1 || die "$name failed: $(tail -1 "$raw/$name.log")"
}

IFS=, read -ra model_list <<<"$models"
for model in "${model_list[@]}"; do
  [[ -n ${MODEL_FLAGS[$model]:-} ]] || die "unknown model '$model'"
  echo "tune_check: $model: profile run"
  run "$model.profile" --slicing fixed:40000 --profile "$raw/$model.layers.json"
  IFS=, read -ra links <<<"${MODEL_LINKS[$model]}"
  for link in "${links[@]}"; do
    echo "tune_check: $model at $link"
    run "$model.$link.tuned" --bandwidth "$link" --tune --tune-profile "$raw/$model.layers.json"
    for f in "${FIXED[@]}"; do
      read -r slicing inflight credit <<<"$f"
      run "$model.$link.${slicing/:/-}.i$inflight.c$credit" --bandwidth "$link" --slicing "$slicing" --collective ring \
        --inflight "$inflight" --credit "$credit"
    done
  done
done

python3 - "$raw" "$warmup" "$models" >"$out/tune_check.md" <<'PY'
import glob, json, os, statistics, sys
raw, warmup, models = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
def rate(path):  # a link's bits per second, from the run's name (NAME.LINK.tuned.json)
    link = os.path.basename(path).split(".")[1]
    return float(link.rstrip("gbitm")) * (1e9 if link.endswith("gbit") else 1e6)
def median(path):
    return statistics.median(json.load(open(path))["iteration_seconds"][warmup:])
print("# --tune against fixed settings, measured (benchmarks/sim/tune_check.sh)\n")
print("2 in-process ranks, emulated per-pair links (--bandwidth), fp32, --priority forward; median iteration after")
print(f"{warmup} warm-up iterations. tuned / best = the tuned run's median over the fastest fixed setting's.\n")
print("| model | link | --tune chose | tuned (s) | best fixed setting | best (s) | P3's default (s) | tuned / best | tuned / P3 default |")
print("|---|---|---|---|---|---|---|---|---|")
for model in models:
    for tuned_path in sorted(glob.glob(f"{raw}/{model}.*.tuned.json"), key=rate):
        link = os.path.basename(tuned_path).split(".")[1]
        t = json.load(open(tuned_path))["tune"]
        chosen = f'{t["slicing"]} i{t["inflight_units"]} c{t["credit_bytes"] >> 20}'
        tuned = median(tuned_path)
        fixed = {}
        for p in glob.glob(f"{raw}/{model}.{link}.*.json"):
            name = os.path.basename(p)[len(f"{model}.{link}."):-len(".json")]
            if name != "tuned":
                fixed[name.replace("-", ":").replace(".", " ")] = median(p)
        best = min(fixed, key=fixed.get)
        p3 = fixed["fixed:40000 i2 c4"]
        print(f"| {model} | {link} | {chosen} | {tuned:.3f} | {best} | {fixed[best]:.3f} | {p3:.3f} | "
              f"{tuned / fixed[best]:.3f} | {tuned / p3:.3f} |")
PY
cat "$out/tune_check.md"
