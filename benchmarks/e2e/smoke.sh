#!/usr/bin/env bash
# The end-to-end smoke that ctest runs (label e2e): sweep.sh in miniature - 2 nodes, one 1 Gbit/s
# link, every policy and DDP next to the compute-only runs (one at line-rate traffic), VGG-11 at
# 1/8 width, 3 iterations - then checks that every run succeeded, the table and plots exist, and
# the topology is gone. Exits 77 (ctest: skipped) only
# where network namespaces cannot be created.
# usage: smoke.sh --trainer PATH --out DIR
set -uo pipefail
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 4 ] && [ "$1" = --trainer ] && [ "$3" = --out ] || { echo "usage: smoke.sh --trainer PATH --out DIR" >&2; exit 2; }
trainer=$2 out=$4

skip() {
  echo "e2e smoke SKIPPED: $*"
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (run ctest as root)"
probe=gse2e-probe-$$
ip netns add "$probe" 2>/dev/null || skip "cannot create a network namespace here (no CAP_SYS_ADMIN: an unprivileged container?)"
ip netns del "$probe"

rm -rf "$out"
bash "$E2E_DIR/sweep.sh" --models vgg11 --width 0.125 --nodes 2 --links 1gbit --iterations 3 --warmup 1 \
  --trainer "$trainer" --out "$out" &
sweep=$!
wait $sweep
status=$?
left=$(ip netns list | grep -c "^gse2e-$sweep-")
[ "$left" -eq 0 ] || { echo "e2e smoke FAILED: the sweep left $left namespace(s) gse2e-$sweep-*" >&2; exit 1; }
[ -s "$out/results.json" ] || { echo "e2e smoke FAILED: sweep.sh exited with $status before its report" >&2; exit 1; }

# Every policy ran and was measured; the table and the plots are there.
/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
runs = json.load(open(os.path.join(out, "results.json")))["runs"]
policies = ["wfbp", "p3", "p3-fp16", "p3-qsgd8", "ps", "ddp"]
failed = sorted({"compute", "compute-traffic", "ddp-compute", *policies} - {r["policy"] for r in runs if r["ok"] and r["iteration_s"] > 0})
files = ["table.md", "plots/throughput-vgg11.png"] + [f"plots/timeline-vgg11-1gbit-{p}.png" for p in policies]
missing = [f for f in files if not (os.path.exists(os.path.join(out, f)) and os.path.getsize(os.path.join(out, f)))]
if failed or missing:
    sys.exit(f"e2e smoke FAILED: runs failed or missing: {failed or 'none'}; outputs missing: {missing or 'none'}")
print(f"e2e smoke passed: {len(runs)} runs, the table and {len(files) - 1} plots in {out}")
PY
