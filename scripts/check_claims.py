#!/usr/bin/env python3
"""Checks the figures the READMEs quote against the committed results they come from.

Standard library only; it reads files and times nothing, so it can run in `make test`.

A *figure* is a measured quantity in prose: a ratio (`1.25x`, `0.73-0.95x`), a duration (`63 s`,
`12-29 ms`, `36.5 minutes`) or a percentage (`3%`, `-8.6%`). Text in code spans, code blocks,
link targets and HTML comments is not prose. Every figure in the checked files (the top README.md,
docs/*.md, trainer/README.md, benchmarks/README.md and benchmarks/*/README.md) must be tied to its
source in one of three ways:

  * generated: inside `<!-- generated: NAME ARGS -->` ... `<!-- end -->`, a block this script
    writes from the results (GENERATORS below; ARGS, separated by spaces, are passed to NAME, e.g.
    the results file of `md_table`). The check fails when the block differs from what the results
    give now, naming the block and its source; `--write` rewrites it.
  * annotated: followed on the same line by `<!-- src FIGURE: EXPR -->`, where EXPR recomputes
    the figure from a committed result file with the helpers below (`iteration`, `cell`, `grep`,
    ...). The figure must equal EXPR's value rounded to the figure's own digits; a range figure
    takes a pair (`span(...)`). A line `<!-- let NAME = EXPR -->` names a value for the
    annotations after it in the same file.
  * said to be unsourced or a setting: inside `<!-- unsourced -->` ... `<!-- end -->`, a block
    whose first line of text says "not yet re-measured" (the reader is told), or named by
    `<!-- setting FIGURE -->` on its line when it is a configured value (a timeout, a goal), not
    a measurement.

Anything else is an error naming the file, the line, the figure and, for a mismatch, the value
its source gives.

Every relative Markdown link of the checked files must name a file or folder that exists, and a
heading of it when it names one (`file.md#heading`).

    scripts/check_claims.py                 # check; exit 1 on any error
    scripts/check_claims.py --write         # rewrite the generated blocks, then check
    scripts/check_claims.py --as README.md COPY   # check COPY's text as if it were README.md
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(ROOT, "benchmarks", "e2e"))
from rounds import at_or_below  # noqa: E402  the sweeps' rule for "at or below" over rounds

NUM = r"-?\d[\d,]*(?:\.\d+)?"
# One figure: a number or a range of two, then its unit. The look-behind keeps parts of names
# (qsgd16, 3x112x112, v2.15) out.
FIGURE = re.compile(
    rf"(?<![\w.\-/:])(?P<a>{NUM})(?:\s?(?:-|–|to)\s?(?P<b>{NUM}))?"
    rf"(?P<unit>x(?![\w])|\s?%|\s(?:s|ms|minutes|hours)(?![\w/]))")


class ClaimError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Helpers an annotation's EXPR may call. Paths are relative to the repository root.

SOURCES_READ: list[str] = []  # the result files read since it was last cleared: what a generated block came from


def _path(p: str) -> str:
    full = os.path.normpath(os.path.join(ROOT, p))
    if not os.path.isfile(full):
        raise ClaimError(f"source {p} does not exist")
    SOURCES_READ.append(os.path.relpath(full, ROOT))
    return full


def load(p: str):
    """A JSON file's content."""
    with open(_path(p), encoding="utf-8") as f:
        return json.load(f)


def runs(p: str, **match):
    """The runs of a benchmark's results.json whose fields equal `match`."""
    data = load(p)
    rows = data["runs"] if isinstance(data, dict) else data
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def run(p: str, **match) -> dict:
    """The one run of results.json matching `match` (an error if none or several do)."""
    found = runs(p, **match)
    if len(found) != 1:
        raise ClaimError(f"{p}: {len(found)} runs match {match}, expected 1")
    return found[0]


def iteration(p: str, **match) -> float:
    """Median seconds per iteration of the one run matching `match`."""
    return float(run(p, **match)["iteration_s"])


def field(p: str, name: str, **match) -> float:
    return float(run(p, **match)[name])


def gbench(p: str, name: str, key: str = "bytes_per_second") -> float:
    """A Google Benchmark JSON entry's value, by the entry's exact name."""
    for b in load(p)["benchmarks"]:
        if b["name"] == name:
            return float(b[key])
    raise ClaimError(f"{p}: no benchmark named {name}")


def gbench_medians(p: str) -> dict[str, list[dict]]:
    """A Google Benchmark JSON file's median entries by the name the program registered
    ("ring/fp32/4194304", without the "/iterations:N/manual_time" Google Benchmark appends); a
    name registered twice (bench_codec's memcpy, first and last) keeps both, in run order."""
    out: dict[str, list[dict]] = {}
    for b in load(p)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            name = re.sub(r"/(iterations:\d+|min_time:[\d.]+|manual_time)", "", b["run_name"])
            out.setdefault(name, []).append(b)
    return out


def gbench_median(p: str, name: str, key: str = "bytes_per_second") -> float:
    """The median of `key` of the one benchmark registered as `name` in Google Benchmark JSON p."""
    found = gbench_medians(p).get(name, [])
    if len(found) != 1:
        raise ClaimError(f"{p}: {len(found)} medians of {name}, expected 1")
    return float(found[0][key])


def reach(p: str, target: float, **match) -> float:
    """Training seconds until the one matching run's test accuracy first reached `target`
    (its evaluations in results.json)."""
    for e in run(p, **match)["evaluations"]:
        if e["test_accuracy"] >= target:
            return float(e["train_seconds"])
    raise ClaimError(f"{p}: the run matching {match} never reached {target}")


def _number(text: str, where: str) -> float:
    m = re.search(NUM, text.replace("**", ""))
    if not m:
        raise ClaimError(f"{where}: no number in {text!r}")
    return float(m.group(0).replace(",", ""))


