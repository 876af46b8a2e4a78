"""The PyTorch sweep's report (sweep.sh): results.json, table.md with the goals measured, and
plots/throughput-<model>.png (throughput against link bandwidth, drawn by ../e2e/throughput.gp).

  report.py OUT                  reads OUT/runs.jsonl and OUT/raw/*.json
  report.py --median FILE N      the median iteration of one metrics file after N warm-up ones

Definitions (per model, nodes and link):
  iteration     median of rank 0's iterations after the warm-up (with --rounds: the median of the
                rounds' medians; "rounds" gives their number and spread)
  samples/s     batch per rank x ranks / iteration
  wire          the bytes a rank must send per iteration over the link rate: 2(N-1)/N x parameters
                x bits / 8 (ring all-reduce; DDP's too), bits 32 (fp32), 16 (fp16), 8.0625 (qsgd8:
                a 32-bit scale per 512 elements); unlimited links: the rate one TCP stream measured
  bound         max(compute only next to the runs, wire); x bound = iteration / bound
  x DDP         iteration / DDP's (fp16 contenders and the gradsync comm hooks: / DDP with its fp16 hook)
  DDP at its best  where ddp-view ran: the faster (median) of DDP's defaults and ddp-view; where
                ddp-view was the faster, the goals against DDP are stated against it as well
  goal <= 1 against DDP  met only where every round says so: the contender's slowest round no
                slower than DDP's fastest (MISSED: every round slower; one round or overlapping
                spreads: no claim; ../e2e/rounds.py)
"""
import json
import os
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from report import gnuplot, link_rates, load_json, setup_line, setup_of  # noqa: E402  the e2e sweep's helpers
from rounds import at_or_below, merge_rounds, spread_cell  # noqa: E402

ORDER = ["wfbp", "p3", "auto", "fusion", "p3-fp16", "p3-qsgd8", "ddp", "ddp-view", "ddp-fp16", "ddp-powersgd",
         "ddp-gs-fp16", "ddp-gs-qsgd8", "hooks", "compute"]
BITS = {"wfbp": 32, "p3": 32, "auto": 32, "fusion": 32, "p3-fp16": 16, "p3-qsgd8": 8.0625, "ddp": 32, "ddp-view": 32,
        "ddp-fp16": 16, "ddp-gs-fp16": 16, "ddp-gs-qsgd8": 8.0625,
        "ddp-powersgd": None}  # PowerSGD's bytes depend on each bucket's shapes: no wire bound
NAMES = {"wfbp": "gradsync WFBP", "p3": "gradsync P3 fp32", "auto": "gradsync default (slicing auto) fp32",
         "fusion": "gradsync fusion:25MiB fp32",
         "p3-fp16": "gradsync P3 fp16", "p3-qsgd8": "gradsync P3 qsgd8", "ddp": "DDP", "ddp-fp16": "DDP fp16 hook",
         "ddp-view": "DDP gradient_as_bucket_view + static_graph", "ddp-powersgd": "DDP PowerSGD hook (rank 1)",
         "ddp-gs-fp16": "DDP + gradsync hook fp16", "ddp-gs-qsgd8": "DDP + gradsync hook qsgd8",
         "hooks": "gradsync hooks, 1 node", "compute": "compute only"}


def median_after(metrics, warmup):
    return statistics.median(metrics["iteration_seconds"][warmup:])


def analyse(root):
    records = [json.loads(line) for line in open(os.path.join(root, "runs.jsonl")) if line.strip()]
    rates = link_rates(records)
    runs = []
    for r in records:
        if "contender" not in r:
            continue
        path = os.path.join(root, r["metrics"])
        ok = r["rc"] == 0 and os.path.exists(path)
        m = load_json(path) if ok else {}
        it = median_after(m, r["warmup"]) if ok else None
        runs.append({**r, "ok": ok, "iteration_s": it, "parameters": m.get("parameters"),
                     "blas": m.get("config", {}).get("blas"), "gradsync": m.get("gradsync", {})})
    runs = merge_rounds(runs, key=lambda r: (r["model"], r["link"], r["contender"]))
    for r in runs:
        r["samples_per_s"] = r["batch"] * r["nodes"] / r["iteration_s"] if r["ok"] else None
    setup = setup_of(records)
    for r in runs:  # the bounds, once every run is known
        compute = find(runs, r["model"], r["link"], "compute")
        bps = rates.get(r["link"], {}).get("bound_bps")
        wire = None
        if BITS.get(r["contender"]) and bps and r["parameters"]:
            n = r["nodes"]
            wire = 2 * (n - 1) / n * r["parameters"] * BITS[r["contender"]] / bps
        r["wire_s"] = wire
        r["bound_s"] = max(x for x in (compute, wire) if x) if (compute or wire) else None
    return rates, runs, setup


