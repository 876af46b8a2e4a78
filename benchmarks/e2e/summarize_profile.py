"""Summarizes a profile.sh directory as markdown: per iteration of rank 0, where the CPU went in
the synchronized run next to compute only - by thread (/proc), by kind of code and by symbol
(perf), and forward / backward / wait_for + step from the --trace.
  summarize_profile.py DIR
(Not named profile.py: a script directory holding one shadows the standard module that
torch._dynamo imports through cProfile.)"""
import json
import os
import re
import statistics
import sys

WARMUP = 2
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# Kinds of code, first match wins (perf symbol names; [k] is the kernel).
KINDS = [
    ("GEMM (Eigen)", r"gebp|gemm|Eigen::internal"),
    ("Open MPI (pml/btl/opal progress)", r"mca_|opal_|ompi_|MPI_|PMPI_|pmix|event_"),
    ("kernel: network (tcp, veth, tbf)", r"\[k\].*(tcp|skb|sock|veth|netif|net_rx|ip_|__dev_|tbf|qdisc|napi|inet)"),
    ("kernel: scheduling, futex, yield", r"\[k\].*(sched|futex|yield|switch|hrtimer|nanosleep|finish_task|pick_next|idle)"),
    ("kernel: page faults, memory", r"\[k\].*(page|clear_|alloc|mm_|fault|folio|lru)"),
    ("kernel: other", r"\[k\]"),
    ("copies (memcpy/memmove/memset)", r"memcpy|memmove|memset"),
    ("codecs", r"codec|Qsgd|Half|encode|decode"),
    ("libc sched_yield / locks", r"sched_yield|pthread_|__lll|futex"),
]


def load(path):
    with open(path) as f:
        return json.load(f)


def cpu_accounting(prefix):
    """Differences over the perf window of profile.sh's cpu_times lines: {"threads": {tid: (CPU s,
    run-queue wait s)}, "ours": s, "machine": s, "steal": s}."""
    def read(path):
        threads, totals = {}, {}
        with open(path) as f:
            for line in f:
                v = line.split()
                if v[0] == "thread" and len(v) == 4:
                    threads[v[1]] = (int(v[2]) / 1e9, int(v[3]) / 1e9)
                elif v[0] == "ours" and len(v) == 2:  # absent without a cgroup v2 hierarchy
                    totals["ours"] = float(v[1])
                elif v[0] == "machine":
                    totals["machine"], totals["steal"] = int(v[1]) / CLOCK_TICKS, int(v[2]) / CLOCK_TICKS
        return threads, totals
    (t0, before), (t1, after) = read(prefix + ".cpu-before"), read(prefix + ".cpu-after")
    threads = {tid: (c - t0.get(tid, (0, 0))[0], w - t0.get(tid, (0, 0))[1]) for tid, (c, w) in t1.items()}
    return {"threads": threads, **{k: after[k] - before[k] for k in after}}


def perf_rows(path):
    """[(percent, symbol text)] from perf report --stdio output; with --sort tid,sym the text
    starts with the thread."""
    rows = []
    with open(path) as f:
        for line in f:
            m = re.match(r"\s+([\d.]+)%\s+(.*\S)", line)
            if m:
                rows.append((float(m.group(1)), m.group(2)))
    return rows


def kind_of(symbol):
    return next((name for name, pattern in KINDS if re.search(pattern, symbol)), "other (trainer kernels, ...)")


def trace_split(path, rank=0):
    """Median seconds per iteration after warm-up of rank 0's forward, backward and wait_for + step spans."""
    spans = sorted((e for e in load(path)["traceEvents"] if e["pid"] == rank and e["tid"] == 0), key=lambda e: e["ts"])
    iterations, current = [], None
    for e in spans:
        if e["name"] == "forward input":
            current = {"forward": 0.0, "backward": 0.0, "wait_for + step": 0.0}
            iterations.append(current)
        if current is None:
            continue
        part = "wait_for + step" if e["name"].startswith("wait_for") else e["name"].split()[0]
        if part in current:
            current[part] += e["dur"] / 1e6
    counted = iterations[WARMUP:-1] or iterations  # the last one has no next forward to close it
    return {k: statistics.median(i[k] for i in counted) for k in ("forward", "backward", "wait_for + step")}


