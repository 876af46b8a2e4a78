#!/usr/bin/env bash
# gradsync-train end to end, as a user runs it: every codec x every collective on real models,
# 2 iterations each: with in-process ranks, or under mpiexec when it is given (two ctest entries:
# the MPI runs must have the cores to themselves, the in-process ones need not). Every run must
# exit 0 and report that the codec compressed > 99% of the parameters (fp16/bf16: all of them).
#   cli_codecs.sh GRADSYNC_TRAIN [MPIEXEC FLAGS...]
set -uo pipefail
train=$1
shift
mpiexec=("$@")
codecs=(fp32 fp16 bf16 qsgd2 qsgd4 qsgd8 qsgd16 onebit topk ef+qsgd4 ef+fp16)
collectives=(ring ps reduce-broadcast hierarchical hybrid)
failures=0

# check LABEL COMMAND...: runs it, checks the exit status and the compression line.
check() {
  local label=$1 codec=$2
  shift 2
  local out
  if ! out=$(timeout 300 "$@" 2>&1); then
    echo "FAIL ($label): exit status $?"
    echo "$out" | tail -5
    failures=$((failures + 1))
    return
  fi
  local share
  share=$(echo "$out" | sed -n 's/.* compressed \([0-9.]*\)% of parameters.*/\1/p')
  local floor=99
  case $codec in fp32) floor=0 ;; fp16 | bf16 | ef+fp16) floor=99.99 ;; esac
  if [ -z "$share" ] || ! awk -v s="$share" -v f="$floor" 'BEGIN { exit !(s >= f) }'; then
    echo "FAIL ($label): compressed share '$share' below $floor%"
    echo "$out" | tail -3
    failures=$((failures + 1))
    return
  fi
  echo "ok   ($label): $share% compressed"
}

common=(--dataset synthetic --no-eval -q --iterations 2)
if [ ${#mpiexec[@]} -eq 0 ]; then
  for codec in "${codecs[@]}"; do
    for collective in "${collectives[@]}"; do
      check "resnet20 x1, 3 ranks, $codec, $collective" "$codec" \
        "$train" --model resnet20 --width 1 --batch 8 --ranks 3 "${common[@]}" --codec "$codec" --collective "$collective"
    done
    check "vgg11 x0.25, 2 ranks, $codec, ring" "$codec" \
      "$train" --model vgg11 --width 0.25 --batch 8 --ranks 2 "${common[@]}" --codec "$codec"
  done
  # VGG-11 at full width, 2 threads per rank.
  check "vgg11 x1, 2 ranks, qsgd8, ring" qsgd8 \
    "$train" --model vgg11 --width 1 --batch 32 --ranks 2 --threads 2 "${common[@]}" --codec qsgd8
else
  for codec in fp32 fp16 qsgd4 qsgd8 onebit topk ef+qsgd4; do
    for collective in ring ps; do
      for np in 2 3; do
        check "MPI np $np, resnet20 x1, $codec, $collective" "$codec" \
          "${mpiexec[@]}" -n $np "$train" --model resnet20 --width 1 --batch 8 "${common[@]}" --codec "$codec" \
          --collective "$collective"
      done
    done
  done
  check "MPI np 2, vgg11 x1, qsgd8, ring" qsgd8 \
    "${mpiexec[@]}" -n 2 "$train" --model vgg11 --width 1 --batch 32 --threads 1 "${common[@]}" --codec qsgd8
fi

if [ $failures -ne 0 ]; then
  echo "$failures run(s) failed"
  exit 1
fi
echo "all runs passed"
