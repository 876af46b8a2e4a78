#!/usr/bin/env bash
# gradsync-train's command line as a user first meets it: --help lists every policy family's
# grammar, the very text the family's parse errors give (one source: gradsync's Any*::grammar),
# and --no-eval prints no accuracy, neither on the last line nor in --metrics.
#   cli_help.sh GRADSYNC_TRAIN
set -uo pipefail
train=$1
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
run=(--ranks 1 --model resnet20 --width 0.25 --dataset synthetic --synthetic-size 16 --batch 8 --iterations 2 -q)

help=$("$train" --help) || fail "--help exited with $?"
for family in slicing priority codec collective; do
  err=$("$train" "${run[@]}" --no-eval --"$family" bogus 2>&1 >/dev/null) && fail "--$family bogus was accepted"
  grammar=${err##*valid: }
  [ "$grammar" != "$err" ] && [ -n "$grammar" ] || { fail "--$family bogus: no grammar in '$err'"; continue; }
  grep -qF -- "$grammar" <<<"$help" || fail "--help does not list the $family grammar '$grammar'"
done
for name in dgt qsgd8 ps hierarchical slicefuse; do  # (policies once missing from --help)
  grep -q -- "$name" <<<"$help" || fail "--help does not mention $name"
done

metrics=$(mktemp)
trap 'rm -f "$metrics"' EXIT
out=$("$train" "${run[@]}" --no-eval --metrics "$metrics" 2>&1) || fail "--no-eval run exited with $?: $out"
grep -qi "accuracy" <<<"$out" && fail "--no-eval printed an accuracy: $out"
grep -q "images/s" <<<"$out" || fail "--no-eval printed no summary line: $out"
/usr/bin/python3 - "$metrics" <<'PY' || fail "--no-eval metrics hold a test accuracy"
import json, sys
m = json.load(open(sys.argv[1]))
sys.exit(0 if m["test_accuracy"] is None and all(e["test_accuracy"] is None for e in m["epochs"]) else 1)
PY
out=$("$train" "${run[@]}" 2>&1) || fail "the run with evaluation exited with $?: $out"
grep -q "test accuracy" <<<"$out" || fail "without --no-eval the accuracy is missing: $out"

[ $failures -eq 0 ] && echo "cli_help: every check passed"
exit $((failures > 0))
