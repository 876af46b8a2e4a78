#!/usr/bin/env bash
# Rounds of bench_mpi_receive (mpi_receive.cpp) over Open MPI's TCP btl on loopback, the receive
# paths alternating within each round, into OUT/results.jsonl: a first line with the machine, the
# commit and Open MPI's version, then one line per run; OUT/table.md has the medians per size.
#
#   bash benchmarks/transport/run_mpi_receive.sh BUILD_DIR OUT [ROUNDS] [SIZES]
#   (defaults: 5 rounds; 81920 and 1048576 bytes: a P3 slice and a ring segment)
set -euo pipefail
build=$1 out=$2 rounds=${3:-5} sizes=${4:-81920,1048576}
bench=$build/benchmarks/transport/bench_mpi_receive
[ -x "$bench" ] || { echo "run_mpi_receive.sh: build $bench first (target bench_mpi_receive)" >&2; exit 1; }
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../.." && pwd)
python3 - "$root" "$rounds" >"$out/results.jsonl" <<'PY'
import json, os, platform, subprocess, sys
root, rounds = sys.argv[1], int(sys.argv[2])
git = lambda *a: subprocess.run(["git", "-C", root, *a], capture_output=True, text=True).stdout.strip()
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
ompi = subprocess.run(["mpirun", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
print(json.dumps({"machine": {"cpu": cpu, "cores": os.cpu_count(), "load": os.getloadavg()[0]}, "commit": git("rev-parse", "HEAD"),
                  "tree_changed": bool(git("status", "--porcelain", "--untracked-files=no")), "mpi": ompi,
                  "btl": "self,tcp over lo", "rounds": rounds}))
PY
for round in $(seq "$rounds"); do
  for bytes in ${sizes//,/ }; do
    for mode in probe posted early; do
      mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,tcp --mca btl_tcp_if_include lo \
        "$bench" "$bytes" $((400000000 / bytes)) "$mode" | sed "s/^{/{\"round\": $round, /" >>"$out/results.jsonl"
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
lines = [json.loads(l) for l in open(f"{out}/results.jsonl")]
head, runs = lines[0], lines[1:]
rows = [f"# bench_mpi_receive: CPU seconds per GB received, per rank", "",
        f"{head['machine']['cpu']}, {head['machine']['cores']} cores (load {head['machine']['load']:.1f} at the start); "
        f"commit {head['commit'][:12]}{' (with changes)' if head['tree_changed'] else ''}; {head['mpi']}; {head['btl']}; "
        f"medians of {head['rounds']} rounds, the paths alternating in each.", "",
        "| bytes | probe | posted | early | posted / probe | early / probe |", "|---|---|---|---|---|---|"]
for size in sorted({r["bytes"] for r in runs}):
    med = {m: statistics.median(r["cpu_s_per_gb"] for r in runs if r["bytes"] == size and r["mode"] == m)
           for m in ("probe", "posted", "early")}
    rows.append(f"| {size} | {med['probe']:.3f} | {med['posted']:.3f} | {med['early']:.3f} | "
                f"{med['posted'] / med['probe']:.2f}x | {med['early'] / med['probe']:.2f}x |")
open(f"{out}/table.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
