"""The tables of a `trainer_vs_pytorch --accuracy` results folder: reads DIR/results.jsonl (every run
of every invocation into DIR; a rerun of the same model, seed, side, threads and start replaces the
earlier line) and writes DIR/table.md: per model, seed and thread count the trainer's test accuracy,
the PyTorch replica's from its own initialization and order and from the trainer's (--same-start),
and training seconds; then per model and thread count each side's mean and sample standard
deviation over seeds (own starts) and the difference of the means with its standard error; then,
when DIR/paired_step.jsonl exists (--paired-step), the paired steps. Standard library only.

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


def fmt(run, key, pattern):
    return pattern.format(run[key]) if run else "-"


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def latest(runs):
    """The last line of each (model, iterations, seed, threads, kind): reruns replace earlier runs."""
    last = {}
    for r in runs:
        kind = "trainer" if r["side"] == "trainer" else ("same" if r.get("same_start") else "pytorch")
        last[(r["model"], r["iterations"], r["seed"], r.get("threads", 2), kind)] = r
    return last


def header(runs, counted):
    trainer = next((r for r in counted if r["side"] == "trainer"), {})
    torch = next((r for r in counted if r["side"] == "pytorch"), {})
    commits = sorted({r.get("commit", "?")[:12] + (" (with changes)" if r.get("tree_changed") else "") for r in counted})
    return ["# trainer_vs_pytorch --accuracy", "",
            f"Machine: {counted[0].get('cpu', '?')}, {counted[0].get('cores', '?')} cores. Trainer built by GCC "
            f"{trainer.get('compiler', '?')}; PyTorch {torch.get('torch', '?')} (Python {torch.get('python', '?')}). "
            f"Commits of the runs counted: {', '.join(commits)}; {len(runs) - len(counted)} earlier lines of "
            "results.jsonl replaced by reruns.", "",
            "Test accuracy on the whole test set after the run. PyTorch: the replica from its own initialization and data "
            "order; same start: from the trainer's initial weights and order (fp32 rounding alone moves two runs from "
            "one start apart within a few iterations, so it is one more sample, not a twin).", ""]


def accuracy_tables(last):
    out = ["| model | iterations | threads | seed | trainer | PyTorch | PyTorch, same start | trainer - PyTorch | "
           "trainer s | PyTorch s |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    groups = {}
    for model, iters, seed, threads in sorted({k[:4] for k in last}, key=lambda k: (k[0], k[1], k[3], k[2])):
        t, p, s = (last.get((model, iters, seed, threads, kind)) for kind in ("trainer", "pytorch", "same"))
        diff = f"{(t['test_accuracy'] - p['test_accuracy']) * 100:+.2f} points" if t and p else "-"
        out.append(f"| {model} | {iters} | {threads} | {seed} | {fmt(t, 'test_accuracy', '{:.4f}')} | "
                   f"{fmt(p, 'test_accuracy', '{:.4f}')} | {fmt(s, 'test_accuracy', '{:.4f}')} | {diff} | "
                   f"{fmt(t, 'train_seconds', '{:.0f}')} | {fmt(p, 'train_seconds', '{:.0f}')} |")
        g = groups.setdefault((model, iters, threads), {"trainer": [], "pytorch": []})
        g["trainer"] += [t["test_accuracy"]] if t else []
        g["pytorch"] += [p["test_accuracy"]] if p else []
    summary = []
    for (model, iters, threads), g in groups.items():
        if len(g["trainer"]) < 2 or len(g["pytorch"]) < 2:
            continue
        (mt, st), (mp, sp) = mean_sd(g["trainer"]), mean_sd(g["pytorch"])
        se = math.sqrt(st ** 2 / len(g["trainer"]) + sp ** 2 / len(g["pytorch"]))
        summary.append(f"| {model} | {iters} | {threads} | {len(g['trainer'])} / {len(g['pytorch'])} | "
                       f"{mt:.4f} +- {st:.4f} | {mp:.4f} +- {sp:.4f} | {(mt - mp) * 100:+.2f} +- {se * 100:.2f} points |")
    if summary:
        out += ["", "Over seeds (own starts): mean +- sample standard deviation; the difference of the means +- its "
                "standard error.", "",
                "| model | iterations | threads | seeds (trainer / PyTorch) | trainer | PyTorch | trainer - PyTorch |",
                "|---|---|---|---|---|---|---|"] + summary
    return out


def paired_table(lines):
    """paired_step.py's lines: relative differences against PyTorch fp64, median over tensors."""
    last = {(r["model"], r["steps"], r["seed"]): r for r in lines}
    out = ["", "Paired steps (--paired-step K): iteration K-1 taken by the trainer and by PyTorch in fp32 and fp64 from "
           "the trainer's state before it; each figure is ||x - x_fp64|| / ||x_fp64|| per parameter tensor or buffer, "
           "median over them (largest in brackets). Last two columns: iterations 0..K-1 run from the trainer's start "
           "(whole weight vector against PyTorch fp64's run). direct = train(): the largest difference between the "
           "driven loop's weights and train()'s. Test accuracy of the trainer's state after the K iterations: the "
           "trainer's evaluation, then PyTorch's of the same weights and running statistics.", "",
           "| model | K | seed | loss trainer / fp32 / fp64 | gradients trainer | gradients PyTorch fp32 | "
           "running stats trainer | running stats PyTorch fp32 | run: trainer | run: PyTorch fp32 | direct = train() | "
           "test of that state: trainer / PyTorch |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (model, steps, seed), r in sorted(last.items()):
        s, run = r["step_from_trainer_state"], r["run_from_trainer_start_weights"]
        cell = lambda what, side: f"{s[what][side + '_median']:.1e} ({s[what][side + '_max']:.1e})"
        loss, tested = s["loss"], r.get("pytorch_test_of_trainer_state")
        test = f"{r['trainer_test_accuracy']:.4f} / {tested['accuracy']:.4f}" if tested and "trainer_test_accuracy" in r else "-"
        out.append(f"| {model} | {steps} | {seed} | {loss['trainer']:.6f} / {loss['pytorch_fp32']:.6f} / "
                   f"{loss['pytorch_fp64']:.6f} | {cell('gradients', 'trainer')} | {cell('gradients', 'pytorch_fp32')} | "
                   f"{cell('running_statistics', 'trainer')} | {cell('running_statistics', 'pytorch_fp32')} | "
                   f"{run['trainer_vs_fp64']:.1e} | {run['pytorch_fp32_vs_fp64']:.1e} | {r['direct_vs_train_max_abs']:g} | {test} |")
    return out


def main():
    folder = sys.argv[1]
    runs = read_lines(os.path.join(folder, "results.jsonl"))
    last = latest(runs)
    out = header(runs, list(last.values())) + accuracy_tables(last)
    paired = read_lines(os.path.join(folder, "paired_step.jsonl"))
    if paired:
        out += paired_table(paired)
    with open(os.path.join(folder, "table.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