def table(p: str, header: str | None = None) -> list[dict]:
    """The rows of a Markdown table in file p (the first one, or the first after a line
    containing `header`), as dicts keyed by column title. Empty cells inherit the cell above
    (tables that group rows leave the group's name blank). A title that repeats gets its count:
    the second "ratio" column is "ratio (2)"."""
    with open(_path(p), encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = 0
    if header is not None:
        start = next((i for i, l in enumerate(lines) if header in l), None)
        if start is None:
            raise ClaimError(f"{p}: no line contains {header!r}")
    i = next((i for i in range(start, len(lines)) if lines[i].lstrip().startswith("|")), None)
    if i is None:
        raise ClaimError(f"{p}: no table after {header!r}")
    split = lambda l: [c.strip() for c in l.strip().strip("|").split("|")]
    titles = split(lines[i])
    # A title used twice (two "ratio" columns) gets its position: "ratio (2)".
    titles = [t if titles[:k].count(t) == 0 else f"{t} ({titles[:k].count(t) + 1})" for k, t in enumerate(titles)]
    rows, last = [], {}
    for l in lines[i + 2:]:
        if not l.lstrip().startswith("|"):
            break
        cells = split(l)
        row = {t: (c if c else last.get(t, "")) for t, c in zip(titles, cells)}
        rows.append(row)
        last = row
    return rows


def cell(p: str, column: str, header: str | None = None, **match) -> float:
    """The number in `column` of the one table row whose cells equal `match` (keys: column
    titles with spaces as underscores)."""
    want = {k.replace("_", " "): v for k, v in match.items()}
    rows = [r for r in table(p, header) if all(r.get(k) == v for k, v in want.items())]
    if len(rows) != 1:
        raise ClaimError(f"{p}: {len(rows)} rows match {want}, expected 1")
    if column not in rows[0]:
        raise ClaimError(f"{p}: no column {column!r} (columns: {list(rows[0])})")
    return _number(rows[0][column], p)


def grep(p: str, pattern: str, group: int = 1) -> float:
    """The number captured by `pattern`'s group in file p (the first match)."""
    with open(_path(p), encoding="utf-8") as f:
        m = re.search(pattern, f.read())
    if not m:
        raise ClaimError(f"{p}: no match for {pattern!r}")
    return _number(m.group(group), p)


def ratio(p: str, key: str, a: str, b: str, **match) -> float:
    """Iteration time of the run whose `key` is a over the one whose `key` is b, both matching
    `match` (e.g. ratio(f, "policy", "p3", "ddp", model="vgg11", link="1gbit"): P3's x DDP)."""
    return iteration(p, **{key: a}, **match) / iteration(p, **{key: b}, **match)


def column(p: str, name: str, header: str | None = None) -> list[float]:
    """Every number in one column of a Markdown table."""
    return [_number(r[name], p) for r in table(p, header) if r.get(name, "").strip() not in ("", "-")]


def span(values) -> tuple[float, float]:
    """A range figure's two ends."""
    values = list(values)
    return (min(values), max(values))


E2E = "benchmarks/e2e/results"
TORCH = "benchmarks/torch/results"
GPU = "benchmarks/gpu/results/2026-11-28-h200-run5/call2"
DGT = "benchmarks/dgt/results"

HELPERS = dict(load=load, runs=runs, run=run, iteration=iteration, field=field, gbench=gbench, reach=reach,
               gbench_median=gbench_median,
               ratio=ratio, table=table, cell=cell, column=column, grep=grep, span=span,
               median=statistics.median, min=min, max=max, abs=abs, len=len, sorted=sorted, sum=sum, float=float,
               round=round, zip=zip, E2E=E2E, TORCH=TORCH, GPU=GPU, DGT=DGT)


def evaluate(expr: str, names: dict | None = None):
    # Globals, not locals: comprehensions in an annotation see only the globals.
    return eval(expr, {"__builtins__": {}, **HELPERS, **(names or {})})  # noqa: S307 - the repo's own text


# ---------------------------------------------------------------------------------------------
# Generated blocks. Each returns the Markdown between its markers.

def gen_headline() -> str:
    eq2 = f"{E2E}/2026-11-27-eq-n2/results.json"
    it = lambda p, pol, link, model="vgg11": iteration(p, model=model, link=link, policy=pol)
    rows = []

    # Per sweep, the links and the policy that ran today's default: 2 nodes, session 17's `default`;
    # 4 nodes, where ranks share cores and the start-up choice stays, VGG-11's `default` of session
    # 18 and ResNet-20's `default-start` (--tune-steady 0) of session 17.
    steady = f"{E2E}/2026-11-30-steady-"
    final4 = f"{E2E}/2026-11-30-final-n4-vgg11/results.json"
    r215 = [(f"{steady}n2-vgg11-fast/results.json", ("unlimited", "10gbit"), "default"),
            (f"{steady}n2-vgg11/results.json", ("1gbit", "300mbit"), "default"),
            (f"{steady}n2-resnet20/results.json", E2E_LINKS, "default"),
            (final4, E2E_LINKS, "default"),
            (f"{steady}n4-resnet20/results.json", E2E_LINKS, "default-start")]
    p3 = [run(p, policy="p3", model="vgg11", link="1gbit") for p in (f"{steady}n2-vgg11/results.json", final4)]
    rows.append(("gradsync-train, P3 fp32, against DDP on PyTorch 2.15: VGG-11, 1 Gbit/s, 2 and 4 nodes, alternating rounds",
                 f"{p3[0]['ratio_to_ddp']:.2f}x and {p3[1]['ratio_to_ddp']:.2f}x DDP's time"
                 + (" (every round at or below)" if all(r["at_or_below_ddp"] for r in p3) else ""),
                 "benchmarks/e2e/README.md#4-nodes-and-2-nodes-at-todays-code-the-last-points-of-issue-43-2026-11-30-session-18",
                 "e2e, PyTorch 2.15"))

    fp16 = [it(eq2, "p3-fp16", l) / it(eq2, "ddp-fp16", l) for l in ("1gbit", "300mbit")]
    rows.append(("P3 fp16 against DDP's fp16 hook: VGG-11, 2 nodes, 1 Gbit/s and 300 Mbit/s",
                 f"{fp16[0]:.2f}x and {fp16[1]:.2f}x",
                 "benchmarks/e2e/README.md", "e2e, equal terms"))

    default = [r for p, links, pol in r215 for r in runs(p, policy=pol) if r["link"] in links]
    lo, hi = span([r["ratio_to_ddp"] for r in default])
    rows.append((f"gradsync-train with no policy flag against DDP on PyTorch 2.15: VGG-11 and ResNet-20, 2 and 4 nodes, "
                 f"{len(default)} points (4 links), 2-3 alternating rounds",
                 f"{lo:.2f}-{hi:.2f}x DDP's time (every round at or below at "
                 f"{sum(bool(r['at_or_below_ddp']) for r in default)})",
                 "benchmarks/e2e/README.md#the-default-on-the-measured-compute-in-rounds-2026-11-30-session-17",
                 "e2e, PyTorch 2.15"))

    lossy = f"{E2E}/2026-11-27-lossy/results.json"
    q = field(lossy, "seconds_to_accuracy", policy="p3-ef-qsgd4")
    ps = field(lossy, "seconds_to_accuracy", policy="ddp-powersgd")
    rows.append(("Time to 0.85 test accuracy, VGG-11, 300 Mbit/s: P3 + error-feedback QSGD-4 against "
                 "DDP + PowerSGD (one run each; PowerSGD in one bucket)",
                 f"{q:.0f} s against {ps:.0f} s ({ps / q:.2f}x sooner)",
                 "benchmarks/e2e/README.md", "lossy"))

    d5 = f"{TORCH}/2026-11-29-n2-torch215"
    points = [(f"{d5}/{half}/results.json", m, l) for half, links in (("fast", ("unlimited", "10gbit")), ("slow", ("1gbit", "300mbit")))
              for m in ("resnet50", "transformer", "vgg16") for l in links]
    mine = [(run(p, contender="auto", model=m, link=l), _ddp_best(p, {"model": m, "link": l})) for p, m, l in points]
    ratios = [a["iteration_s"] / b["iteration_s"] for a, b in mine]
    below = sum(_rounds_mark(a, b) == " <=" for a, b in mine)
    above = sum(_rounds_mark(a, b) == " >" for a, b in mine)
    rows.append((f"gradsync.torch's default against DDP on PyTorch 2.15 (the faster of its defaults and its recommended "
                 f"settings): VGG-16, ResNet-50, a Transformer, 2 nodes, {len(points)} points (4 links), 2-3 alternating rounds",
                 f"{min(ratios):.2f}-{max(ratios):.2f}x DDP's time (every round at or below at {below}, above at {above})",
                 "benchmarks/torch/README.md#against-ddp-on-pytorch-215-in-rounds-2026-11-29", "PyTorch 2.15"))

    hooks = [iteration(f"{d5}/fast/results.json", contender="hooks", model=m, link="unlimited")
             / iteration(f"{d5}/fast/results.json", contender="compute", model=m, link="unlimited")
             for m in ("resnet50", "transformer", "vgg16")]
    rows.append(("gradsync.torch's hooks on one node against plain PyTorch 2.15, the same 3 models, 3 rounds "
                 "(goal 1.03x)", f"{min(hooks):.2f}-{max(hooks):.2f}x (medians; the rounds overlap)",
                 "benchmarks/torch/README.md#against-ddp-on-pytorch-215-in-rounds-2026-11-29", "PyTorch 2.15"))

    bench = f"{GPU}/bench_gpu_codec.json"
    memcpy = gbench(bench, "memcpy/min_time:0.200/manual_time_median")
    enc = {}
    for b in load(bench)["benchmarks"]:
        m = re.fullmatch(r"encode/(.+)/min_time:0\.200/manual_time_median", b["name"])
        if m:
            enc[m.group(1)] = float(b["bytes_per_second"]) / memcpy
    topk = enc.pop("topk:0.01", math.nan)
    rows.append((f"CUDA device codecs' encode against cudaMemcpy D2D, H200, {len(enc)} codecs "
                 f"(and top-k 1%: {topk:.2f}x, an exact radix select)",
                 f"{min(enc.values()):.2f}x ({min(enc, key=enc.get)}) to "
                 f"{max(enc.values()):.2f}x ({max(enc, key=enc.get)})",
                 f"{GPU}/results.md", "GPU"))

    out = ["| result | measured | source |", "|---|---|---|"]
    for what, fig, src, label in rows:
        out.append(f"| {what} | {fig} | [{label}]({src}) |")
    return "\n".join(out)


def _table_lines(p: str, n: int) -> list[str]:
    """The lines of the n-th Markdown table (from 1) in file p."""
    with open(_path(p), encoding="utf-8") as f:
        lines = f.read().split("\n")
    tables, prev = [], False
    for line in lines:
        row = line.lstrip().startswith("|")
        if row and not prev:
            tables.append([])
        if row:
            tables[-1].append(line.strip())
        prev = row
    if not 1 <= n <= len(tables):
        raise ClaimError(f"{p}: no table number {n} ({len(tables)} tables)")
    return tables[n - 1]


def gen_md_table(p: str, n: str = "1", columns: str = "") -> str:
    """A table that a benchmark's report script wrote from its raw results, copied: the n-th
    table of results file p, with only `columns` (indices from 0: "0-3,5") when given."""
    rows = [[c.strip() for c in l.strip("|").split("|")] for l in _table_lines(p, int(n))]
    if columns:
        keep = [k for part in columns.split(",")
                for k in (range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1))]
        rows = [[r[k] for k in keep] for r in rows]
    rows[1] = ["---"] * len(rows[1])
    return "\n".join("| " + " | ".join(r) + " |" if k != 1 else "|" + "|".join(r) + "|" for k, r in enumerate(rows))


