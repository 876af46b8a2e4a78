#!/usr/bin/env bash
# Fault injection on real links: gradsync-train under mpirun across the network
# namespaces of benchmarks/e2e/topology.sh (3 nodes, links shaped with tc, P3 policies), with a
# rank killed, a link cut and restored, a run killed and resumed from its checkpoint, and ranks
# started with different configurations. Writes DIR/results.md (a markdown table: what was
# injected, what the user sees - the first error line of each rank -, how long until every rank
# had exited, mpirun's exit status, what was lost) and each run's log under DIR/logs. Exits 1
# if any check fails, 77 (ctest: skipped) where namespaces or mpirun are unavailable.
#
# usage: faults.sh --trainer PATH --out DIR [--smoke] [--timeout SECONDS] [--link RATE]
#   --smoke    only the cheap checks (ctest -L faults): a rank killed (mpirun defaults and
#              --enable-recovery), a handshake mismatch, a NaN gradient on one rank
#   --timeout  gradsync-train --timeout (Options::timeout and the MPI transport's), default 8
#   --link     tc rate of every node's link, default 200mbit
set -uo pipefail
FAULTS_DIR=$(cd "$(dirname "$0")" && pwd)
trainer='' out='' smoke=0 timeout_s=8 link=200mbit
while [ $# -gt 0 ]; do
  case $1 in
    --trainer) trainer=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --smoke) smoke=1; shift ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --link) link=$2; shift 2 ;;
    *) echo "usage: faults.sh --trainer PATH --out DIR [--smoke] [--timeout SECONDS] [--link RATE]" >&2; exit 2 ;;
  esac
done
[ -n "$trainer" ] && [ -n "$out" ] || { echo "usage: faults.sh --trainer PATH --out DIR [--smoke]" >&2; exit 2; }
trainer=$(readlink -f "$trainer")

# Our own names and subnet, told apart from a sweep's (gse2e, 10.77.0) running beside us.
export TOPO_PREFIX=gsf TOPO_NET=10.78.0
source "$FAULTS_DIR/../../benchmarks/e2e/topology.sh"
topo_skip_unless_usable faults "$trainer"
NODES=3
rm -rf "$out"
mkdir -p "$out/logs" "$out/ckpt"
topo_create $NODES # torn down on EXIT, INT and TERM
topo_shape all "$link"

# P3 policies on a small model; every run the same seed, so runs are comparable bit for bit.
COMMON=(--model resnet20 --width 0.25 --dataset synthetic --batch 8 --synthetic-size 960 --threads 1
  --slicing fixed:40000 --priority forward --seed 7 --no-eval --quiet --timeout "$timeout_s")
MPI=(-np $NODES --host "$(topo_hosts)" --tag-output)
rows=()
failures=0

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f", b - a}'; }
# PIDs of gradsync-train in node i's namespace (mpirun's daemons live there too).
trainer_pids() {
  local pid
  for pid in $(ip netns pids "$(topo_ns "$1")" 2>/dev/null); do
    [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = gradsync-train ] && echo "$pid"
  done
}
any_trainer_left() {
  local i
  for i in $(topo_nodes); do [ -z "$(trainer_pids "$i")" ] || return 0; done
  return 1
}
# Waits until rank r's process runs (up to 60 s).
wait_for_rank() {
  local _
  for _ in $(seq 600); do
    [ -z "$(trainer_pids "$1")" ] || return 0
    sleep 0.1
  done
  return 1
}
# The iteration in a checkpoint's header (0 if there is none yet).
ckpt_iteration() {
  /usr/bin/python3 - "$1" <<'PY' 2>/dev/null || echo 0
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    f.read(8)
    (n,) = struct.unpack("<Q", f.read(8))
    print(json.loads(f.read(n))["iteration"])
PY
}
# First error line of each rank, as "rank R: line" joined with <br>; mpirun's own first line too.
first_errors() {
  local log=$1 r line lines=()
  for r in $(topo_nodes); do
    line=$(grep -a "^\[[0-9]*,$r\]<std...>:" "$log" | sed 's/^\[[0-9]*,[0-9]*\]<std...>://' |
      grep -aE -m1 "error|gradsync:|gradsync rank|terminate|Abort" || true)
    [ -n "$line" ] && lines+=("rank $r: ${line:0:220}") || lines+=("rank $r: (nothing)")
  done
  line=$(grep -avE "^\[[0-9]*,[0-9]*\]<std|^===|^-*$|^ *$" "$log" | grep -aE -m1 "rank|process|node|exited|killed" || true)
  [ -z "$line" ] || lines+=("mpirun: ${line:0:220}")
  local IFS='|'
  echo "${lines[*]}" | sed 's/|/<br>/g; s/\\/\\\\/g'
}

