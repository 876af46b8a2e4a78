#!/usr/bin/env python3
"""validate.sh's report: OUT/raw/<model>.r<round>.<link>.metrics.json (gradsync-train --metrics),
.sim.json, .own.sim.json and .noskew.sim.json (gradsync-sim --json on the profile run's profile, on the
run's own profile, and on the profile run's with --no-rank-skew),
.load -> OUT/results.json, OUT/table.md and OUT/iteration.png (gnuplot: iteration time against
link bandwidth, measured points and simulated curves).

measured = median of rank 0's iteration times after the warm-up (per round; the median over rounds);
simulated = gradsync-sim's steady iteration time; error = simulated / measured - 1."""
import argparse, glob, json, os, re, statistics, subprocess

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--warmup", type=int, default=4)
args = ap.parse_args()
raw = os.path.join(args.out, "raw")


def mbit(link):
    m = re.fullmatch(r"([0-9.]+)(k|m|g)bit", link)
    return float(m.group(1)) * {"k": 1e-3, "m": 1, "g": 1e3}[m.group(2)]


def measured(name):
    m = json.load(open(os.path.join(raw, name + ".metrics.json")))
    it, wait = m["iteration_seconds"][args.warmup:], m["iteration_wait_seconds"][args.warmup:]
    return {"iteration": statistics.median(it), "busy": statistics.median(a - b for a, b in zip(it, wait)),
            "wait": statistics.median(wait), "parameters": m["parameters"], "config": m["config"],
            "others": float(open(os.path.join(raw, name + ".load")).read())}


def simulated(name):
    s = json.load(open(os.path.join(raw, name + ".sim.json")))
    return {"iteration": s["steady_iteration_seconds"], "compute": s["compute_seconds_per_iteration"],
            "wire": s["wire_seconds_per_iteration"]}


runs = {}  # model -> link -> [round results]
for path in sorted(glob.glob(os.path.join(raw, "*.metrics.json"))):
    name = os.path.basename(path)[: -len(".metrics.json")]
    model, rnd, link = name.split(".", 2)
    if link == "profile":
        continue
    r = {"round": rnd, "measured": measured(name), "profile_run": measured(f"{model}.{rnd}.profile"),
         "sim": simulated(name), "sim_own": simulated(name + ".own"), "sim_noskew": simulated(name + ".noskew")}
    runs.setdefault(model, {}).setdefault(link, []).append(r)
if not runs:
    raise SystemExit(f"report: no runs in {raw}")


def med(rs, *keys):
    vals = []
    for r in rs:
        for k in keys:
            r = r[k]
        vals.append(r)
    return statistics.median(vals)


summary = {}
lines = ["| model | link | measured (s) | simulated (s) | error | simulated, run's own compute (s) | error | "
         "simulated, no rank skew (s) | error | measured busy (s) | profile compute (s) | simulated wire (s) | "
         "others (cores) | rounds |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for model, links in runs.items():
    for link in sorted(links, key=mbit):
        rs = links[link]
        s = {"mbit": mbit(link), "measured": med(rs, "measured", "iteration"), "simulated": med(rs, "sim", "iteration"),
             "simulated_own": med(rs, "sim_own", "iteration"), "simulated_noskew": med(rs, "sim_noskew", "iteration"),
             "busy": med(rs, "measured", "busy"),
             "wait": med(rs, "measured", "wait"), "compute": med(rs, "sim", "compute"),
             "compute_own": med(rs, "sim_own", "compute"), "wire": med(rs, "sim", "wire"),
             "others": med(rs, "measured", "others"), "rounds": len(rs), "parameters": rs[0]["measured"]["parameters"],
             "width": rs[0]["measured"]["config"]["width"]}
        s["error"] = s["simulated"] / s["measured"] - 1
        s["error_own"] = s["simulated_own"] / s["measured"] - 1
        s["error_noskew"] = s["simulated_noskew"] / s["measured"] - 1
        summary.setdefault(model, {})[link] = s
        lines.append(f"| {model} x{s['width']:g} ({s['parameters'] / 1e6:.2f} M) | {link} | {s['measured']:.3f} | "
                     f"{s['simulated']:.3f} | {100 * s['error']:+.1f}% | {s['simulated_own']:.3f} | "
                     f"{100 * s['error_own']:+.1f}% | {s['simulated_noskew']:.3f} | {100 * s['error_noskew']:+.1f}% | "
                     f"{s['busy']:.3f} | {s['compute']:.3f} | {s['wire']:.3f} | "
                     f"{s['others']:.2f} | {s['rounds']} |")
worst = max(abs(s["error"]) for links in summary.values() for s in links.values())
lines += ["", f"Largest |error| (profile run's compute): {100 * worst:.1f}%.", "", "Per round (the machine is shared: "
          "compute moves between runs):", "",
          "| model | link | round | measured (s) | busy (s) | wait (s) | simulated (s) | error | own compute (s) | "
          "simulated, own (s) | error | profile run (s) | its compute (s) |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
for model, links in runs.items():
    for link in sorted(links, key=mbit):
        for r in links[link]:
            m, sp, so = r["measured"], r["sim"], r["sim_own"]
            lines.append(f"| {model} | {link} | {r['round']} | {m['iteration']:.3f} | {m['busy']:.3f} | {m['wait']:.3f} | "
                         f"{sp['iteration']:.3f} | {100 * (sp['iteration'] / m['iteration'] - 1):+.1f}% | "
                         f"{so['compute']:.3f} | {so['iteration']:.3f} | {100 * (so['iteration'] / m['iteration'] - 1):+.1f}% | "
                         f"{r['profile_run']['iteration']:.3f} | {sp['compute']:.3f} |")
open(os.path.join(args.out, "table.md"), "w").write("\n".join(lines) + "\n")
json.dump({"summary": summary, "runs": runs}, open(os.path.join(args.out, "results.json"), "w"), indent=1)
print("\n".join(lines))

# iteration.png: one panel per model, iteration time against the link (log scale).
dat = os.path.join(args.out, "iteration.dat")
with open(dat, "w") as f:
    for model, links in summary.items():
        f.write(f'"{model}"\n')
        for link in sorted(links, key=mbit):
            s = links[link]
            f.write(f"{s['mbit']} {s['measured']} {s['simulated']} {s['simulated_own']}\n")
        f.write("\n\n")
models = list(summary)
gp = [f'set terminal pngcairo size {520 * len(models)},460 noenhanced', f'set output "{args.out}/iteration.png"',
      f"set multiplot layout 1,{len(models)}", "set logscale x", "set grid", "set key top right",
      'set xlabel "link bandwidth per rank pair (Mbit/s)"', 'set ylabel "iteration time (s)"', "set yrange [0:*]"]
for i, model in enumerate(models):
    gp += [f'set title "{model}: gradsync-train measured vs gradsync-sim"',
           f'plot "{dat}" index {i} using 1:2 with linespoints lw 2 pt 7 title "measured", '
           f'"" index {i} using 1:3 with linespoints lw 2 dt 2 pt 4 title "simulated (profile run)", '
           f'"" index {i} using 1:4 with linespoints lw 1 dt 3 pt 6 title "simulated (run\'s own compute)"']
gp.append("unset multiplot")
subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True)
