#!/usr/bin/env python3
"""table1.sh's report: OUT/raw/<model>.<baseline|dgt>.s<seed>.json (gradsync-train --metrics) ->
OUT/results.json, OUT/table.md and OUT/accuracy.png (gnuplot: test accuracy against training time).

Per run: batch completion time (BCT) = median of rank 0's iteration times after 2 warm-up ones;
time to the target = rank 0's summed iteration times (evaluations excluded) at the first
evaluation reaching it; final = the last evaluation; training time = rank 0's summed iteration
times, the whole budget; blocks from rank 0's synchronizer (DGT)."""
import argparse, glob, json, os, statistics, subprocess, sys

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--target", type=float, default=0.8)
args = ap.parse_args()

runs = {}
for path in sorted(glob.glob(os.path.join(args.out, "raw", "*.json"))):
    model, proto, seed = os.path.basename(path)[:-5].rsplit(".", 2)
    m = json.load(open(path))
    evals = m["evaluations"]
    if not evals:
        sys.exit(f"report: {path} has no evaluations (run without --no-eval)")
    reached = next((e for e in evals if e["test_accuracy"] >= args.target), None)
    blocks = [sum(b[i] for b in m["iteration_blocks"]) for i in range(3)]
    runs.setdefault(model, {}).setdefault(proto, []).append({
        "seed": seed, "width": m["config"]["width"], "parameters": m["parameters"], "iterations": m["iterations"],
        "bct": statistics.median(m["iteration_seconds"][2:] or m["iteration_seconds"]),
        "train_seconds": sum(m["iteration_seconds"]),
        "time_to_target": reached and reached["train_seconds"], "iterations_to_target": reached and reached["iteration"],
        "final_accuracy": evals[-1]["test_accuracy"], "blocks": blocks,
        "bytes_sent": m["sync"]["rank0_bytes_sent"], "evaluations": evals})
if not runs:
    sys.exit(f"report: no runs in {args.out}/raw")
json.dump(runs, open(os.path.join(args.out, "results.json"), "w"), indent=1)

def mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.mean(xs) if xs else None

def fmt(x, f="{:.1f}"):
    return "not reached" if x is None else f.format(x)

def change(d, b):
    return "-" if d is None or b is None else f"{100 * (d / b - 1):+.1f}%"

t = f"{args.target:g}"
lines = [f"| model | protocol | runs | iterations | iterations to {t} | BCT (s) | time to {t} (s) | training time (s) | "
         "final accuracy | blocks important / best-effort / dropped (rank 0) | MB sent (rank 0) |", "|---|" * 1 + "---|" * 10]
summary = {}
for model, protos in runs.items():
    for proto in ("baseline", "dgt"):
        rs = protos.get(proto, [])
        if not rs:
            continue
        s = {k: mean([r[k] for r in rs])
             for k in ("iterations", "iterations_to_target", "bct", "time_to_target", "train_seconds", "final_accuracy", "bytes_sent")}
        s["blocks"] = [sum(r["blocks"][i] for r in rs) for i in range(3)]
        s["reached"] = sum(r["time_to_target"] is not None for r in rs)
        summary.setdefault(model, {})[proto] = s
        b = s["blocks"]
        drop = f" ({100 * b[2] / (b[0] + b[1]):.1f}% of blocks)" if b[0] + b[1] else ""
        lines.append(f"| {model} x{rs[0]['width']:g} ({rs[0]['parameters'] / 1e6:.2f} M) | {proto} | {len(rs)} "
                     f"({s['reached']} reached {t}) | {s['iterations']:.0f} | {fmt(s['iterations_to_target'], '{:.0f}')} | "
                     f"{s['bct']:.3f} | {fmt(s['time_to_target'])} | {s['train_seconds']:.1f} | {100 * s['final_accuracy']:.2f}% | "
                     f"{b[0]} / {b[1]} / {b[2]}{drop} | "
                     f"{s['bytes_sent'] / 1e6:.0f} |")
lines += ["", f"| model | BCT | time to {t} | final accuracy (points) |", "|---|---|---|---|"]
for model, s in summary.items():
    if "baseline" in s and "dgt" in s:
        b, d = s["baseline"], s["dgt"]
        lines.append(f"| {model} | {change(d['bct'], b['bct'])} | {change(d['time_to_target'], b['time_to_target'])} | "
                     f"{100 * (d['final_accuracy'] - b['final_accuracy']):+.2f} |")
open(os.path.join(args.out, "table.md"), "w").write("\n".join(lines) + "\n")

# accuracy.png: one panel per model, every run's evaluations (training seconds, accuracy)
dat = os.path.join(args.out, "accuracy.dat")
plots = []
with open(dat, "w") as f:
    index = 0
    for model, protos in runs.items():
        for proto, rs in sorted(protos.items()):
            for r in rs:
                f.write(f'"{model} {proto} {r["seed"]}"\n')
                for e in r["evaluations"]:
                    f.write(f'{e["train_seconds"]:.3f} {e["test_accuracy"]:.5f}\n')
                f.write("\n\n")
                plots.append((model, index, "dgt" in proto))
                index += 1
models = list(runs)
gp = [f'set terminal pngcairo size {560 * len(models)},420', f'set output "{os.path.join(args.out, "accuracy.png")}"',
      f"set multiplot layout 1,{len(models)}", 'set xlabel "training time (s)"', 'set ylabel "test accuracy"',
      "set key bottom right", "set grid"]
for model in models:
    series = [f'"{dat}" index {i} with linespoints lw 2 lc {2 if dgt else 1} title columnheader(1)'
              for m, i, dgt in plots if m == model]
    gp += [f'set title "{model}"', f"set arrow from graph 0, first {args.target} to graph 1, first {args.target} nohead dt 2",
           "plot " + ", ".join(series), "unset arrow"]
gp.append("unset multiplot")
try:
    subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True)
except (OSError, subprocess.CalledProcessError) as e:
    print(f"report: no plot ({e}); install gnuplot-nox", file=sys.stderr)
