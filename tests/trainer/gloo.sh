#!/usr/bin/env bash
# gradsync-train --collective gloo as users run it: in-process ranks and under mpiexec, on the
# loopback interface. With 2 ranks a sum has one order, so Gloo's all-reduce must leave exactly the
# weights the ring leaves (equal digests); with 3 ranks every replica must agree.
#   gloo.sh GRADSYNC_TRAIN [MPIEXEC FLAGS...]
set -euo pipefail
train=$1
shift
mpiexec=("$@")
common=(--model resnet20 --width 1 --batch 8 --dataset synthetic --no-eval -q --iterations 3 --print-digest)

# digests LAUNCH...: the sorted distinct weight digests the ranks printed
digests() {
  local out
  out=$("$@" 2>&1) || { echo "FAIL: $*" >&2; echo "$out" | tail -5 >&2; exit 1; }
  echo "$out" | sed -n 's/.*weights digest \([0-9a-f]*\).*/\1/p' | sort -u
}
expect_one() { # LABEL DIGESTS: exactly one digest
  [ "$(echo "$2" | grep -c .)" -eq 1 ] || { echo "FAIL ($1): ranks disagree or printed none: $2"; exit 1; }
  echo "ok   ($1): $2"
}

ring=$(digests "$train" --ranks 2 "${common[@]}" --collective ring)
expect_one "in-process, 2 ranks, ring" "$ring"
gloo=$(digests "$train" --ranks 2 "${common[@]}" --collective gloo:lo)
expect_one "in-process, 2 ranks, gloo" "$gloo"
[ "$gloo" = "$ring" ] || { echo "FAIL: gloo's weights $gloo differ from the ring's $ring"; exit 1; }
expect_one "in-process, 3 ranks, gloo" "$(digests "$train" --ranks 3 "${common[@]}" --collective gloo:lo)"
if [ ${#mpiexec[@]} -gt 0 ]; then
  # (a process's compute threads differ from an in-process rank's: compare with the ring there)
  ring=$(digests "${mpiexec[@]}" -n 2 "$train" "${common[@]}" --collective ring)
  expect_one "mpiexec -n 2, ring" "$ring"
  gloo=$(digests "${mpiexec[@]}" -n 2 "$train" "${common[@]}" --collective gloo:lo)
  expect_one "mpiexec -n 2, gloo" "$gloo"
  [ "$gloo" = "$ring" ] || { echo "FAIL: gloo's weights $gloo differ from the ring's $ring under mpiexec"; exit 1; }
  expect_one "mpiexec -n 3, gloo" "$(GLOO_SOCKET_IFNAME=lo digests "${mpiexec[@]}" -n 3 -x GLOO_SOCKET_IFNAME "$train" \
    "${common[@]}" --collective gloo)"
fi
# A lossy codec is refused, naming the fix.
if out=$("$train" --ranks 2 "${common[@]}" --codec qsgd8 --collective gloo:lo 2>&1); then
  echo "FAIL: qsgd8 over gloo ran"; exit 1
fi
echo "$out" | grep -q "needs a lossless codec" || { echo "FAIL: qsgd8 over gloo: $out"; exit 1; }
echo "all runs passed"