def find_run(runs, model, link, contender):
    """That run if it succeeded, or None (compute and hooks: on any link if not on this one)."""
    mine = [r for r in runs if r["model"] == model and r["contender"] == contender and r["ok"]]
    here = next((r for r in mine if r["link"] == link), None)
    return here or (mine[0] if mine and contender in ("compute", "hooks") else None)


def find(runs, model, link, contender):
    """The median iteration of that run, or None."""
    r = find_run(runs, model, link, contender)
    return r["iteration_s"] if r else None


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def goals(runs, model, links):
    """The goals for one model: one line each, measured, and whether it is met."""
    out = []
    get = lambda link, c: find(runs, model, link, c)
    bound = lambda link, c: next((r["bound_s"] for r in runs if r["model"] == model and r["link"] == link
                                  and r["contender"] == c and r["ok"]), None)

    def line(text, met, unmet="not measured"):
        out.append(f"- {'met' if met else 'MISSED' if met is False else unmet}: {text}")

    def versus(text, link, contender, other):  # a goal of at or below: met only if every round says so
        a, b = find_run(runs, model, link, contender), find_run(runs, model, link, other)
        if not a or not b:
            return line(text, None)
        why = "no claim (one round)" if min(a["rounds"], b["rounds"]) < 2 else "no claim (the rounds' spreads overlap)"
        line(text, at_or_below(a, b), why)

    for link in [l for l in ("1gbit", "300mbit") if l in links]:
        p3, b = get(link, "p3"), bound(link, "p3")
        line(f"P3 fp32 at {link}: {ratio(p3, b)} x max(compute only, wire) (goal <= 1.1)", p3 / b <= 1.1 if p3 and b else None)
    for link in links:
        p3, ddp = get(link, "p3"), get(link, "ddp")
        versus(f"P3 fp32 against DDP at {link}: {ratio(p3, ddp)} x DDP's iteration (goal <= 1)", link, "p3", "ddp")
        compute = get(link, "compute")
        if ddp and compute and 0.5 <= (ddp - compute) / compute <= 2:
            line(f"where DDP's communication ({ddp - compute:.2f} s) is about its compute ({compute:.2f} s), {link}: "
                 f"P3 {ratio(ddp, p3)}x faster (goal >= 1.3)", ddp / p3 >= 1.3 if p3 else None)
        auto = get(link, "auto")
        if auto:
            versus(f"gradsync's default (slicing auto) against DDP at {link}: {ratio(auto, ddp)} x (goal <= 1)",
                   link, "auto", "ddp")
        view = get(link, "ddp-view")
        if view and ddp and view < ddp:  # DDP at its best: its documented settings were the faster here
            for c in ("p3", "auto"):
                versus(f"{NAMES[c]} against DDP at its best ({NAMES['ddp-view']}) at {link}: "
                       f"{ratio(get(link, c), view)} x (goal <= 1)", link, c, "ddp-view")
        p3h, ddph = get(link, "p3-fp16"), get(link, "ddp-fp16")
        versus(f"P3 fp16 against DDP's fp16 hook at {link}: {ratio(p3h, ddph)} x (goal <= 1)", link, "p3-fp16", "ddp-fp16")
        hooked = get(link, "ddp-gs-qsgd8")
        if hooked:
            versus(f"DDP with gradsync's qsgd8 comm hook against DDP's fp16 hook at {link}: {ratio(hooked, ddph)} x (goal <= 1)",
                   link, "ddp-gs-qsgd8", "ddp-fp16")
    hooks, compute = get(links[0] if links else "", "hooks"), get(links[0] if links else "", "compute")
    line(f"gradsync's hooks on one node without communication: {ratio(hooks, compute)} x plain PyTorch (goal <= 1.03)",
         hooks <= 1.03 * compute if hooks and compute else None)
    return out


