#!/usr/bin/env bash
# The low-precision study's accuracy claims on gradsync-train: the same model, data, seeds and
# schedule trained with each codec on 4 ranks (Fashion-MNIST); writes per codec the --metrics
# JSON, then accuracy.md (final test accuracy, its distance to fp32, bytes sent) and accuracy.png
# (test accuracy per epoch per codec).
#   benchmarks/codec/accuracy.sh [--train PATH] [--out DIR] [--epochs N] [codec ...]
# Defaults: build/default/trainer/gradsync-train, benchmarks/codec/accuracy, 4 epochs, and
# fp32 qsgd8 qsgd4 qsgd2 onebit topk ef+qsgd4. Extra trainer flags: GRADSYNC_TRAIN_FLAGS.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
train=$root/build/default/trainer/gradsync-train
out=$here/accuracy
epochs=4
codecs=()
while [ $# -gt 0 ]; do
  case $1 in
    --train) train=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
    -*) echo "accuracy.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) codecs+=("$1"); shift ;;
  esac
done
[ ${#codecs[@]} -gt 0 ] || codecs=(fp32 qsgd8 qsgd4 qsgd2 onebit topk ef+qsgd4)
[ -x "$train" ] || { echo "accuracy.sh: no gradsync-train at $train: build it (make build) or pass --train PATH" >&2; exit 2; }
command -v gnuplot >/dev/null || { echo "accuracy.sh: gnuplot is missing: apt-get install gnuplot-nox" >&2; exit 2; }
mkdir -p "$out"

# The make-run model (AlexNet-BN at 1/8 width, batch 16 per rank, cosine decay), 4 ranks, P3 slicing.
model=(--model alexnet-bn --width 0.125 --batch 16 --lr 0.05 --lr-schedule cosine --warmup 0.2 --ranks 4 --seed 1
       --slicing fixed:40000 --priority forward --collective ring -q)
for codec in "${codecs[@]}"; do
  echo "== $codec ($epochs epochs)"
  # shellcheck disable=SC2086
  "$train" "${model[@]}" --epochs "$epochs" --codec "$codec" --metrics "$out/$codec.json" ${GRADSYNC_TRAIN_FLAGS:-} |
    tee "$out/$codec.log"
done

python3 - "$out" "${codecs[@]}" <<'PY'
import json, sys
out, codecs = sys.argv[1], sys.argv[2:]
runs = {c: json.load(open(f"{out}/{c}.json")) for c in codecs}
base = runs.get("fp32")
with open(f"{out}/accuracy.md", "w") as md:
    md.write("| codec | test accuracy | vs fp32 (points) | best epoch | bytes sent (rank 0) | vs fp32 | compressed params | train time |\n")
    md.write("|---|---|---|---|---|---|---|---|\n")
    for c, r in runs.items():
        acc = r["test_accuracy"]
        best = max(e["test_accuracy"] for e in r["epochs"])
        sent = r["sync"]["rank0_bytes_sent"]
        d = f"{100 * (acc - base['test_accuracy']):+.2f}" if base else "-"
        ratio = f"{sent / base['sync']['rank0_bytes_sent']:.3f}x" if base else "-"
        md.write(f"| {c} | {100 * acc:.2f}% | {d} | {100 * best:.2f}% | {sent / 1e6:.1f} MB | {ratio} | "
                 f"{100 * r['sync']['compressed_parameter_share']:.1f}% | {r['seconds']:.0f} s |\n")
with open(f"{out}/accuracy.dat", "w") as dat:
    for c, r in runs.items():
        dat.write(f'"{c}"\n')
        for e in r["epochs"]:
            dat.write(f"{e['epoch']} {100 * e['test_accuracy']:.3f}\n")
        dat.write("\n\n")
PY
n=${#codecs[@]}
gnuplot <<GP
set terminal pngcairo size 900,560
set output "$out/accuracy.png"
set title "Fashion-MNIST, AlexNet-BN x1/8, 4 ranks, ring, same seeds: test accuracy per epoch"
set xlabel "epoch"; set ylabel "test accuracy (%)"; set key bottom right; set grid
plot for [i=0:$((n - 1))] "$out/accuracy.dat" index i using 1:2 with linespoints title columnheader(1)
GP
cat "$out/accuracy.md"
