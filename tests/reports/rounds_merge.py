#!/usr/bin/env python3
"""The sweeps' reports merge --rounds correctly: synthetic results of three rounds (and one of two
for the PyTorch sweep) go through benchmarks/e2e/report.py and benchmarks/torch/report.py, which
must give the median of the rounds, their spread, and "at or below DDP" only where every round
of the contender was at or below every round of DDP - not where the medians alone say so.
"""
import importlib.util
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
E2E = os.path.join(ROOT, "benchmarks", "e2e")
sys.path.insert(0, E2E)
import rounds  # noqa: E402


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


e2e_report = load("report", os.path.join(E2E, "report.py"))  # the name the torch report imports it by
torch_report = load("torch_report", os.path.join(ROOT, "benchmarks", "torch", "report.py"))
failures = []


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def write(root, name, value):
    with open(os.path.join(root, name), "w") as f:
        f.write("\n".join(json.dumps(v) for v in value) + "\n" if isinstance(value, list) else json.dumps(value))


# Median iteration of each round, per policy. p3 is below DDP in every round; p3-fp16's median
# is below DDP fp16's but its slowest round is not (no claim); wfbp's second round failed.
E2E_ROUNDS = {"compute": [0.5, 0.6, 0.55], "ddp-compute": [0.7, 0.8, 0.75], "p3": [1.2, 1.0, 1.1],
              "ddp": [1.3, 1.25, 1.5], "p3-fp16": [0.9, 1.35, 1.0], "ddp-fp16": [1.2, 1.0, 1.4],
              "wfbp": [1.1, None, 1.2]}


def e2e_results(root):
    records = [{"machine": "Test CPU", "cores": 2, "memory_gib": 1.0, "commit": "0" * 40, "tree_changed": 0,
                "compiler": "c++ 12", "date": "2026-01-01T00:00:00Z"},
               {"rounds": 3, "iterations": 4, "warmup": 1}, {"link": "1gbit", "measured_bps": 9.5e8}]
    for i in range(3):
        for policy, seconds in E2E_ROUNDS.items():
            tag = f"vgg11.1gbit.{policy}.r{i + 1}"
            ddp = policy.startswith("ddp")
            records.append({"model": "vgg11", "width": 1, "nodes": 2, "link": "1gbit", "policy": policy,
                            "kind": "ddp" if ddp else "gradsync", "bits": 16 if "fp16" in policy else 32, "warmup": 1,
                            "round": i + 1, "rc": 1 if seconds[i] is None else 0, "metrics": f"raw/{tag}.json",
                            "samples": f"raw/{tag}.link.tsv"})
            if seconds[i] is None:
                continue
            config = {"batch_per_rank": 32}
            if ddp:
                config.update(threads=1, bucket_mb=25.0, hook=policy[4:] or None,
                              blas={"torch": "1.13", "blas": "OpenBLAS", "matmul_gflops_1thread": 100, "blas_threads": 1})
            s = seconds[i]
            write(root, f"raw/{tag}.json", {"iteration_seconds": [9.0, s, s - 0.01, s + 0.01], "parameters": 1000,
                                            "iteration_wait_seconds": [0.0] + [0.05 * (i + 1) ** 2] * 3, "iterations": 4,
                                            "first_iteration_unix": 1.0e9, "config": config})
    write(root, "runs.jsonl", records)