# run_job NAME INJECT trainer-args...: one mpirun across the nodes while INJECT (a function, or
# "none") acts on it in the background; a launch that failed in Open MPI's daemon start-up
# (before training began) is retried. Sets RC (mpirun's status), T_INJECT and T_END (every rank
# gone), LOG.
run_job() {
  local name=$1 inject=$2 attempt
  shift 2
  LOG=$out/logs/$name.log
  for attempt in 1 2 3 4 5; do
    rm -f "$out/inject.t"
    TOPO_MPI_ATTEMPTS=1 TOPO_TIMEOUT=$((timeout_s * 4 + 60)) topo_mpirun "$LOG" "${MPI[@]}" "$trainer" "$@" &
    local job=$! injector=
    [ "$inject" = none ] || { $inject >>"$out/logs/$name.inject" 2>&1 & injector=$!; }
    wait $job
    RC=$?
    while any_trainer_left; do sleep 0.1; done
    T_END=$(now)
    [ -z "$injector" ] || { kill "$injector" 2>/dev/null; wait "$injector" 2>/dev/null; }
    T_INJECT=$(cat "$out/inject.t" 2>/dev/null || echo "$T_END")
    grep -aq "gradsync-train: resnet20" "$LOG" || ! grep -aqE "$TOPO_MPI_START_FAILURE" "$LOG" && return 0
    echo "=== faults: MPI daemons failed to start (attempt $attempt); retrying" >>"$LOG"
  done
}

# row INJECTED SEES SECONDS STATUS LOST OK: a line of the table; OK=0 counts a failure.
row() {
  local mark=pass
  [ "$6" = 1 ] || { mark=FAIL; failures=$((failures + 1)); }
  rows+=("| $1 | $2 | $3 | $4 | $5 | $mark |")
  echo "faults: [$mark] $1 ($3 s, exit $4): $5" >&2
}
stamp() { now >"$out/inject.t"; }

# --- a. a rank killed with SIGKILL mid-run ---------------------------------------------------------
kill_victim() { # SIGKILL rank $VICTIM 3 s after it started
  wait_for_rank "$VICTIM" || return
  sleep 3
  local pid
  pid=$(trainer_pids "$VICTIM" | head -1)
  stamp
  kill -9 "$pid"
  while any_trainer_left; do sleep 0.05; done
  now >"$out/ranks_gone.t"
}
check_kill() { # variant victim mpirun-flags...
  local variant=$1 victim=$2
  shift 2
  MPI=(-np $NODES --host "$(topo_hosts)" --tag-output "$@")
  VICTIM=$victim run_job "kill$victim-$variant" kill_victim "${COMMON[@]}" --codec fp32 --collective ring --iterations 100000
  MPI=(-np $NODES --host "$(topo_hosts)" --tag-output)
  local took ok=1 sees r
  took="$(elapsed "$T_INJECT" "$(cat "$out/ranks_gone.t")") (mpirun: $(elapsed "$T_INJECT" "$T_END"))"
  sees=$(first_errors "$LOG")
  awk -v t="${took%% *}" -v m="$((timeout_s + 5))" 'BEGIN {exit !(t <= m)}' || ok=0
  if [ "$variant" = recovery ]; then
    # mpirun lets the survivors run on (and exits 0 whatever they return): each must stop itself
    # with gradsync's message, which must name the killed rank.
    for r in $(topo_nodes); do
      [ "$r" = "$victim" ] || grep -aqE "^\[[0-9]*,$r\]<stderr>:.*rank $victim stopped answering" "$LOG" || ok=0
    done
  else
    [ "$RC" -ne 0 ] && grep -aqE "rank $victim .*exited on signal 9" "$LOG" || ok=0
  fi
  row "rank $victim of 3 killed (SIGKILL) 3 s into a ring fp32 run, mpirun ${variant/default/defaults}" \
    "$sees" "$took" "$RC" "the run (no checkpoint asked for)" $ok
}

