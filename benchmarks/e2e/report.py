"""Turns a sweep's results directory (runs.jsonl + raw/) into results.json, table.md and plots:
plots/throughput-<model>.png (images/s against link bandwidth for every policy, like P3's Figure 7) and
plots/timeline-<model>-<link>-<policy>.png (node 0's link over three iterations, like P3's Figure 8).
  report.py DIR [--timeline-link 1gbit] [--accuracy 0.85]
            (timeline default: 1gbit if swept, else the slowest link; --accuracy: also the time to
            that test accuracy of every run that evaluated, sweep.sh --accuracy)
  report.py --median METRICS.json WARMUP  (the median iteration after warm-up, for progress lines)

Definitions (per model and link; N ranks, P parameters, b bits per element on the wire):
  iteration  median wall time of rank 0's iterations after warm-up; with sweep.sh --rounds R the
             median of the R rounds' medians, "rounds" giving their spread (min-max); the other
             columns are those of the round nearest that median (rounds.py)
  busy       median of (iteration - time blocked in wait_for): forward + backward + step as run
             next to the communication (gradsync only; compare with compute only)
  CPU        median CPU seconds per iteration of rank 0's whole process (every thread: compute,
             gradsync's executors or DDP's reducer, MPI's or gloo's, the kernel's TCP work charged
             to it), with rounds the median of the rounds'; x DDP CPU: its ratio to DDP's;
             results.json's cpu_overhead_s: CPU less that of the same trainer's compute only
  wire       2 (N-1)/N * P * b / 8 bytes that each rank must send per iteration (ring all-reduce,
             and a parameter server sharded over all ranks alike), over the link rate (tc's
             nominal rate; for an unlimited link the rate one TCP stream measured)
  bound      max(compute only of the same trainer, wire); ratios are iteration / bound and
             iteration / DDP's iteration on the same link (x DDP fp16: / DDP with its fp16 hook's)
  <=         after x DDP or x DDP fp16: at or below DDP in every round - the run's slowest round no
             slower than DDP's fastest. Never for one round, nor where the rounds' spreads
             overlap: the ratio of the medians alone claims nothing
  overhead   iteration - compute only of the same trainer: what synchronizing costs it
  bound at line rate  (gradsync, shaped links) max(compute only while every link carries TCP at
             line rate in both directions, wire): the kernel moves those bytes (veth, bridge, tbf,
             TCP) on the ranks' own cores, so no synchronization can beat the compute left to them
  node 0 sent  bytes node 0's link carried per counted iteration (link counters, so with TCP/IP
             and MPI or gloo headers), and their average rate
  others     cores that processes outside the run kept busy during it (a build, say): timings
             are only comparable between runs with similar values
  time to accuracy  rank 0's training seconds (the sum of its iteration times, evaluations not
             counted: gradsync-train's evaluations[].train_seconds, and ddp.py's alike) until its
             first evaluation at or above the target
The PyTorch side's version, BLAS (with its measured GFLOP/s), threads, buckets and hooks come from
ddp.py's metrics (config) and head each model's table."""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys

from rounds import at_or_below, merge_rounds, spread_cell

HERE = os.path.dirname(os.path.abspath(__file__))
COMPUTE = ["compute", "compute-traffic", "ddp-compute"]  # the compute-only runs, before each model's runs on each link
NAMES = {"compute": "gradsync compute only", "compute-traffic": "gradsync compute at line-rate traffic",
         "ddp-compute": "DDP compute only"}
GRADSYNC_ORDER = ["default", "wfbp", "p3", "p3-fp16", "p3-qsgd8", "p3-ef-qsgd4", "p3-onebit", "p3-topk", "ps", "p3-mpi", "p3-gloo",
                  "wfbp-gloo", "p3-gloo-i8"]
DDP_ORDER = ["ddp", "ddp-fp16", "ddp-powersgd"]
POLICY_ORDER = COMPUTE + GRADSYNC_ORDER + DDP_ORDER