def check_e2e():
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, "raw"))
        e2e_results(root)
        rates, runs = e2e_report.analyse(root)
        text = e2e_report.table(rates, runs)
        setup = e2e_report.setup_line(e2e_report.setup_of([json.loads(l) for l in open(os.path.join(root, "runs.jsonl"))]))
    by = {r["policy"]: r for r in runs}
    expect("entries (one per policy)", len(runs), len(E2E_ROUNDS))
    p3 = by["p3"]
    expect("p3 median of the rounds", round(p3["iteration_s"], 9), 1.1)
    expect("p3 rounds", (p3["rounds"], p3["spread_s"], p3["round_seconds"]), (3, [1.0, 1.2], [1.2, 1.0, 1.1]))
    expect("p3 busy: the median round's (the third)", round(p3["busy_s"], 9), 0.65)
    expect("p3 images/s from the median", round(p3["images_per_s"], 6), round(2 * 32 / 1.1, 6))
    expect("p3 compute-only bound: the median of compute's rounds", round(p3["compute_only_s"], 9), 0.55)
    expect("p3 x DDP (medians)", round(p3["ratio_to_ddp"], 6), round(1.1 / 1.3, 6))
    expect("p3 at or below DDP in every round", p3["at_or_below_ddp"], True)
    expect("p3 against DDP fp16 (spreads overlap)", p3["at_or_below_ddp_fp16"], None)
    expect("p3-fp16 median below DDP fp16's", by["p3-fp16"]["ratio_to_ddp_fp16"] < 1, True)
    expect("p3-fp16 at or below DDP fp16 (its slowest round is not)", by["p3-fp16"]["at_or_below_ddp_fp16"], None)
    expect("wfbp with a failed round", (by["wfbp"]["ok"], by["wfbp"]["rc"], by["wfbp"]["rounds"]), (False, 1, 3))
    rows = {line.split(" | ")[1]: line for line in text.splitlines() if line.startswith("| 1gbit |")}
    expect("p3's row: rounds and spread, <= after x DDP only",
           ("| 3 (1.000-1.200) |" in rows["p3"], "| 0.85 <= |" in rows["p3"], rows["p3"].count("<=")), (True, True, 1))
    expect("p3-fp16's row has no <=", "<=" in rows["p3-fp16"], False)
    expect("wfbp's row", "FAILED (status 1) | 3 |" in rows["wfbp"], True)
    expect("the table says what <= means", "at or below it in every round" in text, True)
    expect("the setup line names the rounds", "3 round(s) of every run" in setup, True)


def check_torch():
    """The PyTorch sweep's goals against DDP: met only where every round says so."""
    seconds = {"p3": [2.0, 2.1], "ddp": [2.2, 2.4], "ddp-view": [1.9, 1.95], "p3-fp16": [1.5, 1.9], "ddp-fp16": [1.6, 1.8],
               "ddp-powersgd": [1.2, 1.3], "compute": [1.0, 1.1]}
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, "raw"))
        records = [{"link": "1gbit", "measured_bps": 9.5e8}, {"python": "python3", "torch": "2.0", "threads": 1, "rounds": 2}]
        for i in range(2):
            for contender, s in seconds.items():
                tag = f"vgg16.1gbit.{contender}.r{i + 1}"
                records.append({"model": "vgg16", "nodes": 2, "link": "1gbit", "contender": contender, "batch": 16,
                                "input": "3x112x112", "warmup": 1, "round": i + 1, "rc": 0, "metrics": f"raw/{tag}.json"})
                write(root, f"raw/{tag}.json", {"iteration_seconds": [9.0, s[i]], "parameters": 1000})
        write(root, "runs.jsonl", records)
        rates, runs, setup = torch_report.analyse(root)
    goals = torch_report.goals(runs, "vgg16", ["1gbit"])
    expect("torch: DDP's recommended settings the faster: P3 against them, every round above: missed",
           any(g.startswith("- MISSED: gradsync P3 fp32 against DDP at its best (DDP gradient_as_bucket_view + "
                            "static_graph) at 1gbit: 1.06 x") for g in goals), True)
    table = torch_report.table(rates, runs, setup)
    expect("torch: PowerSGD in the table, without a wire bound (its bytes depend on the shapes)",
           "| vgg16 | 1gbit | DDP PowerSGD hook (rank 1) | 1.250 | 2 (1.200-1.300) | 25.60 | 1.19 | - | 1.19 | 0.54 |" in table,
           True)
    expect("torch: P3 below DDP in every round: met",
           any(g.startswith("- met: P3 fp32 against DDP at 1gbit: 0.89 x") for g in goals), True)
    expect("torch: P3 fp16's median below DDP fp16's, the spreads overlap: no claim",
           any(g.startswith("- no claim (the rounds' spreads overlap): P3 fp16 against DDP's fp16 hook") for g in goals), True)
    p3 = next(r for r in runs if r["contender"] == "p3")
    expect("torch: p3 rounds", (p3["rounds"], p3["spread_s"], round(p3["iteration_s"], 9)), (2, [2.0, 2.1], 2.05))


def check_helpers():
    one = {"ok": True, "rounds": 1, "spread_s": [1.0, 1.0]}
    two = {"ok": True, "rounds": 2, "spread_s": [2.0, 3.0]}
    expect("one round claims nothing", rounds.at_or_below(one, two), None)
    expect("every round above", rounds.at_or_below(two, {**two, "spread_s": [1.0, 1.9]}), False)
    expect("spread cell of one round", rounds.spread_cell(one), "1")


check_e2e()
check_torch()
check_helpers()
if failures:
    sys.exit("rounds merge FAILED:\n  " + "\n  ".join(failures))
print("rounds merge: the e2e and PyTorch reports give the median, the spread and at-or-below as the rounds say")