# --- d. bad peers: a rank with another model, codec or slicing (one MPMD mpirun) -----------------
# overridden KEY VALUE...: COMMON with these options' values replaced (CLI11 takes an option once).
overridden() {
  local -A set=()
  while [ $# -gt 0 ]; do set[$1]=$2; shift 2; done
  local i a=("${COMMON[@]}")
  for ((i = 0; i < ${#a[@]}; i++)); do
    [ -z "${set[${a[i]}]+x}" ] || { a[i + 1]=${set[${a[i]}]}; unset "set[${a[i]}]"; }
  done
  for i in "${!set[@]}"; do a+=("$i" "${set[$i]}"); done
  printf '%s\n' "${a[@]}"
}
mismatch() { # name description rank-2-options (KEY VALUE...)
  local name=$1 desc=$2
  shift 2
  local base=("${COMMON[@]}" --codec fp32 --collective ring --iterations 20) odd t0 r ok=1
  mapfile -t odd < <(overridden --codec fp32 --collective ring --iterations 20 "$@")
  LOG=$out/logs/mismatch-$name.log
  t0=$(now)
  for attempt in 1 2 3 4 5; do
    TOPO_MPI_ATTEMPTS=1 TOPO_TIMEOUT=$((timeout_s * 4 + 60)) topo_mpirun "$LOG" --host "$(topo_hosts)" --tag-output \
      -np 2 "$trainer" "${base[@]}" : -np 1 "$trainer" "${odd[@]}" &
    wait $!
    RC=$?
    grep -aq "gradsync-train: resnet20" "$LOG" || ! grep -aqE "$TOPO_MPI_START_FAILURE" "$LOG" && break
  done
  while any_trainer_left; do sleep 0.1; done
  local took
  took=$(elapsed "$t0" "$(now)")
  [ "$RC" -ne 0 ] || ok=0
  for r in $(topo_nodes); do grep -aqE "^\[[0-9]*,$r\]<stderr>:.*(ranks disagree|handshake)" "$LOG" || ok=0; done
  row "rank 2 started with $desc" "$(first_errors "$LOG")" "$took (whole run)" "$RC" "nothing (no iteration ran)" $ok
}

# --- e. a NaN gradient on one rank -----------------------------------------------------------------
# fp32: every rank stops with the message of the rank whose gradient held it. Mixed precision: the
# NaN reaches every rank through the sums, so all skip that step and go on; one more step skipped
# than in the same run without the NaN, and every rank's final weights identical.
skipped_steps() { sed -n 's/.*mixed precision: \([0-9]*\) step(s) skipped.*/\1/p' "$1" | head -1; }
check_nan() {
  local args=("${COMMON[@]}" --codec fp32 --collective ring --iterations 20 --print-digest) ok=1 r t0
  t0=$(now)
  run_job nan-fp32 none "${args[@]}" --inject-nan 1:5
  [ "$RC" -ne 0 ] || ok=0
  for r in $(topo_nodes); do grep -aqE "^\[[0-9]*,$r\]<stderr>:.*layer '.*' has a non-finite gradient" "$LOG" || ok=0; done
  for r in 0 2; do grep -aqE "^\[[0-9]*,$r\]<stderr>:.*rank 1 failed" "$LOG" || ok=0; done
  row "rank 1's gradient holds a NaN at iteration 5 (fp32, ring)" "$(first_errors "$LOG")" "$(elapsed "$t0" "$T_END") (whole run)" \
    "$RC" "the run (no checkpoint asked for); no rank applied the NaN" $ok

  args+=(--precision mixed --loss-scale 1024)  # a scale that does not overflow by itself here
  run_job nan-mixed-clean none "${args[@]}"
  local clean
  clean=$(skipped_steps "$LOG")
  local skipped digests
  t0=$(now)
  run_job nan-mixed none "${args[@]}" --inject-nan 1:5
  skipped=$(skipped_steps "$LOG")
  digests=$(grep -aoE "rank [0-9]+ weights digest [0-9a-f]+" "$LOG" | awk '{print $5}' | sort | uniq -c)
  ok=1
  [ "$RC" -eq 0 ] && [ -n "$clean" ] && [ "$skipped" = $((clean + 1)) ] || ok=0
  [ "$(echo "$digests" | awk 'NF' | wc -l)" = 1 ] && [ "$(echo "$digests" | awk '{print $1}')" = $NODES ] || ok=0
  row "rank 1's gradient holds a NaN at iteration 5 (--precision mixed --loss-scale 1024, ring)" \
    "$(first_errors "$LOG" | sed 's/rank [0-9]: (nothing)\(<br>\)\{0,1\}//g')the run finished: $skipped step(s) skipped ($clean without the NaN), every rank's final weights identical" \
    "$(elapsed "$t0" "$T_END") (whole run)" "$RC" "one step, skipped on every rank alike" $ok
}

check_kill default 2
# Under --enable-recovery mpirun lets the survivors run on: they must settle between them which
# rank is gone (schedule::Watchdog) and each name it. Rank 0 decides every unit's turn:
# its followers must name it too, not time out on a decision that never comes.
check_kill recovery 2 --enable-recovery
[ $smoke = 1 ] || check_kill recovery 0 --enable-recovery
mismatch model "another model (--model vgg11 --width 0.125)" --model vgg11 --width 0.125
mismatch codec "another codec (--codec qsgd4)" --codec qsgd4
[ $smoke = 1 ] || mismatch slicing "another slicing (--slicing fixed:20000)" --slicing fixed:20000
check_nan

if [ $smoke = 0 ]; then
  # --- b. a link cut and restored, or cut for good -------------------------------------------------
  cut_node1() { # for $CUT seconds, $DELAY s after rank 1 started
    wait_for_rank 1 || return
    sleep "$DELAY"
    stamp
    topo_cut 1
    sleep "$CUT"
    topo_restore 1
  }
  for coll in ring ps; do
    args=("${COMMON[@]}" --codec fp32 --collective "$coll" --iterations 300)
    run_job "uncut-$coll" none "${args[@]}" --checkpoint "$out/ckpt/uncut-$coll"
    t_start=$T_END
    DELAY=3 CUT=2 run_job "cut2s-$coll" cut_node1 "${args[@]}" --checkpoint "$out/ckpt/cut2s-$coll"
    ok=1
    [ "$RC" -eq 0 ] && cmp -s "$out/ckpt/uncut-$coll" "$out/ckpt/cut2s-$coll" || ok=0
    same=$(cmp -s "$out/ckpt/uncut-$coll" "$out/ckpt/cut2s-$coll" && echo "bit-identical" || echo "DIFFERENT")
    row "node 1's link cut for 2 s (3 s into a $coll fp32 run of 300 iterations), then restored" \
      "$(first_errors "$LOG")<br>the run finished; final checkpoint $same to an uncut run's" \
      "$(elapsed "$T_INJECT" "$T_END") (cut to end)" "$RC" "nothing: weights and momentum $same" $ok
  done
  # Cut until every rank has exited (at most $CUT s): mpirun itself hears of the cut node's rank
  # only once the link is back, so the time that counts is until the ranks are gone.
  cut_node1_for_good() {
    wait_for_rank 1 || return
    sleep "$DELAY"
    stamp
    topo_cut 1
    local until=$(($(date +%s) + CUT))
    while any_trainer_left && [ "$(date +%s)" -lt $until ]; do sleep 0.05; done
    now >"$out/ranks_gone.t"
    topo_restore 1
  }
  rm -f "$out/ranks_gone.t"
  DELAY=3 CUT=$((timeout_s * 3)) run_job "cut-long" cut_node1_for_good "${COMMON[@]}" --codec fp32 --collective ring \
    --iterations 100000
  ok=1
  took="$(elapsed "$T_INJECT" "$(cat "$out/ranks_gone.t" 2>/dev/null || echo "$T_END")") (mpirun: $(elapsed "$T_INJECT" "$T_END"))"
  [ "$RC" -ne 0 ] || ok=0
  awk -v t="${took%% *}" -v m="$((timeout_s + 5))" 'BEGIN {exit !(t <= m)}' || ok=0
  # The ranks that can still talk to each other name the cut-off one.
  for r in 0 2; do grep -aqE "^\[[0-9]*,$r\]<stderr>:.*rank 1 stopped answering" "$LOG" || ok=0; done
  row "node 1's link cut for good ($((timeout_s * 3)) s > --timeout $timeout_s)" "$(first_errors "$LOG")" "$took" "$RC" \
    "the run (no checkpoint asked for)" $ok

  # --- c. restart: killed after a checkpoint, resumed on a fresh mpirun ----------------------------
  kill_after_checkpoint() { # SIGKILL rank 2 once $CKPT (and every rank's codec state) is at >= 20
    local it _ r
    for _ in $(seq 1200); do
      it=$(ckpt_iteration "$CKPT")
      if [ "$it" -ge 20 ]; then
        local same=1
        if [ "$STATEFUL" = 1 ]; then
          for r in $(topo_nodes); do [ "$(ckpt_iteration "$CKPT.rank$r")" = "$it" ] || same=0; done
        fi
        [ $same = 0 ] || break
      fi
      sleep 0.05
    done
    stamp
    kill -9 "$(trainer_pids 2 | head -1)"
  }
  # "mixed": fp32 under --precision mixed, whose checkpoint carries the loss scaler's state.
  for codec in fp32 ef+qsgd4 onebit mixed; do
    STATEFUL=1
    [ "$codec" != fp32 ] && [ "$codec" != mixed ] || STATEFUL=0
    tag=${codec//+/-}
    args=("${COMMON[@]}" --codec "$codec" --collective ring --iterations 200)
    [ "$codec" != mixed ] || args=("${COMMON[@]}" --codec fp32 --precision mixed --collective ring --iterations 200)
    run_job "full-$tag" none "${args[@]}" --checkpoint "$out/ckpt/full-$tag"
    CKPT=$out/ckpt/part-$tag
    run_job "killed-$tag" kill_after_checkpoint "${args[@]}" --checkpoint "$CKPT" --checkpoint-every 10
    killed_rc=$RC
    at=$(ckpt_iteration "$CKPT")
    t0=$(now)
    run_job "resumed-$tag" none "${args[@]}" --resume "$CKPT" --checkpoint "$out/ckpt/resumed-$tag"
    ok=1
    [ "$killed_rc" -ne 0 ] && [ "$RC" -eq 0 ] || ok=0
    diff=""
    cmp -s "$out/ckpt/full-$tag" "$out/ckpt/resumed-$tag" || diff+=" weights/momentum"
    if [ $STATEFUL = 1 ]; then
      for r in $(topo_nodes); do
        cmp -s "$out/ckpt/full-$tag.rank$r" "$out/ckpt/resumed-$tag.rank$r" || diff+=" residuals-rank$r"
      done
    fi
    [ -z "$diff" ] || ok=0
    what="weights, momentum, BN statistics$([ $STATEFUL = 1 ] && echo ", every rank's codec residuals")$([ "$codec" = mixed ] && echo ", loss scale") bit-identical"
    [ -z "$diff" ] || what="DIFFERENT:$diff"
    row "${codec/mixed/fp32 --precision mixed} ring run (200 iterations, --checkpoint-every 10) killed (rank 2 SIGKILL) at iteration >= $at; --resume on a fresh mpirun" \
      "killed run: exit $killed_rc; resumed run: $(first_errors "$LOG" | sed 's/rank [0-9]: (nothing)\(<br>\)\{0,1\}//g')finished" \
      "$(elapsed "$t0" "$T_END") (the resumed run)" "$RC" "the iterations after the checkpoint at $at (redone); $what" $ok
  done
fi

{
  echo "# Fault injection across network namespaces ($(date -u +%Y-%m-%d), $(nproc) cores)"
  echo
  echo "3 nodes, every link shaped to $link, gradsync-train under mpirun (one rank per node, btl tcp over"
  echo "the links), \`${COMMON[*]}\`. Times: from the injection until every rank's process had exited."
  echo
  echo "| injected | what the user sees (first error line of each rank) | seconds | mpirun exit | lost | check |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out/results.md"
cat "$out/results.md"
[ $failures -eq 0 ] || { echo "faults: $failures check(s) FAILED" >&2; exit 1; }
echo "faults: every check passed"