def gen_codec_accuracy(base: str) -> str:
    """benchmarks/codec/accuracy.sh's runs in folder base (one gradsync-train --metrics file per
    codec): final test accuracy, its distance to fp32 against the study's goal, bytes rank 0 sent."""
    goals = {"qsgd8": 0.5, "qsgd4": 0.5, "onebit": 0.5, "qsgd2": None}  # points below fp32 allowed
    fp32 = load(f"{base}/fp32.json")
    out = ["| codec | test accuracy | vs fp32 (points) | goal | bytes sent (rank 0) | vs fp32 | compressed params |",
           "|---|---|---|---|---|---|---|"]
    for codec in ("fp32", "qsgd8", "qsgd4", "qsgd2", "onebit", "topk", "ef+qsgd4"):
        r = load(f"{base}/{codec}.json")
        diff = 100 * (r["test_accuracy"] - fp32["test_accuracy"])
        goal = ""
        if codec in goals and goals[codec] is None:
            goal = "allowed to lose"
        elif codec in goals:
            miss = -diff - goals[codec]
            goal = f"within {goals[codec]}: " + (f"**missed by {miss:.2f}**" if miss > 1e-9 else "met")
        sent = r["sync"]["rank0_bytes_sent"]
        out.append(f"| {codec} | {100 * r['test_accuracy']:.2f}% | {'' if codec == 'fp32' else f'{diff:+.2f}'} | {goal} "
                   f"| {sent / 1e6:.1f} MB | {sent / fp32['sync']['rank0_bytes_sent']:.3f}x "
                   f"| {100 * r['sync']['compressed_parameter_share']:.1f}% |")
    return "\n".join(out)


def _iteration_cell(paths: dict, p: str, key: str, name: str, digits: int, vs: str | None, match: dict) -> str:
    """One run's seconds per iteration (with its ratio to the run named `vs` in brackets, where the
    results hold that run), blank when the results hold no such run, "failed" when it did not
    complete. `paths` names other results files for some runs."""
    found = runs(paths.get(name, p), **{key: name}, **match)
    if not found:
        return ""
    if len(found) > 1:
        raise ClaimError(f"{p}: {len(found)} runs match {key}={name} {match}, expected 1")
    if not found[0].get("ok", True) or found[0].get("iteration_s") is None:
        return "failed"
    t = float(found[0]["iteration_s"])
    other = runs(paths.get(vs, p), **{key: vs}, **match) if vs else []
    return f"{t:.{digits}f}" + (f" ({t / float(other[0]['iteration_s']):.2f})" if len(other) == 1 else "")


def runs_table(header: list[str], rows: list[tuple], cols: list[tuple], digits: int, key: str = "contender") -> str:
    """A table of seconds per iteration: per row (its label cells, a results.json, the fields its
    runs match, and optionally {name: other results.json} for columns taken from another run),
    per column (the value of `key`, and the `key` value its ratio is to, or None; or a function of
    the row's results.json and fields that returns the cell)."""
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for labels, p, match, *other in rows:
        elsewhere = other[0] if other else {}
        cells = [col(p, match) if callable(col) else _iteration_cell(elsewhere, p, key, *col[:1], digits, col[1], match)
                 for col in cols]
        out.append("| " + " | ".join(list(labels) + cells) + " |")
    return "\n".join(out)


def _auto_choice(p: str, **match) -> str:
    """What gradsync.torch's slicing "auto" chose in one run (rank 0's `tuning`): slicing, units in
    flight / credit, and units per iteration."""
    g = run(p, contender="auto", **match)["gradsync"]
    t = g["tuning"]
    return (f"{t['slicing']}, {t['inflight_units']} / {t['credit_bytes'] // 2**20} MiB "
            f"({g['units'] // g['iterations']})")


TORCH_LINKS = ("unlimited", "10gbit", "1gbit", "300mbit")
TORCH_MODELS = {"vgg16": "VGG-16", "resnet50": "ResNet-50", "transformer": "Transformer"}


def _grouped(groups, links, path):
    """Rows per group (its label, the fields its runs match) and link, the label on the group's
    first row only; path(fields, link) names the results.json."""
    return [((label if k == 0 else "", l), path(match, l), {**match, "link": l})
            for label, match in groups for k, l in enumerate(links)]


def _models(*models):
    """gradsync.torch's models as _grouped's groups."""
    return [(TORCH_MODELS[m], {"model": m}) for m in models]


def _torch_auto_table() -> str:
    """gradsync.torch's slicing "auto" against P3 and DDP on 2 nodes, with what auto chose."""
    d = lambda sub: f"{TORCH}/{sub}/results.json"
    cols = [("compute", None), ("ddp", None), ("p3", "ddp"), ("auto", "ddp")]
    rows = [(("VGG-16", "unlimited"), d("2026-11-27-n2/vgg16-auto"), {"link": "unlimited"}),
            (("", "unlimited, again"), d("2026-11-27-n2/auto-fast"), {"model": "vgg16", "link": "unlimited"}),
            (("", "10gbit"), d("2026-11-27-n2/vgg16-auto"), {"link": "10gbit"}),
            (("", "10gbit, again"), d("2026-11-27-n2/auto-fast"), {"model": "vgg16", "link": "10gbit"}),
            (("", "1gbit"), d("2026-11-27-n2/vgg16-auto"), {"link": "1gbit"}),
            (("", "300mbit (DDP: the first run's)"), d("2026-11-27-n2/vgg16-300mbit-b"), {"link": "300mbit"},
             {"ddp": d("2026-11-27-n2/vgg16-300mbit")})]
    rows += _grouped(_models("resnet50", "transformer"), ("unlimited", "10gbit"), lambda m, l: d("2026-11-27-n2/auto-fast"))
    table = runs_table(["model", "link", "compute only", "DDP", "P3 fp32", "auto"], rows, cols, 3)
    lines = table.split("\n")
    lines[0] += " auto chose (units per iteration) |"
    lines[1] += "---|"
    for k, (labels, p, match, *_) in enumerate(rows):
        lines[k + 2] += f" {_auto_choice(p, **match)} |"
    return "\n".join(lines)