def main():
    root = sys.argv[1]
    sync_metrics, compute_metrics = load(os.path.join(root, "metrics.json")), load(os.path.join(root, "compute-metrics.json"))
    policies = sync_metrics["config"]["policies"]
    it_sync = statistics.median(sync_metrics["iteration_seconds"][WARMUP:])
    it_compute = statistics.median(compute_metrics["iteration_seconds"][WARMUP:])
    print(f"## Rank 0 of {sync_metrics['config']['model']} x{sync_metrics['config']['width']}, "
          f"{policies['slicing']} / {policies['priority']} / {policies['codec']} / {policies['collective']}\n")
    print(f"Iteration (median after {WARMUP} warm-up): synchronized {it_sync:.3f} s, compute only {it_compute:.3f} s.\n")

    runs = {"sync": it_sync, "compute": it_compute}
    acct = {name: cpu_accounting(os.path.join(root, name)) for name in runs}
    window = {name: window_seconds(root, name) for name in runs}
    iterations = {name: window[name] / runs[name] for name in runs}  # in the perf window
    per_it = {name: sum(c for c, _ in acct[name]["threads"].values()) / iterations[name] for name in runs}

    print("### The machine during the perf window (cores busy, on average)\n")
    print("| | synchronized | compute only |\n|---|---|---|")
    for label, f in [("all processes (/proc/stat)", lambda a: a["machine"]),
                     ("this topology's processes (every rank, mpirun, daemons)", lambda a: a.get("ours")),
                     ("everything else on the machine", lambda a: a["machine"] - a["ours"] if "ours" in a else None),
                     ("of which stolen by the hypervisor", lambda a: a["steal"])]:
        cells = [f(acct[name]) for name in ("sync", "compute")]
        print(f"| {label} | " + " | ".join("-" if c is None else f"{c / window[n]:.2f}"
                                           for c, n in zip(cells, ("sync", "compute"))) + " |")
    print()

    print("### Rank 0's CPU seconds per iteration, by kind of code (perf cpu-clock samples x its CPU time)\n")
    print("| kind | synchronized | compute only | difference |\n|---|---|---|---|")
    kinds = {}
    for name in runs:
        for pct, sym in perf_rows(os.path.join(root, name + ".symbols.txt")):
            kinds.setdefault(kind_of(sym), {}).setdefault(name, 0.0)
            kinds[kind_of(sym)][name] += pct / 100 * per_it[name]
    for kind, v in sorted(kinds.items(), key=lambda kv: -kv[1].get("sync", 0)):
        s, c = v.get("sync", 0), v.get("compute", 0)
        print(f"| {kind} | {s:.3f} | {c:.3f} | {s - c:+.3f} |")
    print(f"| **all (rank 0's threads)** | **{per_it['sync']:.3f}** | **{per_it['compute']:.3f}** "
          f"| **{per_it['sync'] - per_it['compute']:+.3f}** |\n")
    print("(Symbols under 0.5 % of the samples are left out of the kinds, so their sum is a little under the total.)\n")

    print("### Rank 0's threads: seconds per iteration on a core and waiting for one (run queue)\n")
    print("| run | thread | on a core | waiting for a core | top symbols (% of the run's samples) |\n|---|---|---|---|---|")
    for name in runs:
        by_thread = {}
        for pct, text in perf_rows(os.path.join(root, name + ".threads-symbols.txt")):
            m = re.match(r"(\d+):\S+\s+(.*)", text)
            if m:
                by_thread.setdefault(m.group(1), []).append((pct, m.group(2)))
        for tid, (on, waiting) in sorted(acct[name]["threads"].items(), key=lambda kv: -kv[1][0]):
            if on + waiting < 0.01 * window[name]:
                continue
            top = "; ".join(f"{sym.replace('|', '/')[:60]} {pct:.1f}" for pct, sym in by_thread.get(tid, [])[:4])
            print(f"| {name} | {tid} | {on / iterations[name]:.3f} | {waiting / iterations[name]:.3f} | {top} |")
    print()

    print("### Symbols (synchronized run, % of rank 0's samples)\n")
    print("| % | symbol |\n|---|---|")
    for pct, sym in perf_rows(os.path.join(root, "sync.symbols.txt"))[:25]:
        print(f"| {pct:.2f} | `{sym[:110]}` |")
    print()

    sync_trace, compute_trace = trace_split(os.path.join(root, "trace.json")), trace_split(os.path.join(root, "compute-trace.json"))
    print("### Rank 0's compute lane from --trace (median seconds per iteration)\n")
    print("| part | synchronized | compute only |\n|---|---|---|")
    for k in sync_trace:
        print(f"| {k} | {sync_trace[k]:.3f} | {compute_trace[k]:.3f} |")
    fb_s, fb_c = sync_trace["forward"] + sync_trace["backward"], compute_trace["forward"] + compute_trace["backward"]
    print(f"| forward + backward | {fb_s:.3f} | {fb_c:.3f} ({fb_s / fb_c:.2f}x) |")


def window_seconds(root, name):
    """How long perf recorded (profile.sh writes it)."""
    with open(os.path.join(root, name + ".window")) as f:
        return float(f.read())


if __name__ == "__main__":
    main()
