#!/usr/bin/env bash
# --slicing auto (--tune) --retune-every as users run it, on a network that changes under the job
# (--bandwidth-change): the ranks must re-tune at the same iterations to the same settings (every
# rank prints its re-tunes), train on to identical weights, and at least one re-tune must happen
# (by default the link drops fifty-fold; --change 12:1gbit+5ms keeps the rate and adds latency).
# Without a launcher the ranks are in-process threads.
# usage: retune.sh [--change ITERATION:LINK] TRAINER [LAUNCHER...]   e.g. retune.sh build/gradsync-train mpiexec -np 3
set -u
. "$(dirname "$0")/ranks_alike.sh"
change=12:20mbit
if [ "${1:-}" = --change ]; then
  change=$2
  shift 2
fi
trainer=$1
shift
args=(--model resnet20 --width 1 --dataset synthetic --batch 8 --synthetic-size 4000 --iterations 30 --no-eval -q
  --threads 1 --slicing auto --retune-every 3 --bandwidth 1gbit --bandwidth-change "$change" --print-digest --timeout 60)
if [ $# -gt 0 ]; then
  out=$("$@" "$trainer" "${args[@]}" 2>&1)
else
  out=$("$trainer" "${args[@]}" --ranks 2 2>&1)
fi
rc=$?
fail() {
  echo "$out"
  echo "retune: FAIL: $*"
  exit 1
}
[ $rc = 0 ] || fail "exit $rc"
ranks_alike --retune-every "never re-tuned though the link changed from 1gbit to ${change#*:} at iteration ${change%%:*}"
echo "$out" | grep -- "--retune-every"
echo "retune: every rank ($(echo $ranks)) re-tuned alike and ended with the same weights"