def _ddp_best(p: str, match: dict) -> dict:
    """DDP at its best at one point: the faster (median over rounds) of its defaults and ddp-view
    (gradient_as_bucket_view + static_graph) where that ran."""
    return min(runs(p, contender="ddp", **match) + runs(p, contender="ddp-view", **match),
               key=lambda r: r["iteration_s"])


def _rounds_mark(mine: dict, other: dict) -> str:
    """ " <=" where the rounds say `mine` is at or below `other` (rounds.at_or_below), " >" where every
    round was above, "" where they make no claim."""
    return {True: " <=", False: " >", None: ""}[at_or_below(mine, other)]


def _torch_vs(contender: str, other):
    """A cell: a contender's median over rounds, x the run other(results, match) picks, and the
    rounds' verdict."""
    def cell(p, match):
        found = runs(p, contender=contender, **match)
        if not found:
            return ""
        mine, theirs = found[0], other(p, match)
        if not mine.get("ok", True) or mine.get("iteration_s") is None:
            return "failed"
        return f"{mine['iteration_s']:.3f} ({mine['iteration_s'] / theirs['iteration_s']:.2f}{_rounds_mark(mine, theirs)})"
    return cell


def _torch215_table(sub: str, links: tuple[str, ...], hooks: bool) -> str:
    """gradsync.torch against DDP on PyTorch 2.x in rounds: per model and link the medians, P3's and
    the default's ratio to DDP at its best with the rounds' verdict, and what `auto` chose."""
    p = f"{TORCH}/{sub}/results.json"
    rows = _grouped(_models("resnet50", "transformer", "vgg16"), links, lambda m, l: p)
    cols = [("compute", None)] + ([("hooks", "compute")] if hooks else []) + [("ddp", None)]
    cols += [("ddp-view", None)] if runs(p, contender="ddp-view") else []
    cols += [_torch_vs("p3", _ddp_best), _torch_vs("auto", _ddp_best), lambda q, match: _auto_choice(q, **match)]
    head = ["model", "link", "compute only"] + (["hooks, 1 node (x compute)"] if hooks else []) + ["DDP"]
    head += ["DDP view + static"] if runs(p, contender="ddp-view") else []
    head += ["P3 fp32 (x DDP's best)", "auto (x DDP's best)", "auto chose (units per iteration)"]
    return runs_table(head, rows, cols, 3)


def _torch_hook_table(sub: str, redo: dict) -> str:
    """DDP with gradsync's qsgd8 comm hook and P3 fp16 against DDP's own fp16 hook, in rounds;
    redo names the results of points measured again ((model, link): results.json)."""
    p = f"{TORCH}/{sub}/results.json"
    rows = _grouped(_models("resnet50", "transformer"), ("1gbit", "300mbit"),
                    lambda m, l: redo.get((m["model"], l), p))

    fp16 = lambda q, match: run(q, contender="ddp-fp16", **match)
    return runs_table(["model", "link", "DDP fp16 hook", "DDP + gradsync qsgd8 hook (x DDP fp16)", "P3 fp16 (x DDP fp16)"],
                      rows, [("ddp-fp16", None), _torch_vs("ddp-gs-qsgd8", fp16), _torch_vs("p3-fp16", fp16)], 3)


def gen_torch_table(name: str) -> str:
    """The tables of benchmarks/torch/README.md, from the sweeps' results.json."""
    d = lambda sub: f"{TORCH}/{sub}/results.json"
    full = ["compute only", "DDP", "DDP fp16 hook", "WFBP", "P3 fp32", "P3 fp16", "P3 qsgd8"]
    full_cols = [("compute", None), ("ddp", None), ("ddp-fp16", None), ("wfbp", "ddp"), ("p3", "ddp"),
                 ("p3-fp16", "ddp-fp16"), ("p3-qsgd8", None)]
    hooks_cols = full_cols[:1] + [("hooks", "compute")] + full_cols[1:]
    if name == "n2-first":
        return runs_table(["model", "link"] + full, _grouped(_models("resnet50", "transformer"), TORCH_LINKS,
                                                          lambda m, l: d(f"2026-11-26-n2/{m['model']}")), full_cols, 2)
    if name == "n2-vgg16":
        return runs_table(["link"] + full, [((l,), d("2026-11-27-n2/vgg16"), {"link": l}) for l in ("unlimited", "1gbit")],
                          full_cols, 2)
    if name in ("n2-vgg16-10gbit", "n2-vgg16-300mbit"):
        link = name.rsplit("-", 1)[1]
        head = ["run", "compute only", "hooks, 1 node"] + full[1:]
        second = "again" if link == "10gbit" else "second"
        return runs_table(head, [(("first",), d(f"2026-11-27-n2/vgg16-{link}"), {"link": link}),
                                 ((second,), d(f"2026-11-27-n2/vgg16-{link}-b"), {"link": link})], hooks_cols, 3)
    if name == "n2-auto":
        return _torch_auto_table()
    if name == "n2-215-fast":
        return _torch215_table("2026-11-29-n2-torch215/fast", ("unlimited", "10gbit"), True)
    if name == "n2-215-slow":
        return _torch215_table("2026-11-29-n2-torch215/slow", ("1gbit", "300mbit"), False)
    if name == "n2-215-hook":
        sub = "2026-11-29-n2-torch215/comm-hook"
        return _torch_hook_table(sub, {("resnet50", "300mbit"): f"{TORCH}/{sub}-resnet50-300mbit/results.json"})
    if name == "n4-resnet50":
        cols = [("compute", None), ("ddp", None), ("ddp-fp16", None), ("p3", "ddp"), ("auto", "ddp"), ("p3-fp16", "ddp-fp16")]
        return runs_table(["model", "link", "compute only", "DDP", "DDP fp16 hook", "P3 fp32", "auto",
                           "P3 fp16 (x DDP fp16)"], _grouped(_models("resnet50"), ("1gbit",), lambda m, l: d("2026-11-27-n4/resnet50-1gbit")), cols, 3)
    if name == "n4-fast":
        cols = [("compute", None), ("ddp", None), ("p3", "ddp"), ("auto", "ddp")]
        return runs_table(["model", "link", "compute only", "DDP", "P3 fp32", "auto"],
                          _grouped(_models("resnet50", "transformer"), ("unlimited", "10gbit"), lambda m, l: d("2026-11-27-n4/fast")), cols, 3)
    if name == "n4-vgg16":
        cols = full_cols[:5] + [("auto", "ddp")] + full_cols[5:]
        return runs_table(["link"] + full[:5] + ["auto"] + full[5:],
                          [((l,), d("2026-11-27-n4/vgg16"), {"link": l}) for l in TORCH_LINKS], cols, 2)
    raise ClaimError(f"no torch table named {name}")


E2E_LINKS = ("unlimited", "10gbit", "1gbit", "300mbit")
E2E_MODELS = {"vgg11": "VGG-11", "resnet20": "ResNet-20"}


def _e2e_pair(policies: tuple[str, ...], name: str = "overhead_s", digits: int = 3):
    """A cell of two (or more) runs' `name`, "a / b" (e.g. the overhead of P3 and of DDP)."""
    return lambda p, match: " / ".join(f"{field(p, name, policy=x, **match):.{digits}f}" for x in policies)


