#!/usr/bin/env bash
# The end-to-end smoke that ctest runs (label e2e): sweep.sh in miniature - 2 nodes, one 1 Gbit/s
# link, every default policy, DDP with each of its hooks next to the compute-only runs (one at
# line-rate traffic), VGG-11 at 1/8 width, 3 iterations; then the time-to-accuracy mode on
# Fashion-MNIST (a 1-bit policy against DDP + PowerSGD, 10 iterations, evaluating every 5) - and
# checks that every run succeeded, the tables and plots exist, and the topologies are gone. The
# sweep installs and checks OpenBLAS under PyTorch (../torch_blas.py). Exits 77 (ctest: skipped)
# only where network namespaces cannot be created.
# usage: smoke.sh --trainer PATH --out DIR
set -uo pipefail
E2E_DIR=$(cd "$(dirname "$0")" && pwd)
source "$E2E_DIR/policies.sh"
policies=$ALL_POLICIES,ddp-powersgd
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
sweep() { # DIR OPTIONS...: one sweep, which must leave no namespace behind and reach its report
  local dir=$1 sweep status left
  shift
  bash "$E2E_DIR/sweep.sh" --models vgg11 --width 0.125 --nodes 2 --links 1gbit --warmup 1 \
    --trainer "$trainer" --out "$dir" "$@" &
  sweep=$!
  wait $sweep
  status=$?
  left=$(ip netns list | grep -c "^gse2e-$sweep-")
  [ "$left" -eq 0 ] || { echo "e2e smoke FAILED: the sweep left $left namespace(s) gse2e-$sweep-*" >&2; exit 1; }
  [ -s "$dir/results.json" ] || { echo "e2e smoke FAILED: sweep.sh exited with $status before its report" >&2; exit 1; }
}
sweep "$out" --iterations 3 --policies "$policies"
sweep "$out/accuracy" --iterations 10 --policies p3-onebit,ddp-powersgd --dataset fashion-mnist --accuracy 0.5 \
  --eval-every 5 --eval-samples 500

# Every policy ran and was measured; the tables and the plots are there; the PyTorch side says
# which BLAS it ran on; every run of the accuracy sweep evaluated and has its time to accuracy.
/usr/bin/python3 - "$out" "$policies" <<'PY'
import json, os, sys
out, policies = sys.argv[1], sys.argv[2].split(",")
runs = json.load(open(os.path.join(out, "results.json")))["runs"]
failed = sorted({"compute", "compute-traffic", "ddp-compute", *policies} - {r["policy"] for r in runs if r["ok"] and r["iteration_s"] > 0})
files = ["table.md", "plots/throughput-vgg11.png"] + [f"plots/timeline-vgg11-1gbit-{p}.png" for p in policies]
missing = [f for f in files if not (os.path.exists(os.path.join(out, f)) and os.path.getsize(os.path.join(out, f)))]
if "OpenBLAS" not in open(os.path.join(out, "table.md")).read():
    missing.append("table.md's line naming OpenBLAS under PyTorch")
accuracy = json.load(open(os.path.join(out, "accuracy", "results.json")))["runs"]
unevaluated = sorted({"p3-onebit", "ddp-powersgd"} - {r["policy"] for r in accuracy if r["ok"] and len(r["evaluations"]) >= 2
                                                       and "seconds_to_accuracy" in r})
if "Time to 0.5 test accuracy" not in open(os.path.join(out, "accuracy", "table.md")).read():
    missing.append("accuracy/table.md's time-to-accuracy table")
if failed or missing or unevaluated:
    sys.exit(f"e2e smoke FAILED: runs failed or missing: {failed or 'none'}; outputs missing: {missing or 'none'}; "
             f"accuracy runs without evaluations: {unevaluated or 'none'}")
print(f"e2e smoke passed: {len(runs)} runs, the table and {len(files) - 1} plots, {len(accuracy)} time-to-accuracy runs in {out}")
PY