def table(rates, runs, setup):
    out = [setup_line(setup) + "| model | link | contender | iteration s | rounds (min-max s) | samples/s | x compute | wire s | x bound | x DDP |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    models = list(dict.fromkeys(r["model"] for r in runs))
    links = list(dict.fromkeys(r["link"] for r in runs))
    for model in models:
        for link in links:
            for c in ORDER:
                r = next((r for r in runs if r["model"] == model and r["link"] == link and r["contender"] == c), None)
                if not r:
                    continue
                if not r["ok"]:
                    out.append(f"| {model} | {link} | {NAMES[c]} | failed | | | | | | |")
                    continue
                ddp = find(runs, model, link, "ddp-fp16" if c in ("p3-fp16", "ddp-gs-fp16", "ddp-gs-qsgd8") else "ddp")
                it = r["iteration_s"]
                cells = [model, link, NAMES[c], f"{it:.3f}", spread_cell(r), f"{r['samples_per_s']:.2f}",
                         ratio(it, find(runs, model, link, "compute")), f"{r['wire_s']:.3f}" if r["wire_s"] else "-",
                         ratio(it, r["bound_s"]), ratio(it, ddp) if c in BITS else "-"]
                out.append("| " + " | ".join(cells) + " |")
    out.append("")
    for model in models:
        params = next((r["parameters"] for r in runs if r["model"] == model and r["parameters"]), None)
        out.append(f"**{model}** ({params / 1e6:.1f}M parameters)" if params else f"**{model}**")
        out += goals(runs, model, [l for l in links if any(r["link"] == l for r in runs if r["model"] == model)])
        out.append("")
    blas = sorted({r["blas"] for r in runs if r["blas"]})
    out.append(f"PyTorch's BLAS (every run): {', '.join(blas) or 'unknown'}. One TCP stream measured (Gbit/s): "
               + ", ".join(f"{l} {v['measured_bps'] / 1e9:.2f}" for l, v in rates.items() if v["measured_bps"]) + ".")
    return "\n".join(out) + "\n"


def throughput_plot(root, rates, runs, model):
    mine = [r for r in runs if r["model"] == model and r["ok"]]
    synced = [c for c in ORDER if c in BITS and any(r["contender"] == c for r in mine)]
    ceilings = [c for c in ("compute",) if any(r["contender"] == c for r in mine)]
    links = sorted({r["link"] for r in mine if r["contender"] in BITS},
                   key=lambda l: rates.get(l, {}).get("bound_bps") or float("inf"))
    if not links or not synced:
        return None
    os.makedirs(os.path.join(root, "plots"), exist_ok=True)
    path = os.path.join(root, "plots", f"throughput-{model}.dat")
    with open(path, "w") as f:
        f.write("\t".join(["link", "x"] + [NAMES[c] for c in synced + ceilings]) + "\n")
        for x, link in enumerate(links):
            cells = []
            for c in synced + ceilings:
                it = find(runs, model, link, c)
                cells.append(f"{mine[0]['batch'] * mine[0]['nodes'] / it:.3f}" if it else "?")
            f.write("\t".join([link, str(x)] + cells) + "\n")
    png = path[:-4] + ".png"
    gnuplot("throughput.gp", datafile=path, out=png, nlinks=len(links), npolicies=len(synced),
            ncols=2 + len(synced) + len(ceilings), title=f"{model}, {mine[0]['nodes']} nodes, PyTorch compute: "
                                                         "throughput against link bandwidth")
    return png


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--median":
        print(f"{median_after(load_json(sys.argv[2]), int(sys.argv[3])):.3f}")
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    rates, runs, setup = analyse(root)
    with open(os.path.join(root, "results.json"), "w") as f:
        json.dump({"setup": setup, "links": rates, "runs": runs}, f, indent=2)
    with open(os.path.join(root, "table.md"), "w") as f:
        f.write(table(rates, runs, setup))
    if shutil.which("gnuplot"):
        for model in dict.fromkeys(r["model"] for r in runs):
            throughput_plot(root, rates, runs, model)
    print(open(os.path.join(root, "table.md")).read())


if __name__ == "__main__":
    main()