def _e2e_ab(before: str, after: str, policy: str, name: str = "iteration_s"):
    """A cell of one run's `name` in two sweeps' results, "before / after"."""
    return lambda p, match: " / ".join(f"{field(f'{E2E}/{d}/results.json', name, policy=policy, **match):.3f}"
                                       for d in (before, after))


def _e2e_group(model: str, nodes: int) -> tuple[str, dict]:
    """A model on a node count as _grouped's group."""
    return f"{E2E_MODELS[model]}, {nodes}", {"model": model}


def _e2e_default_table() -> str:
    """gradsync-train with no policy flag against P3 and DDP (issue 31's default chooses per link)."""
    r = lambda sub: f"{E2E}/{sub}/results.json"
    d = lambda sub: r(f"2026-11-27-default/{sub}")
    rows = _grouped([_e2e_group("vgg11", 2)], E2E_LINKS, lambda m, l: d("default-n2"))
    rows += _grouped([_e2e_group("vgg11", 4)], E2E_LINKS, lambda m, l: d("default-n4"))
    rows += _grouped([_e2e_group("resnet20", 2)], E2E_LINKS, lambda m, l: d("r20-n2"))
    rows += [(("", f"300mbit, run {k + 2}"), d(f"r20-n2-300-{k + 1}"), {"model": "resnet20", "link": "300mbit"})
             for k in range(2)]
    rows += _grouped([_e2e_group("resnet20", 4)], E2E_LINKS,
                     lambda m, l: d("r20-n4-b" if l in ("unlimited", "300mbit") else "r20-n4-a"))
    cols = [("compute", None), ("ddp-compute", None), ("default", "ddp"), ("p3", "ddp"), ("ddp", None)]
    return runs_table(["model, nodes", "link", "compute only", "DDP compute only", "default", "P3 `fixed:40000`", "DDP"],
                      rows, cols, 3, key="policy")


def _e2e_lossy_table() -> str:
    """Time to 0.85 accuracy of the lossy codecs against DDP + PowerSGD."""
    r = lambda sub: f"{E2E}/{sub}/results.json"
    p = r("2026-11-27-lossy")
    labels = {"p3-ef-qsgd4": "P3 + ef-qsgd4 (error-feedback QSGD, 4 bits)",
              "p3-onebit": "P3 + onebit (1-bit SGD, error feedback)", "ddp-powersgd": "DDP + PowerSGD (rank 4)"}
    fastest = min(field(p, "seconds_to_accuracy", policy=x) for x in labels)
    out = ["| run | iteration (s) | node 0 sends (MB per iteration) | iterations to 0.85 | seconds to 0.85 "
           "| x fastest | final test accuracy |", "|---|---|---|---|---|---|---|"]
    for x, label in labels.items():
        q = run(p, policy=x)
        out.append(f"| {label} | {q['iteration_s']:.3f} | {q['node0_wire_mb_per_iteration']:.1f} "
                   f"| {q['iterations_to_accuracy']} | {q['seconds_to_accuracy']:.1f} "
                   f"| {q['seconds_to_accuracy'] / fastest:.2f} | {q['test_accuracy']:.4f} |")
    return "\n".join(out)


def _e2e_round_cell(policy: str):
    """A cell of one policy's median over rounds, its ratio to DDP's and "<=" where every round was
    at or below DDP's (rounds.py)."""
    def cell(p, match):
        q = run(p, policy=policy, **match)
        if not q.get("ok", True) or q.get("iteration_s") is None:
            return "failed"
        if q.get("ratio_to_ddp") is None:
            return f"{q['iteration_s']:.3f}"
        mark = " <=" if q.get("at_or_below_ddp") else ""
        return f"{q['iteration_s']:.3f} ({q['ratio_to_ddp']:.2f}{mark})"
    return cell


def _e2e_rows_of(p: str) -> list:
    """A row per model and link the sweep in results file `p` measured, the model named on its first."""
    rows = []
    for m in E2E_MODELS:
        links = [l for l in E2E_LINKS if runs(p, model=m, link=l)]
        rows += [((E2E_MODELS[m] if k == 0 else "", l), p, {"model": m, "link": l}) for k, l in enumerate(links)]
    return rows


def _e2e_rounds_table(subs: str) -> str:
    """Sweeps with --rounds against DDP on PyTorch 2.x ('+' between their folders): medians, ratios
    with the rounds' verdict, what synchronizing adds (overhead) and the CPU it takes, P3 against DDP."""
    rows = [row for sub in subs.split("+") for row in _e2e_rows_of(f"{E2E}/{sub}/results.json")]
    cols = [("compute", None), ("ddp-compute", None), _e2e_round_cell("default"), _e2e_round_cell("wfbp"),
            _e2e_round_cell("p3"), ("ddp", None), _e2e_pair(("p3", "ddp")), _e2e_pair(("p3", "ddp"), "cpu_s"),
            _e2e_pair(("p3", "ddp"), "cpu_overhead_s"),
            _e2e_pair(("p3", "ddp"), "others_cores", 2)]
    head = ["model", "link", "gradsync compute only", "DDP compute only", "default (x DDP)", "WFBP (x DDP)",
            "P3 `fixed:40000` (x DDP)", "DDP", "overhead P3 / DDP (s)", "CPU per iteration P3 / DDP (s)",
            "CPU less own compute's P3 / DDP (s)",
            "other cores busy P3 / DDP"]
    return runs_table(head, rows, cols, 3, key="policy")


def _e2e_before_after_table(sub: str, before: str = "p3-before") -> str:
    """Sweeps ('+' between their folders) with --rounds of P3 before a change (`before`: p3-before,
    built from the commit before it with --trainer-of, or P3 with the old setting as flags) beside
    P3 after it and DDP: medians with the rounds' verdict against DDP, overhead and CPU."""
    rows = [row for one in sub.split("+") for row in _e2e_rows_of(f"{E2E}/{one}/results.json")]
    three = (before, "p3", "ddp")
    cols = [("compute", None), ("ddp-compute", None), _e2e_round_cell(before), _e2e_round_cell("p3"),
            ("ddp", None), _e2e_pair(three), _e2e_pair(three, "cpu_s"), _e2e_pair(three, "cpu_overhead_s"),
            _e2e_pair(three, "others_cores", 2)]
    head = ["model", "link", "gradsync compute only", "DDP compute only", "P3 before (x DDP)", "P3 after (x DDP)", "DDP",
            "overhead before / after / DDP (s)", "CPU per iteration before / after / DDP (s)",
            "CPU less own compute's before / after / DDP (s)", "other cores busy before / after / DDP"]
    return runs_table(head, rows, cols, 3, key="policy")


