#!/usr/bin/env bash
# gradsync-sim against measured gradsync-train runs: for each model, a profile run
# (gradsync-train --profile, in-process ranks, no link emulation), then per link speed a measured
# run (--bandwidth, emulated per-pair links) and gradsync-sim on the profile with the same policy,
# ranks and link (--links pair). report.py writes results.json, table.md and iteration.png.
#
#   benchmarks/sim/validate.sh                       # ~6 min on 2 cores (3 rounds); results in benchmarks/sim/results
#   benchmarks/sim/validate.sh --models vgg11 --iterations 20 --out /tmp/v
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
trainer=$root/build/dev/trainer/gradsync-train
sim=$root/build/dev/tools/sim/gradsync-sim
out=$here/results
models=vgg11,resnet20 iterations=30 warmup=4 ranks=2 threads=2 batch=32 rounds=3
policy="--slicing fixed:40000 --priority forward --codec fp32 --collective ring"
# Per model: gradsync-train's model flags (benchmarks/e2e's settings; VGG-11 at width 0.25 so that 2
# shared cores run 40 iterations in seconds) and link speeds where communication matters (wire time
# per iteration from a fifth of the compute to five times it; VGG-11 also at 1.5 Gbit/s, where wire
# and compute balance on an AVX-512 host).
declare -A MODEL_FLAGS=([vgg11]="--model vgg11 --width 0.25" [resnet20]="--model resnet20 --width 1")
declare -A MODEL_LINKS=([vgg11]="100mbit,300mbit,1gbit,1500mbit" [resnet20]="10mbit,30mbit,100mbit")

usage() {
  cat <<USAGE
usage: $0 [--models vgg11,resnet20] [--iterations N] [--warmup N] [--ranks N] [--threads N] [--batch N]
          [--rounds N] [--links MODEL=LINK,LINK...] [--trainer PATH] [--sim PATH] [--out DIR]
Defaults: $models, $iterations iterations ($warmup warm-up left out of the medians), $ranks ranks,
$threads threads, batch $batch, $rounds round(s) of all runs, out $out.
Links: vgg11 ${MODEL_LINKS[vgg11]}; resnet20 ${MODEL_LINKS[resnet20]}. Policy: $policy.
USAGE
}
die() { echo "validate.sh: error: $*" >&2; exit 1; }
while (($#)); do
  case $1 in
    --models | --iterations | --warmup | --ranks | --threads | --batch | --rounds | --trainer | --sim | --out)
      (($# >= 2)) || die "$1 needs a value"; v=${1#--}; printf -v "$v" %s "$2"; shift 2 ;;
    --links)
      (($# >= 2)) && [[ $2 == *=* ]] || die "--links needs MODEL=LINK,LINK... (e.g. vgg11=1gbit,1500mbit)"
      MODEL_LINKS[${2%%=*}]=${2#*=}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
for n in iterations ranks threads batch rounds; do [[ ${!n} =~ ^[1-9][0-9]*$ ]] || die "--$n must be a positive integer"; done
((warmup < iterations)) || die "--warmup must be below --iterations"
[[ -x $trainer ]] || die "no gradsync-train at $trainer (cmake --build build/dev --target gradsync-train; or --trainer)"
[[ -x $sim ]] || die "no gradsync-sim at $sim (cmake --build build/dev --target gradsync-sim; or --sim)"
IFS=, read -ra model_list <<<"$models"
for m in "${model_list[@]}"; do [[ -n ${MODEL_FLAGS[$m]:-} ]] || die "unknown model '$m' (valid: ${!MODEL_FLAGS[*]})"; done
mkdir -p "$out/raw"

# Busy CPU seconds of the whole machine (all cores) from /proc/stat.
busy() { awk '/^cpu /{print ($2+$3+$4+$7+$8) / 100}' /proc/stat; }

# train NAME ARGS...: one gradsync-train run -> raw/NAME.metrics.json and raw/NAME.profile.json;
# raw/NAME.load: cores kept busy by other processes meanwhile (the machine is shared).
train() {
  local name=$1 b0 b1 t0 t1 self; shift
  b0=$(busy); t0=$(date +%s.%N)
  local TIMEFORMAT="%U %S"
  self=$( { time "$trainer" ${MODEL_FLAGS[$model]} --dataset synthetic --batch "$batch" --ranks "$ranks" \
      --threads "$threads" --iterations "$iterations" --no-eval -q $policy \
      --metrics "$out/raw/$name.metrics.json" --profile "$out/raw/$name.profile.json" "$@" >"$out/raw/$name.log" 2>&1; } 2>&1 )
  b1=$(busy); t1=$(date +%s.%N)
  awk -v b0="$b0" -v b1="$b1" -v t0="$t0" -v t1="$t1" -v self="$self" \
    'BEGIN { split(self, s, " "); printf "%.2f\n", (b1 - b0 - s[1] - s[2]) / (t1 - t0) }' >"$out/raw/$name.load"
  echo "  $name: $(python3 -c "import json,statistics as s,sys; m=json.load(open(sys.argv[1])); print(f'{s.median(m[\"iteration_seconds\"][$warmup:]):.3f} s/iteration')" "$out/raw/$name.metrics.json"), others $(cat "$out/raw/$name.load") cores"
}
# simulate NAME PROFILE LINK [FLAGS]: gradsync-sim with the run's policy, ranks and link ->
# raw/NAME.sim.json. 200 iterations: the rank-skew draws average out (0.1 s).
simulate() {
  "$sim" --profile "$2" --ranks "$ranks" --bandwidth "$3" --links pair $policy --iterations 200 --no-events \
    --json "$out/raw/$1.sim.json" "${@:4}" >/dev/null
}

echo "validate: models $models, $ranks ranks, $threads threads, $iterations iterations, $rounds round(s) -> $out"
for ((round = 1; round <= rounds; ++round)); do
  for model in "${model_list[@]}"; do
    train "$model.r$round.profile"  # the profile: no link emulation
    IFS=, read -ra links <<<"${MODEL_LINKS[$model]}"
    for link in "${links[@]}"; do
      name=$model.r$round.$link
      train "$name" --bandwidth "$link"
      simulate "$name" "$out/raw/$model.r$round.profile.profile.json" "$link"   # the profile run's compute
      simulate "$name.own" "$out/raw/$name.profile.json" "$link"                 # this run's own compute
      simulate "$name.noskew" "$out/raw/$model.r$round.profile.profile.json" "$link" --no-rank-skew
    done
  done
done
python3 "$here/report.py" "$out" --warmup "$warmup"
