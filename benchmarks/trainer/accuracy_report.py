"""The table of a `trainer_vs_pytorch --accuracy` results folder: reads DIR/results.jsonl (every run
of every invocation into DIR) and writes DIR/table.md - per model and seed each side's test accuracy
and training seconds, then per model each side's mean and sample standard deviation over seeds and
the difference of the means with its standard error. Standard library only.

  accuracy_report.py DIR
"""
import json
import math
import os
import sys


def mean_sd(values):
    m = sum(values) / len(values)
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else float("nan")
    return m, sd


def main():
    folder = sys.argv[1]
    runs = [json.loads(l) for l in open(os.path.join(folder, "results.jsonl")) if l.strip()]
    # the last run of each (model, seed, side, same_start) counts: a rerun replaces the earlier one
    last = {}
    for r in runs:
        last[(r["model"], r["seed"], r["side"], r.get("same_start", False), r["iterations"])] = r
    models = list(dict.fromkeys(k[0] for k in last))
    out = ["# trainer_vs_pytorch --accuracy", ""]
    first = runs[0]
    sides = {r["side"]: r for r in runs}
    out.append(f"Machine: {first.get('cpu', '?')}, {first.get('cores', '?')} cores; commit "
               f"{first.get('commit', '?')[:12]}{' (with changes)' if first.get('tree_changed') else ''}; "
               f"trainer built by {sides.get('trainer', {}).get('compiler', '?')}; PyTorch "
               f"{sides.get('pytorch', {}).get('torch', '?')}; {first.get('threads', '?')} threads each.")
    out.append("")
    out.append("| model | iterations | seed | trainer accuracy | PyTorch accuracy | trainer - PyTorch | trainer s | PyTorch s |")
    out.append("|---|---|---|---|---|---|---|---|")
    summary = []
    for m in models:
        keys = sorted({(k[1], k[3], k[4]) for k in last if k[0] == m})
        acc = {"trainer": [], "pytorch": []}
        diffs = []
        for seed, paired, iters in keys:
            t = last.get((m, seed, "trainer", False, iters))
            p = last.get((m, seed, "pytorch", paired, iters))
            if paired is False and t is None and p is None:
                continue
            cell = lambda r, k, f: f.format(r[k]) if r else "-"
            d = f"{(t['test_accuracy'] - p['test_accuracy']) * 100:+.2f} points" if t and p else "-"
            label = f"{seed}{' (same start)' if paired else ''}"
            out.append(f"| {m} | {iters} | {label} | {cell(t, 'test_accuracy', '{:.4f}')} | "
                       f"{cell(p, 'test_accuracy', '{:.4f}')} | {d} | {cell(t, 'train_seconds', '{:.0f}')} | "
                       f"{cell(p, 'train_seconds', '{:.0f}')} |")
            if not paired:
                if t:
                    acc["trainer"].append(t["test_accuracy"])
                if p:
                    acc["pytorch"].append(p["test_accuracy"])
        if acc["trainer"] and acc["pytorch"]:
            (mt, st), (mp, sp) = mean_sd(acc["trainer"]), mean_sd(acc["pytorch"])
            se = math.sqrt(st ** 2 / len(acc["trainer"]) + sp ** 2 / len(acc["pytorch"]))
            summary.append(f"| {m} | {len(acc['trainer'])} / {len(acc['pytorch'])} | {mt:.4f} +- {st:.4f} | "
                           f"{mp:.4f} +- {sp:.4f} | {(mt - mp) * 100:+.2f} +- {se * 100:.2f} points |")
    if summary:
        out += ["", "Per model, over seeds (independent starts): mean +- sample standard deviation; the difference "
                "of the means +- its standard error.", "",
                "| model | seeds (trainer / PyTorch) | trainer | PyTorch | trainer - PyTorch |", "|---|---|---|---|---|"]
        out += summary
    with open(os.path.join(folder, "table.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