def gen_e2e_table(name: str) -> str:
    """The tables of benchmarks/e2e/README.md, from the sweeps' results.json (report.py)."""
    r = lambda sub: f"{E2E}/{sub}/results.json"
    if name == "eq":
        cols = [("compute", None), ("ddp-compute", None), ("p3", "ddp"), ("p3-auto", "ddp"), ("wfbp", "ddp"), ("ddp", None),
                ("p3-fp16", "ddp-fp16"), ("ddp-fp16", None), _e2e_pair(("p3", "ddp"))]
        head = ["model, nodes", "link", "gradsync compute only", "DDP compute only", "P3 (default)", "P3 auto", "WFBP", "DDP",
                "P3 fp16 (x DDP fp16)", "DDP fp16", "overhead P3 / DDP"]
        rows = [row for n in (2, 4) for m in E2E_MODELS
                for row in _grouped([_e2e_group(m, n)], E2E_LINKS, lambda f, l: r(f"2026-11-27-eq-n{n}"))]
        return runs_table(head, rows, cols, 3, key="policy")
    if name == "default":
        return _e2e_default_table()
    if name == "lossy":
        return _e2e_lossy_table()
    if name.startswith("rounds:"):
        return _e2e_rounds_table(name.split(":", 1)[1])
    if name.startswith("before-after:"):
        return _e2e_before_after_table(*name.split(":")[1:3])
    if name == "compute":
        rows = [((m, l), r(f"2026-11-27-compute/{m}-n2"), {"model": m, "link": l})
                for m in E2E_MODELS for l in ("unlimited", "300mbit")]
        cols = [("compute", None), ("ddp-compute", None), ("default", "ddp"), ("ddp", None), _e2e_pair(("default", "ddp"))]
        return runs_table(["model", "link", "gradsync compute only", "DDP compute only", "default (x DDP)", "DDP",
                           "overhead default / DDP"], rows, cols, 3, key="policy")
    if name in ("ab", "engine"):
        before, after = ("2026-11-27-ab/before", "2026-11-27-ab/after") if name == "ab" else \
            ("2026-11-27-engine/before", "2026-11-27-engine/after")
        rows = [((f"{E2E_MODELS[m]}, {l}",), r(before), {"model": m, "link": l})
                for m in E2E_MODELS for l in ("300mbit", "1gbit", "unlimited")]
        cols = [_e2e_ab(before, after, "compute"), _e2e_ab(before, after, "p3")]
        head = ["model, link", "compute only before / after (s)", "P3 before / after (s)"]
        if name == "ab":
            cols.append(_e2e_ab(before, after, "p3", "busy_s"))
            head.append("busy before / after (s)")
        return runs_table(head, rows, cols, 3, key="policy")
    raise ClaimError(f"no e2e table named {name}")


DGT_MODELS = {"alexnet-bn": "AlexNet-BN x1/4, 100 Mbit/s", "vgg11": "VGG-11 x1/4, 200 Mbit/s"}
# DGT's paper (Zhou et al.), Table 1: BCT and time-to-accuracy changes against its baseline.
DGT_PAPER = {"alexnet-bn": "BCT -35.4%, time -15.1%", "vgg11": "BCT -29.9%, time -18.3%"}


def _dgt_runs(sub: str, model: str, protocol: str) -> list[dict]:
    """One protocol's runs (a seed each) in table1.sh's results.json (report.py)."""
    return load(f"{DGT}/{sub}/results.json")[model][protocol]


def _seeds(rs: list[dict], key: str, scale: float, fmt: str, unit: str = "") -> str:
    """The mean over the seeds' runs, then each seed's value in brackets."""
    vals = [scale * r[key] for r in rs]
    return f"{statistics.mean(vals):{fmt}}{unit}" + (f" ({', '.join(f'{v:{fmt}}' for v in vals)})" if len(vals) > 1 else "")


def _dgt_row(rs: list[dict], base: list[dict] | None) -> list[str]:
    """Iterations and time to 0.8, BCT, training time and final accuracy (means of the seeds, each
    seed in brackets), and against the baseline's means where `base` is given."""
    mean = lambda runs_, k: statistics.mean(r[k] for r in runs_)
    vs = lambda k: f", {100 * (mean(rs, k) / mean(base, k) - 1):+.1f}%" if base else ""
    acc = f", {100 * (mean(rs, 'final_accuracy') - mean(base, 'final_accuracy')):+.2f}" if base else ""
    blocks = [sum(r["blocks"][i] for r in rs) for i in range(3)]
    dropped = f"{100 * blocks[2] / (blocks[0] + blocks[1]):.1f}%" if blocks[0] + blocks[1] else ""
    return [_seeds(rs, "iterations_to_target", 1, ".0f"), f"{mean(rs, 'bct'):.3f} s{vs('bct')}",
            _seeds(rs, "time_to_target", 1, ".1f", " s") + vs("time_to_target"),
            _seeds(rs, "train_seconds", 1, ".1f", " s"), _seeds(rs, "final_accuracy", 100, ".2f", "%") + acc, dropped]


def _dgt_goals(base: str, dgt: str, label: str) -> list[str]:
    """Rows of the goals (BCT -30%, time to 0.8 -15%, final accuracy within 0.5 points), per model."""
    out = []
    for model, name in DGT_MODELS.items():
        b, d = _dgt_runs(base, model, "baseline"), _dgt_runs(dgt, model, "dgt")
        mean = lambda rs, k: statistics.mean(r[k] for r in rs)
        ch = lambda k: 100 * (mean(d, k) / mean(b, k) - 1)
        seeds = ", ".join(f"{100 * (x['time_to_target'] / y['time_to_target'] - 1):+.1f}%" for x, y in zip(d, b))
        acc = 100 * (mean(d, "final_accuracy") - mean(b, "final_accuracy"))
        acc_seeds = ", ".join(f"{100 * (x['final_accuracy'] - y['final_accuracy']):+.2f}" for x, y in zip(d, b))
        verdict = lambda ok: "met" if ok else "**missed**"
        out.append(f"| {name.split(' x')[0]}{label} | {ch('bct'):+.1f}%: {verdict(ch('bct') <= -30)} "
                   f"| {ch('time_to_target'):+.1f}% (seeds {seeds}): {verdict(ch('time_to_target') <= -15)} "
                   f"| {acc:+.2f} (seeds {acc_seeds}): {verdict(acc >= -0.5)} | {DGT_PAPER[model]} |")
    return out


def gen_dgt_table(name: str) -> str:
    """The tables of benchmarks/dgt/README.md, from table1.sh's results.json."""
    head = ["model", "protocol", "iterations to 0.8 (seeds)", "BCT", "time to 0.8", "training time", "final accuracy",
            "blocks dropped (rank 0)"]
    s16 = "2026-11-26-session16-two-epochs"
    layouts = {  # per table: the baselines' results, then (label, results) of each DGT row
        "session16": (f"{s16}/p0-1", [("DGT, p0 = 1 (the paper's)", f"{s16}/p0-1"), ("DGT, p0 = 2", f"{s16}/p0-2")]),
        "session14": ("2026-11-26-session14", [("DGT", "2026-11-26-session14")]),
        "equal-time": ("2026-11-26-session14", [("DGT, as many iterations in about the baseline's time",
                                                  "2026-11-26-session14-equal-time")]),
        "late-join": ("2026-11-26-session15-late-join", [("DGT with late join", "2026-11-26-session15-late-join")]),
    }
    goals = {"session16-goals": [(f"{s16}/p0-1", f"{s16}/p0-1", ", p0 = 1"), (f"{s16}/p0-1", f"{s16}/p0-2", ", p0 = 2")],
             "session14-goals": [("2026-11-26-session14", "2026-11-26-session14", "")]}
    if name in goals:
        return "\n".join(["| model | BCT (goal -30%) | time to 0.8 (goal -15%) | final accuracy, points (goal within 0.5) "
                          "| the paper |", "|---|---|---|---|---|"] + [row for g in goals[name] for row in _dgt_goals(*g)])
    if name not in layouts:
        raise ClaimError(f"no DGT table named {name}")
    base, rows = layouts[name]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for model, label in DGT_MODELS.items():
        b = _dgt_runs(base, model, "baseline")
        out.append("| " + " | ".join([label, "baseline"] + _dgt_row(b, None)) + " |")
        for proto, sub in rows:
            out.append("| " + " | ".join(["", proto] + _dgt_row(_dgt_runs(sub, model, "dgt"), b)) + " |")
    return "\n".join(out)


# Encode goals of bench_codec (fp32 input per second against memcpy's), from the study.
CODEC_GOALS = {"fp16": 0.5, "qsgd2": 0.35, "qsgd4": 0.35, "qsgd8": 0.5, "onebit": 0.35}


