#!/usr/bin/env bash
# --tune's second choice (--tune-steady) as users run it: the start-up choice rests on a profile
# a thousand times slower than the run's compute (rank 0's own --profile, scaled up), on which a
# 20 Mbit/s link is hidden and the tuner takes its grid's first, whole layers; after 5 iterations
# rank 0 tunes on the compute it measured, where the wire bounds the iteration (whatever the load:
# 0.44 s of wire against 0.05 s of compute) and slices win (P3's fixed:40000 or near), and every rank must
# switch at the same iteration to the same setting and train on to identical weights - unless the
# ranks share cores (rank 0 measured under 0.8), where all keep the start-up choice.
# usage: tune_steady.sh TRAINER [LAUNCHER...]   e.g. tune_steady.sh build/gradsync-train mpiexec -np 2
set -u
. "$(dirname "$0")/ranks_alike.sh"
trainer=$1
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model=(--model resnet20 --width 1 --dataset synthetic --batch 16 --synthetic-size 2000 --no-eval -q --threads 1)
fail() {
  echo "${out:-}"
  echo "tune_steady: FAIL: $*"
  exit 1
}
"$trainer" "${model[@]}" --ranks 1 --iterations 4 --profile "$dir/measured.json" >/dev/null 2>&1 || fail "--profile failed"
/usr/bin/python3 - "$dir/measured.json" "$dir/slow.json" <<'EOF' || fail "could not scale the profile"
import json, sys
p = json.load(open(sys.argv[1]))
for layer in p["layers"]:
    for key in ("forward_seconds", "backward_seconds"):
        layer[key] = layer.get(key, 0) * 1000
p.pop("iteration_seconds", None)
json.dump(p, open(sys.argv[2], "w"))
EOF
args=("${model[@]}" --iterations 8 --slicing auto --tune-profile "$dir/slow.json" --bandwidth 20mbit --print-digest --timeout 60)
if [ $# -gt 0 ]; then
  out=$("$@" "$trainer" "${args[@]}" 2>&1)
else
  out=$("$trainer" "${args[@]}" --ranks 2 2>&1)
fi
rc=$?
[ $rc = 0 ] || fail "exit $rc"
echo "$out" | grep -q -- "--tune: link .* chose --slicing whole " ||
  fail "the start-up choice on the slow profile was not whole layers"
ranks_alike --tune-steady "did not tune on the measured compute"
# Ranks that share cores (under 0.8 measured: 4 processes on 2 cores, say) keep the start-up choice.
cores=$(echo "$reference" | sed -n 's/.* on \([0-9.e+-]*\) cores .*/\1/p')
[ -n "$cores" ] || fail "rank 0's second choice names no cores: '$reference'"
if awk "BEGIN { exit !($cores < 0.8) }"; then
  expected="ranks share cores: kept the start-up choice --slicing whole "
else
  expected="switched to --slicing fixed:"
fi
case $reference in
  "after iteration 5 "*"$expected"*) ;;
  *) fail "rank 0's second choice on $cores cores: '$reference' (expected '$expected' after iteration 5)" ;;
esac
echo "$out" | grep -- "--tune"
echo "tune_steady: every rank ($(echo $ranks)) chose alike on the measured compute ($cores cores) and ended with the same weights"