def policy_key(policy):
    """Known policies in POLICY_ORDER, then those a sweep defined itself (--define), by name."""
    return (POLICY_ORDER.index(policy), "") if policy in POLICY_ORDER else (len(POLICY_ORDER), policy)


def load_json(path):
    with open(path) as f:
        return json.load(f)


def measured(metrics, warmup):
    """(median iteration, median busy or None, iterations counted, median process CPU or None)
    from either trainer's metrics."""
    its = metrics["iteration_seconds"][warmup:]
    waits = metrics.get("iteration_wait_seconds", [])[warmup:]
    busy = statistics.median(i - w for i, w in zip(its, waits)) if waits else None
    cpu = metrics.get("iteration_process_cpu_seconds", [])[warmup:]
    return statistics.median(its), busy, len(its), statistics.median(cpu) if cpu else None


def nominal_bps(link):
    m = re.fullmatch(r"(\d+)(k|m|g)bit", link)
    return int(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else None


def setup_of(records):
    """Where and on what the sweep ran (record_machine's line and the sweep's own settings)."""
    return {k: v for r in records if "machine" in r or "rounds" in r for k, v in r.items()}


def setup_line(setup):
    """The machine, commit and date of a sweep, for the head of its table ("" for older results)."""
    if not setup:
        return ""
    line = (f"Measured on {setup.get('machine')} ({setup.get('cores')} cores, {setup.get('memory_gib')} GiB), commit "
            f"{str(setup.get('commit'))[:12]}{' with local changes' if setup.get('tree_changed') else ''}, "
            f"{setup.get('compiler')}, {setup.get('date')}")
    if setup.get("torch"):
        line += f"; PyTorch {setup['torch']} ({setup.get('python')}), {setup.get('threads')} thread(s) per rank"
    if setup.get("rounds"):
        line += f"; {setup['rounds']} round(s) of every run"
    return line + ".\n\n"


def link_rates(records):
    """Per link: the rate the bound uses and the rate one TCP stream measured."""
    rates = {}
    for r in records:
        if "measured_bps" in r:
            nominal = nominal_bps(r["link"])
            rates[r["link"]] = {"nominal_bps": nominal, "measured_bps": r["measured_bps"],
                                "bound_bps": nominal or r["measured_bps"] or None}
    return rates


def node0_sent(samples_path, start, end):
    """(bytes, seconds) node 0 sent between two Unix times, from linkmon's counters (with TCP/IP
    and MPI/gloo headers: what really crossed the link)."""
    inside = [r for r in read_samples(samples_path) if start <= r[0] <= end]
    if len(inside) < 2:
        return None, None
    return inside[-1][1] - inside[0][1], inside[-1][0] - inside[0][0]


def read_samples(path):
    """[(unix, node0 tx bytes, node0 rx bytes)] from a linkmon file."""
    rows = []
    try:
        with open(path) as f:
            next(f)
            for line in f:
                v = line.split("\t")
                rows.append((float(v[0]), int(v[1]), int(v[2])))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return rows


def analyse(root, accuracy=None):
    records = [json.loads(line) for line in open(os.path.join(root, "runs.jsonl")) if line.strip()]
    rates = link_rates(records)
    runs = []
    for r in records:
        if "policy" not in r:
            continue
        run = {k: r[k] for k in ("model", "width", "nodes", "link", "policy", "kind", "bits", "rc")}
        run["others_cores"] = r.get("others_cores")
        run["round"] = r.get("round", 1)
        path = os.path.join(root, r["metrics"])
        run["ok"] = r["rc"] == 0 and os.path.exists(path)
        if run["ok"]:
            m = load_json(path)
            run["iteration_s"], run["busy_s"], run["counted"], run["cpu_s"] = measured(m, r["warmup"])
            run["parameters"] = m["parameters"]
            run["batch_per_rank"] = m["config"]["batch_per_rank"]
            sent = m.get("sync", {}).get("rank0_bytes_sent")  # gradsync's own count (payload)
            run["rank0_payload_mb_per_iteration"] = sent / m["iterations"] / 1e6 if sent is not None else None
            its = m["iteration_seconds"]
            start = m["first_iteration_unix"] + sum(its[: r["warmup"]])
            run["window_unix"] = [start, m["first_iteration_unix"] + sum(its)]
            run["iteration_ends_unix"] = [m["first_iteration_unix"] + sum(its[: i + 1]) for i in range(len(its))]
            wire, seconds = node0_sent(os.path.join(root, r["samples"]), *run["window_unix"])
            run["node0_wire_mb_per_iteration"] = wire / 1e6 / run["counted"] if wire is not None else None
            run["node0_tx_gbps"] = wire * 8 / seconds / 1e9 if wire is not None else None
            run["samples"] = r["samples"]
            run["evaluations"] = m.get("evaluations", [])
            run["test_accuracy"] = m.get("test_accuracy")
            target = accuracy if accuracy is not None else r.get("accuracy")
            if target is not None:
                reached = next((e for e in run["evaluations"] if e["test_accuracy"] >= target), None)
                run["accuracy_target"] = target
                run["iterations_to_accuracy"] = reached and reached["iteration"]
                run["seconds_to_accuracy"] = reached and reached["train_seconds"]
            if r["kind"] == "ddp":  # the PyTorch side's settings: version, BLAS, threads, buckets, hook
                run["peer"] = {k: v for k, v in m["config"].items() if k not in ("model", "width", "iterations")}
        runs.append(run)
    runs = merge_rounds(runs, key=lambda r: (r["model"], r["link"], r["policy"]))
    for r in runs:
        if r["ok"]:
            r["images_per_s"] = r["nodes"] * r["batch_per_rank"] / r["iteration_s"]

    for model in {r["model"] for r in runs}:
        counts = {(r["kind"], r["parameters"]) for r in runs if r["model"] == model and r["ok"]}
        if len({n for _, n in counts}) > 1:
            sys.exit(f"report: the {model}s differ: parameters {sorted(counts)} (ddp.py must build "
                     "trainer/src/models.cpp's model)")

    compute = {(r["model"], r["link"], r["policy"]): r for r in runs if r["policy"] in COMPUTE and r["ok"]}
    ddp = {(r["model"], r["link"], r["policy"]): r for r in runs if r["policy"] in DDP_ORDER and r["ok"]}
    for r in runs:
        if not r["ok"] or r["policy"] in COMPUTE:
            continue
        n, rate = r["nodes"], rates.get(r["link"], {}).get("bound_bps")
        bits = r["bits"] if isinstance(r["bits"], (int, float)) else None  # PowerSGD's: "variable"
        must_send = 2 * (n - 1) / n * r["parameters"] * bits / 8 if bits else None
        r["must_send_mb"] = must_send / 1e6 if bits else None
        r["wire_s"] = must_send * 8 / rate if rate and bits else None
        c = compute.get((r["model"], r["link"], "ddp-compute" if r["kind"] == "ddp" else "compute"))
        r["compute_only_s"] = c["iteration_s"] if c else None
        r["overhead_s"] = r["iteration_s"] - c["iteration_s"] if c else None
        r["cpu_overhead_s"] = r["cpu_s"] - c["cpu_s"] if c and r["cpu_s"] and c["cpu_s"] else None
        parts = [x for x in (r["compute_only_s"], r["wire_s"]) if x]
        r["bound_s"] = max(parts) if parts else None
        r["ratio_to_bound"] = r["iteration_s"] / r["bound_s"] if r["bound_s"] else None
        t = compute.get((r["model"], r["link"], "compute-traffic")) if r["kind"] == "gradsync" else None
        r["line_rate_bound_s"] = max(t["iteration_s"], r["wire_s"] or 0) if t else None
        r["ratio_to_line_rate_bound"] = r["iteration_s"] / r["line_rate_bound_s"] if t else None
        d = ddp.get((r["model"], r["link"], "ddp"))
        r["ratio_to_ddp"] = r["iteration_s"] / d["iteration_s"] if d else None
        r["cpu_ratio_to_ddp"] = r["cpu_s"] / d["cpu_s"] if d and r["cpu_s"] and d["cpu_s"] else None
        r["at_or_below_ddp"] = at_or_below(r, d)
        d = ddp.get((r["model"], r["link"], "ddp-fp16"))
        r["ratio_to_ddp_fp16"] = r["iteration_s"] / d["iteration_s"] if d else None
        r["at_or_below_ddp_fp16"] = at_or_below(r, d)
    return rates, runs


def fmt(v, digits=2, suffix=""):
    return "-" if v is None else f"{v:.{digits}f}{suffix}"


def link_key(rates):
    """Links from slowest to fastest (unlimited last)."""
    return lambda link: rates.get(link, {}).get("nominal_bps") or math.inf


def table(rates, runs):
    out = []
    for model in dict.fromkeys(r["model"] for r in runs):
        mine = [r for r in runs if r["model"] == model]
        first = next((r for r in mine if r["ok"]), None)
        out.append(f"### {model} (width {mine[0]['width']}, {fmt(first and first['parameters'] / 1e6, 1)} M parameters, "
                   f"{mine[0]['nodes']} nodes)\n")
        out += peers(mine)
        out.append("| link | run | iteration (s) | rounds (min-max s) | busy (s) | CPU (s) | x DDP CPU | wire bound (s) "
                   "| bound (s) | x bound "
                   "| overhead (s) | bound at line rate (s) | x it | x DDP | x DDP fp16 "
                   "| node 0 sent MB/iter | node 0 sends (Gbit/s) | others (cores) |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in sorted(mine, key=lambda r: (link_key(rates)(r["link"]), policy_key(r["policy"]))):
            name = NAMES.get(r["policy"], r["policy"])
            if not r["ok"]:
                out.append(f"| {r['link']} | {name} | FAILED (status {r['rc']}) | {r['rounds']} | | | | | | | | | | | | | | |")
                continue
            out.append(f"| {r['link']} | {name} | {fmt(r['iteration_s'], 3)} | {spread_cell(r)} | {fmt(r['busy_s'], 3)} "
                       f"| {fmt(r.get('cpu_s'), 3)} | {fmt(r.get('cpu_ratio_to_ddp'))} | {fmt(r.get('wire_s'), 3)} | {fmt(r.get('bound_s'), 3)} | {fmt(r.get('ratio_to_bound'))} "
                       f"| {fmt(r.get('overhead_s'), 3)} "
                       f"| {fmt(r.get('line_rate_bound_s'), 3)} | {fmt(r.get('ratio_to_line_rate_bound'))} "
                       f"| {fmt(r.get('ratio_to_ddp'))}{marker(r.get('at_or_below_ddp'))} "
                       f"| {fmt(r.get('ratio_to_ddp_fp16'))}{marker(r.get('at_or_below_ddp_fp16'))} "
                       f"| {fmt(r['node0_wire_mb_per_iteration'], 1)} "
                       f"| {fmt(r['node0_tx_gbps'])} | {fmt(r['others_cores'])} |")
        if any(r["rounds"] > 1 for r in mine):
            out.append("\n<= after x DDP: at or below it in every round (the run's slowest round no slower than "
                       "DDP's fastest); no mark: the rounds do not support that claim.")
        out.append("")
        out += accuracy_table(rates, mine)
    links = ", ".join(f"{k} {fmt(v['measured_bps'] / 1e9 if v['measured_bps'] else None)}"
                      for k, v in sorted(rates.items(), key=lambda kv: link_key(rates)(kv[0])))
    out.append(f"One TCP stream measured (Gbit/s): {links}.\n")
    return "\n".join(out)


def marker(at_or_below_it):
    return " <=" if at_or_below_it else ""


def peers(runs):
    """Lines naming the PyTorch side as it ran: version, BLAS and its speed, threads, buckets, hooks."""
    by_policy = {r["policy"]: r["peer"] for r in runs if r.get("peer")}
    if not by_policy:
        return []
    first = next(iter(by_policy.values()))
    blas = first["blas"]
    out = [f"PyTorch side: PyTorch {blas['torch']} on {blas['blas']} (1024x1024 fp32 matmul "
           f"{blas['matmul_gflops_1thread']} GFLOP/s on 1 thread), {first['threads']} thread(s) per rank"
           + (f" (OpenBLAS {blas['blas_threads']})." if blas["blas_threads"] is not None else ".")]
    for policy, p in sorted(by_policy.items(), key=lambda kv: policy_key(kv[0])):
        if policy == "ddp-compute":
            continue
        hook = p.get("hook") or "none (fp32)"
        extra = "".join(f", {k} {p[k]}" for k in ("matrix_approximation_rank", "start_powerSGD_iter", "warm_start",
                                                 "use_error_feedback") if k in p)
        buckets = f"one bucket of {p['bucket_mb']} MB" if p.get("first_bucket_mb") else f"buckets of {p['bucket_mb']} MB"
        out.append(f"- {policy}: DDP over gloo, {buckets}, hook {hook}{extra}")
    return out + [""]


def accuracy_table(rates, runs):
    """Time to the target accuracy, per link, fastest first (runs that evaluated)."""
    mine = [r for r in runs if r["ok"] and r.get("evaluations")]
    if not mine:
        return []
    target = next((r["accuracy_target"] for r in mine if "accuracy_target" in r), None)
    out = [f"Time to {target} test accuracy (rank 0's training seconds, evaluations not counted):\n" if target
           else "Test accuracy (no --accuracy target):\n",
           "| link | run | iterations to target | seconds to target | x fastest | final test accuracy | evaluations |",
           "|---|---|---|---|---|---|---|"]
    for link in sorted({r["link"] for r in mine}, key=link_key(rates)):
        here = [r for r in mine if r["link"] == link]
        times = [r["seconds_to_accuracy"] for r in here if r.get("seconds_to_accuracy")]
        fastest = min(times) if times else None
        for r in sorted(here, key=lambda r: (r.get("seconds_to_accuracy") or math.inf, policy_key(r["policy"]))):
            t = r.get("seconds_to_accuracy")
            out.append(f"| {link} | {r['policy']} | {r.get('iterations_to_accuracy') or 'not reached'} | {fmt(t, 1)} "
                       f"| {fmt(t / fastest if t and fastest else None)} | {fmt(r['test_accuracy'], 4)} "
                       f"| {len(r['evaluations'])} |")
    return out + [""]


def gnuplot(script, **params):
    def value(v):  # a gnuplot string literal, or a number as is
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' if isinstance(v, str) else v
    args = "; ".join(f"{k}={value(v)}" for k, v in params.items())
    subprocess.run(["gnuplot", "-e", args, os.path.join(HERE, script)], check=True)


def throughput_plot(root, rates, runs, model):
    mine = [r for r in runs if r["model"] == model and r["ok"]]
    # The synchronized policies first, then the compute-only runs (drawn dashed: the ceilings).
    defined = sorted({r["policy"] for r in mine} - set(POLICY_ORDER), key=policy_key)
    columns = [p for p in GRADSYNC_ORDER + defined + DDP_ORDER + COMPUTE if any(r["policy"] == p for r in mine)]
    links = sorted({r["link"] for r in mine}, key=link_key(rates))
    if not links:
        return None
    path = os.path.join(root, "plots", f"throughput-{model}.dat")
    with open(path, "w") as f:
        f.write("\t".join(["link", "x"] + [NAMES.get(p, p) for p in columns]) + "\n")
        for x, link in enumerate(links):
            by_policy = {r["policy"]: r["images_per_s"] for r in mine if r["link"] == link}
            cells = [f"{by_policy[p]:.3f}" if p in by_policy else "?" for p in columns]
            label = link if rates[link]["nominal_bps"] else f"{link} ({rates[link]['measured_bps'] / 1e9:.1f}G)"
            f.write("\t".join([label, str(x)] + cells) + "\n")
    png = path[:-4] + ".png"
    policies = sum(p not in COMPUTE for p in columns)
    gnuplot("throughput.gp", datafile=path, out=png, nlinks=len(links), npolicies=policies, ncols=2 + len(columns),
            title=f"{model}, {mine[0]['nodes']} nodes: throughput against link bandwidth")
    return png


def timeline_plot(root, rates, run, iterations=3):
    """Node 0's send and receive rate in 10 ms bins over the first `iterations` after warm-up."""
    start = run["window_unix"][0]
    ends = [t for t in run["iteration_ends_unix"] if t > start][:iterations]
    if not ends:
        return None
    rows = [r for r in read_samples(os.path.join(root, run["samples"])) if start - 0.05 <= r[0] <= ends[-1] + 0.05]
    path = os.path.join(root, "plots", f"timeline-{run['model']}-{run['link']}-{run['policy']}.dat")
    with open(path, "w") as f:
        f.write("seconds\tsends\treceives\n")
        bin_start = 0
        for i in range(1, len(rows)):
            dt = rows[i][0] - rows[bin_start][0]
            if dt >= 0.01:
                tx = (rows[i][1] - rows[bin_start][1]) * 8 / dt / 1e9
                rx = (rows[i][2] - rows[bin_start][2]) * 8 / dt / 1e9
                f.write(f"{rows[bin_start][0] - start:.4f}\t{tx:.4f}\t{rx:.4f}\n")
                bin_start = i
    png = path[:-4] + ".png"
    gnuplot("timeline.gp", datafile=path, out=png, marks=" ".join(f"{t - start:.3f}" for t in ends),
            ymax=1.15 * rates[run["link"]]["bound_bps"] / 1e9,
            title=f"{run['model']} {run['policy']} at {run['link']}: node 0's link over {len(ends)} iterations "
                  f"(dashed: iteration ends)")
    return png


def main():
    if sys.argv[1:2] == ["--median"]:
        print(f"{measured(load_json(sys.argv[2]), int(sys.argv[3]))[0]:.3f}")
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--timeline-link")
    ap.add_argument("--accuracy", type=float, help="the target of time to accuracy (default: the sweep's --accuracy)")
    a = ap.parse_args()
    rates, runs = analyse(a.dir, a.accuracy)
    setup = setup_of([json.loads(line) for line in open(os.path.join(a.dir, "runs.jsonl")) if line.strip()])
    os.makedirs(os.path.join(a.dir, "plots"), exist_ok=True)
    with open(os.path.join(a.dir, "results.json"), "w") as f:
        json.dump({"setup": setup, "links": rates, "runs": runs}, f, indent=2)
    text = setup_line(setup) + table(rates, runs)
    with open(os.path.join(a.dir, "table.md"), "w") as f:
        f.write(text)
    print(text)
    swept = sorted(rates, key=link_key(rates))
    timeline_link = a.timeline_link or ("1gbit" if "1gbit" in rates else swept[0] if swept else None)
    plots = [throughput_plot(a.dir, rates, runs, m) for m in dict.fromkeys(r["model"] for r in runs)]
    plots += [timeline_plot(a.dir, rates, r) for r in runs
              if r["ok"] and r["link"] == timeline_link and r["policy"] not in COMPUTE]
    print("plots:", " ".join(os.path.basename(p) for p in plots if p))


if __name__ == "__main__":
    main()