def gen_codec_table(p: str) -> str:
    """bench_codec's medians: GB/s of fp32 input (CPU time) of each codec's encode and decode,
    against the mean of the run's first and last memcpy, and the encode goals."""
    med = gbench_medians(p)
    memcpy = statistics.mean(float(b["bytes_per_second"]) for b in med["memcpy"])
    out = ["| codec | wire MiB | encode GB/s | encode / memcpy | decode GB/s | decode / memcpy | goal |",
           "|---|---|---|---|---|---|---|"]
    for name in [n.split("/", 1)[1] for n in med if n.startswith("encode/")]:
        enc, dec = med[f"encode/{name}"][0], float(med[f"decode/{name}"][0]["bytes_per_second"])
        rate = float(enc["bytes_per_second"])
        goal = CODEC_GOALS.get(name)
        verdict = "" if goal is None else f">= {goal}x: " + ("met" if rate / memcpy >= goal else "**missed**")
        out.append(f"| {name} | {enc['wire_MiB']:.2f} | {rate / 1e9:.2f} | {rate / memcpy:.2f}x "
                   f"| {dec / 1e9:.2f} | {dec / memcpy:.2f}x | {verdict} |")
    return "\n".join(out)


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def _collective_medians(p: str) -> dict[tuple, dict]:
    """bench_collective's medians by (collective, codec, bytes), whatever link prefixes the names."""
    out = {}
    for name, b in gbench_medians(p).items():
        if b[0]["time_unit"] != "ms":
            raise ClaimError(f"{p}: {name} is timed in {b[0]['time_unit']}, not ms")
        coll, codec, nbytes = name.rsplit("/", 3)[-3:]
        out[(coll, codec, int(nbytes))] = b[0]
    return out


def gen_collective_table(p: str, codec: str = "fp32") -> str:
    """bench_collective's medians: MB/s (10^6 bytes of the unit per second of the slowest rank)
    of each collective per unit size, the fastest in bold, and the ring against MPI_Allreduce."""
    med = {k: float(b["bytes_per_second"]) for k, b in _collective_medians(p).items() if k[1] == codec}
    colls = list(dict.fromkeys(c for c, _, _ in med))
    sizes = sorted({s for *_, s in med})
    out = ["| size | " + " | ".join(colls) + " | ring / MPI_Allreduce |", "|" + "---|" * (len(colls) + 2)]
    for s in sizes:
        row = [med[(c, codec, s)] for c in colls]
        cells = [f"**{v / 1e6:.0f}**" if v == max(row) else f"{v / 1e6:.0f}" for v in row]
        ring = med[("ring", codec, s)] / med[("mpi_allreduce", codec, s)]
        out.append(f"| {_size(s)} | " + " | ".join(cells) + f" | {ring:.2f}x |")
    return "\n".join(out)


def _ms(t: float) -> str:
    """Milliseconds to three digits, without an exponent."""
    return f"{t:.0f}" if t >= 100 else f"{t:.3g}"


def gen_throttled_codecs(p: str, unthrottled: str, codecs: str) -> str:
    """bench_collective over 1 Gbit/s per-peer links (file p): ms per all-reduce of each
    collective x codec and each codec's speed-up over the first, then the ring's wire time (the
    bytes on its busiest link over 125 MB/s: 1.5 units for fp32, 1 for a lossy codec, whose
    chunks go straight to their owners, one per link at once; the codec's wire size from
    bench_codec file `codecs`) and the same all-reduces unthrottled."""
    med, plain = _collective_medians(p), _collective_medians(unthrottled)
    colls = list(dict.fromkeys(c for c, _, _ in med))
    names = list(dict.fromkeys(k for _, k, _ in med))
    (size,) = {s for *_, s in med}
    head = ["collective"] + names + [f"{k} speed-up" for k in names[1:]]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def row(label, times, speed_ups=True):
        sped = [f"{times[0] / t:.2f}x" if speed_ups else "" for t in times[1:]]
        out.append(f"| {label} | " + " | ".join(_ms(t) for t in times) + " | " + " | ".join(sped) + " |")

    for c in colls:
        row(c, [float(med[(c, k, size)]["real_time"]) for k in names])
    wire = gbench_medians(codecs)
    units = [(1.5 if k == "fp32" else 1.0) * float(wire[f"encode/{k}"][0]["wire_MiB"]) * 2**20 for k in names]
    row("ring: wire time (model)", [u / 125e3 for u in units])
    for c in colls:
        row(f"{c}, unthrottled", [float(plain[(c, k, size)]["real_time"]) for k in names], speed_ups=False)
    return "\n".join(out)


# Per byte of the unit, 4 ranks, the bytes of the busiest link summed over a collective's phases
# (no phase overlapping the next): per-peer links, and one NIC per rank.
LINK_LOAD = {"ring": (1.5, 1.5), "reduce-broadcast": (0.5, 1.5), "hierarchical:2": (3.0, 3.0),
             "hybrid": (1.5, 1.5), "ps": (2.0, 4.0)}


def gen_throttled_fp32(peer: str, nic: str) -> str:
    """bench_collective's fp32 ms per all-reduce over 1 Gbit/s per-peer links (file peer) and one
    NIC per rank (file nic) at each size, with the bandwidth model at the largest (LINK_LOAD's
    bytes over 125 MB/s)."""
    meds = [_collective_medians(p) for p in (peer, nic)]
    colls = list(dict.fromkeys(c for c, _, _ in meds[0]))
    sizes = sorted({s for *_, s in meds[0]})
    head = ["collective"] + [f"{_size(s)} {w}" for w in ("per-peer", "/nic") for s in sizes] + \
           [f"{_size(sizes[-1])} {w} model" for w in ("per-peer", "/nic")]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in colls:
        cells = [_ms(float(m[(c, 'fp32', s)]['real_time'])) for m in meds for s in sizes]
        model = [f"{f * sizes[-1] / 125e3:.0f}" for f in LINK_LOAD[c]]
        out.append(f"| {c} | " + " | ".join(cells + model) + " |")
    return "\n".join(out)


GENERATORS = {"headline": gen_headline, "md_table": gen_md_table, "codec_accuracy": gen_codec_accuracy,
              "torch_table": gen_torch_table, "dgt_table": gen_dgt_table, "e2e_table": gen_e2e_table,
              "codec_table": gen_codec_table, "collective_table": gen_collective_table,
              "throttled_codecs": gen_throttled_codecs, "throttled_fp32": gen_throttled_fp32}


# ---------------------------------------------------------------------------------------------
# Scanning a Markdown file.

COMMENT = re.compile(r"<!--(.*?)-->", re.S)
LET = re.compile(r"^\s*<!--\s*let\s+(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<expr>.+?)\s*-->\s*$", re.S)
ANNOT = re.compile(r"^\s*src\s+(?P<fig>.+?):\s(?P<expr>.+?)\s*$", re.S)
SETTING = re.compile(r"^\s*setting\s+(?P<fig>.+?)\s*$")
GEN_START = re.compile(r"^\s*<!--\s*generated:\s*(\S+)((?:\s+[^\s>]+)*)\s*-->\s*$")
UNSOURCED_START = re.compile(r"^\s*<!--\s*unsourced\s*-->\s*$")
END = re.compile(r"^\s*<!--\s*end\s*-->\s*$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(line: str) -> str:
    """The line without what is not prose: comments, code spans, link targets, URLs."""
    line = COMMENT.sub(" ", line)
    line = re.sub(r"`[^`]*`", " ", line)
    line = re.sub(r"\]\([^)]*\)", "] ", line)
    line = re.sub(r"https?://\S+", " ", line)
    return line.replace("**", "").replace("*", " ")


def decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def value_of(text: str) -> float:
    return float(text.replace(",", ""))


def matches(m: re.Match, value, where: str) -> tuple[bool, str]:
    """Whether a figure equals a source value (rounded to the figure's digits)."""
    ends = [m.group("a")] + ([m.group("b")] if m.group("b") else [])
    if isinstance(value, (int, float)):
        value = (value,)
    value = tuple(float(v) for v in value)
    if len(value) != len(ends):
        raise ClaimError(f"{where}: the figure has {len(ends)} number(s), its source {len(value)}")
    shown = []
    ok = True
    for e, v in zip(ends, value):
        d = decimals(e)
        shown.append(f"{v:.{d}f}")
        # Half a unit of the last digit, plus a hair for binary rounding of the source.
        if abs(v - value_of(e)) > 0.5 * 10 ** -d + 1e-9:
            ok = False
    return ok, "-".join(shown) + m.group("unit")


class Report:
    def __init__(self):
        self.errors: list[str] = []
        self.checked = 0

    def error(self, where: str, text: str):
        self.errors.append(f"{where}: {text}")


def check_file(name: str, text: str, write: bool, report: Report) -> str:
    """Checks one file's text (shown as `name`); returns the text with generated blocks
    rewritten when `write`."""
    lines = text.split("\n")
    out: list[str] = []
    names: dict = {}  # `<!-- let NAME = EXPR -->` lines: values the annotations below may use
    fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        where = f"{name}:{i + 1}"
        if line.lstrip().startswith("```"):
            fence = not fence
            out.append(line)
            i += 1
            continue
        if fence:
            out.append(line)
            i += 1
            continue
        g = GEN_START.match(line)
        if g:
            end = next((j for j in range(i + 1, len(lines)) if END.match(lines[j])), None)
            if end is None:
                report.error(where, f"generated block {g.group(1)} has no <!-- end -->")
                return text
            gen = GENERATORS.get(g.group(1))
            if gen is None:
                report.error(where, f"no generator named {g.group(1)} (known: {', '.join(GENERATORS)})")
                out.extend(lines[i:end + 1])
            else:
                SOURCES_READ.clear()
                try:
                    want = gen(*g.group(2).split()).split("\n")
                except ClaimError as e:
                    report.error(where, f"generated block {g.group(1)}: {e}")
                    want = lines[i + 1:end]
                have = lines[i + 1:end]
                spec = " ".join([g.group(1)] + g.group(2).split())
                report.checked += 1
                if have != want and not write:
                    for k, (h, w) in enumerate(zip(have + [""] * len(want), want + [""] * len(have))):
                        if h != w:
                            report.error(f"{name}:{i + 2 + k}",
                                         f"generated block {spec} differs from its sources "
                                         f"({', '.join(dict.fromkeys(SOURCES_READ))}): the "
                                         f"file has\n    {h}\n  the results give\n    {w}\n  "
                                         f"(scripts/check_claims.py --write rewrites it)")
                            break
                out.append(line)
                out.extend(want if write else have)
                out.append(lines[end])
            i = end + 1
            continue
        if UNSOURCED_START.match(line):
            end = next((j for j in range(i + 1, len(lines)) if END.match(lines[j])), None)
            if end is None:
                report.error(where, "unsourced block has no <!-- end -->")
                return text
            first = next((l for l in lines[i + 1:end] if l.strip()), "")
            if "not yet re-measured" not in first.lower():
                report.error(where, "an unsourced block must open with a line saying its figures are "
                                    "\"not yet re-measured\"")
            out.extend(lines[i:end + 1])
            i = end + 1
            continue
        let = LET.match(line)
        if let:
            try:
                names[let.group("name")] = evaluate(let.group("expr"), names)
            except Exception as e:
                report.error(where, f"let {let.group('name')}: {type(e).__name__}: {e}")
            out.append(line)
            i += 1
            continue
        check_line(where, line, report, names)
        out.append(line)
        i += 1
    return "\n".join(out)


def check_line(where: str, line: str, report: Report, names: dict):
    figures = [m for m in FIGURE.finditer(prose(line))]
    covered = [False] * len(figures)

    def claim(fig: str) -> int | None:
        for k, m in enumerate(figures):
            if not covered[k] and m.group(0).strip() == fig.strip():
                covered[k] = True
                return k
        return None

    for c in COMMENT.finditer(line):
        body = c.group(1)
        a = ANNOT.match(body)
        s = SETTING.match(body)
        if a:
            fig = a.group("fig").strip()
            k = claim(fig)
            if k is None:
                report.error(where, f"annotation names {fig!r}, which is not a figure of this line")
                continue
            report.checked += 1
            try:
                ok, shown = matches(figures[k], evaluate(a.group("expr"), names), where)
            except ClaimError as e:
                report.error(where, f"{fig}: {e}")
                continue
            except Exception as e:  # a broken expression is the annotation's error, not a crash
                report.error(where, f"{fig}: its source expression fails: {type(e).__name__}: {e}")
                continue
            if not ok:
                report.error(where, f"{fig} does not match its source, which gives {shown} "
                                    f"({a.group('expr').strip()})")
        elif s:
            if claim(s.group("fig")) is None:
                report.error(where, f"setting names {s.group('fig')!r}, which is not a figure of this line")
    for k, m in enumerate(figures):
        if not covered[k]:
            report.error(where, f"{m.group(0).strip()} has no source: annotate it "
                                f"(<!-- src FIGURE: EXPR -->), generate it, or move it to a "
                                f"\"not yet re-measured\" block")


def check_links(name: str, path: str, text: str, report: Report):
    base = os.path.dirname(path)
    fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence:
            continue
        for m in LINK.finditer(COMMENT.sub(" ", re.sub(r"`[^`]*`", " ", line))):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            target, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(base, target))
            if not os.path.exists(full):
                report.error(f"{name}:{n}", f"link to {target}, which does not exist")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                report.error(f"{name}:{n}", f"link to {target}#{anchor}, a heading {target} does not have")


def anchors(path: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation dropped,
    spaces as hyphens."""
    with open(path, encoding="utf-8") as f:
        heads = [l.lstrip("#").strip() for l in f.read().split("\n") if re.match(r"^#{1,6} ", l)]
    return {re.sub(r"[^\w\- ]", "", h.lower().replace("`", "")).replace(" ", "-") for h in heads}


def files() -> list[str]:
    """The checked files: the top README, docs/, trainer/README.md and the benchmarks' READMEs."""
    return ["README.md", "trainer/README.md"] + sorted(
        os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")) +
        glob.glob(os.path.join(ROOT, "benchmarks", "README.md")) +
        glob.glob(os.path.join(ROOT, "benchmarks", "*", "README.md")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the generated blocks from the results")
    ap.add_argument("--as", dest="as_name", metavar="NAME",
                    help="check the one file COPY as if it were the repository's NAME")
    ap.add_argument("copy", nargs="?", help="with --as: the file to check")
    ap.add_argument("-q", "--quiet", action="store_true")
    args = ap.parse_args(argv)

    report = Report()
    if args.as_name:
        if not args.copy:
            ap.error("--as NAME needs the file to check")
        targets = [(args.as_name, args.copy)]
    else:
        targets = [(f, os.path.join(ROOT, f)) for f in files()]

    for name, path in targets:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = check_file(name, text, args.write and not args.as_name, report)
        check_links(name, os.path.join(ROOT, name), new, report)
        if args.write and not args.as_name and new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print(f"rewrote the generated blocks of {name}")

    for e in report.errors:
        print(f"error: {e}", file=sys.stderr)
    if not args.quiet:
        print(f"check_claims: {report.checked} figures and generated blocks checked against their "
              f"sources in {len(targets)} files; {len(report.errors)} errors")
    return 1 if report.errors else 0


if __name__ == "__main__":
    sys.exit(main())
