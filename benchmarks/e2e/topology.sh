#!/usr/bin/env bash
# A cluster on one machine: N nodes, each in its own network namespace, joined by veth pairs to a
# bridge (in a namespace of its own), plus a launcher namespace on the same bridge for mpirun.
# Each node's link is shaped with tbf on both ends (its uplink and the bridge port: both
# directions). Only the namespaces' own addresses are used; nothing in the host's namespace changes.
#
# Source it for the functions (fault injection and the sweep do), or run it: `topology.sh help`.
#
#   source benchmarks/e2e/topology.sh
#   topo_create 2               # namespaces gse2e-<pid>-<rand>-{br,run,n0,n1}; torn down on exit
#   topo_shape all 1gbit        # or one node: topo_shape 1 300mbit; "unlimited" removes the shaping
#   topo_exec 0 hostname        # a command in node 0's namespace
#   topo_mpirun run.log -np 2 --host "$(topo_hosts)" ./prog   # mpirun across the nodes, retried
#   topo_on_each_node run.log ./prog --rank %RANK%            # a process per node, no mpirun
#   topo_cut 1; topo_restore 1  # node 1's link silently drops everything / carries again
#   topo_cpu_seconds            # CPU time of this shell and all it started since topo_create
#   topo_destroy                # also runs on EXIT, INT and TERM once topo_create has run
#
# Layout (addresses in TOPO_SUBNET; every namespace is its own network, so two topologies with
# the same subnet never see each other):
#   node i:   namespace <id>-n<i>, interface eth0, 10.77.0.<i+1>; bridge port p<i>
#   launcher: namespace <id>-run,  interface eth0, 10.77.0.254;   bridge port prun (never shaped)

# TOPO_PREFIX and TOPO_NET may be set before sourcing (e.g. fault injection uses gsf and 10.78.0)
# so that its namespaces are told apart from the sweep's; topo_create exports them for mpirun's agent.
TOPO_PREFIX=${TOPO_PREFIX:-gse2e}
TOPO_NET=${TOPO_NET:-10.77.0}
TOPO_SUBNET=$TOPO_NET.0/24
TOPO_E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Open MPI's daemons start inside the namespaces and fail there now and then (a segfault in
# hwloc_shmem_topology_write; about 1 start in 8): mpirun's output then holds one of these.
TOPO_MPI_START_FAILURE='ORTE was unable to reliably start|ORTE has lost communication|hwloc_shmem|orted.*(Segmentation|signal 11)'
TOPO_MPI_ATTEMPTS=${TOPO_MPI_ATTEMPTS:-5}

topo_die() {
  echo "topology: $*" >&2
  exit 1
}

# topo_skip_unless_usable NAME TRAINER: for ctest scripts: prints "NAME SKIPPED: why" and exits
# 77 (ctest: skipped) where a topology cannot run gradsync-train here (not root, no mpirun,
# TRAINER not built, no network namespaces).
topo_skip_unless_usable() {
  local why='' probe=$TOPO_PREFIX-probe-$$
  if [ "$(id -u)" -ne 0 ]; then why="network namespaces need root (run as root)"
  elif ! command -v mpirun >/dev/null; then why="mpirun is missing (apt-get install openmpi-bin)"
  elif [ ! -x "$2" ]; then why="$2 is not built"
  elif ! ip netns add "$probe" 2>/dev/null; then why="cannot create a network namespace here (no CAP_SYS_ADMIN?)"
  else
    ip netns del "$probe"
    return 0
  fi
  echo "$1 SKIPPED: $why"
  exit 77
}

# The checks every entry point needs; each message names the fix.
topo_require() {
  [ "$(id -u)" -eq 0 ] || topo_die "network namespaces need root: run as root (sudo $0 ...)"
  command -v ip >/dev/null && command -v tc >/dev/null ||
    topo_die "ip and tc are missing: apt-get install iproute2"
}

topo_ns() { # node index | run | br -> namespace name
  case $1 in
    run | br) echo "$TOPO_ID-$1" ;;
    *) echo "$TOPO_ID-n$1" ;;
  esac
}
topo_addr() { echo "$TOPO_NET.$(($1 + 1))"; }
topo_nodes() { seq 0 $((TOPO_NODES - 1)); }
# Node index of an address of this topology (the mpirun agent maps a host to its namespace).
topo_node_of() {
  local last=${1##*.}
  [[ $1 == "$TOPO_NET".* && $last -ge 1 && $last -le $TOPO_NODES ]] ||
    topo_die "$1 is not a node address of topology $TOPO_ID ($TOPO_NET.1-$TOPO_NODES)"
  echo $((last - 1))
}
topo_hosts() { # "10.77.0.1:1,10.77.0.2:1": one slot per node, for mpirun --host
  local i hosts=()
  for i in $(topo_nodes); do hosts+=("$(topo_addr "$i"):1"); done
  (IFS=,; echo "${hosts[*]}")
}
topo_exec() { # node command...: run a command in a node's namespace
  local node=$1
  shift
  ip netns exec "$(topo_ns "$node")" "$@"
}

# Creates the namespaces, the bridge and the links (unshaped), and arranges for topo_destroy to
# run however the shell ends. Sets and exports TOPO_ID and TOPO_NODES.
topo_create() {
  local nodes=$1 i
  [[ $nodes =~ ^[1-9][0-9]*$ && $nodes -le 200 ]] || topo_die "node count must be 1-200, got '$nodes'"
  topo_require
  export TOPO_ID="$TOPO_PREFIX-$$-$RANDOM" TOPO_NODES=$nodes TOPO_PREFIX TOPO_NET
  trap topo_destroy EXIT
  trap 'exit 130' INT # exit runs the EXIT trap
  trap 'exit 143' TERM
  topo_cgroup_join
  local br
  br=$(topo_ns br)
  ip netns add "$br" || topo_die "cannot create network namespace $br (is this a container without CAP_SYS_ADMIN?)"
  ip -n "$br" link set lo up
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  for i in $(topo_nodes) run; do
    local ns addr port=p$i
    ns=$(topo_ns "$i")
    if [ "$i" = run ]; then addr=$TOPO_NET.254; else addr=$(topo_addr "$i"); fi
    ip netns add "$ns"
    # Both ends are created inside their namespaces: no interface ever appears in the host's.
    ip link add eth0 netns "$ns" type veth peer name "$port" netns "$br"
    ip -n "$br" link set "$port" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
}

# Ends every process inside the topology's namespaces (all of them first, so that none sees its
# links vanish) and deletes the namespaces. Safe to call twice.
topo_destroy() {
  [ -n "${TOPO_ID:-}" ] || return 0
  local namespaces ns pids _
  namespaces=$(ip netns list | awk -v p="^$TOPO_ID-" '$1 ~ p {print $1}')
  topo_pids() { for ns in $namespaces; do ip netns pids "$ns" 2>/dev/null; done; }
  pids=$(topo_pids)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null
    for _ in $(seq 50); do # up to 5 s: mpirun ends its daemons itself when given the time
      sleep 0.1
      pids=$(topo_pids)
      [ -n "$pids" ] || break
    done
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
  fi
  for ns in $namespaces; do ip netns del "$ns"; done
  topo_cgroup_leave
  TOPO_ID=
}

# The calling shell and everything it starts from now on join a cgroup (v2) of the topology's
# own, so that topo_cpu_seconds counts every process of the runs - also those mpirun's daemons
# leave to init, whose CPU time never reaches their parents' rusage. Without a writable cgroup v2
# hierarchy, TOPO_CGROUP stays empty and topo_cpu_seconds prints nothing.
topo_cgroup_join() {
  local root
  root=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
  TOPO_CGROUP=
  [ -n "$root" ] && mkdir "$root/$TOPO_ID" 2>/dev/null || return 0
  if echo $$ 2>/dev/null >"$root/$TOPO_ID/cgroup.procs"; then
    TOPO_CGROUP=$root/$TOPO_ID
  else
    rmdir "$root/$TOPO_ID"
  fi
}
topo_cpu_seconds() {
  [ -z "${TOPO_CGROUP:-}" ] || awk '$1 == "usage_usec" {printf "%.3f\n", $2 / 1e6}' "$TOPO_CGROUP/cpu.stat"
}
# Back to the parent cgroup; whatever is left in ours (it escaped the namespaces) is killed.
topo_cgroup_leave() {
  [ -n "${TOPO_CGROUP:-}" ] || return 0
  echo $$ >"$(dirname "$TOPO_CGROUP")/cgroup.procs"
  [ ! -e "$TOPO_CGROUP/cgroup.kill" ] || echo 1 >"$TOPO_CGROUP/cgroup.kill"
  local _
  for _ in $(seq 20); do rmdir "$TOPO_CGROUP" 2>/dev/null && break; sleep 0.1; done
  TOPO_CGROUP=
}

# Shapes node i's link (or every node's: "all") to rate in both directions; "unlimited" removes it.
topo_shape() {
  local target=$1 rate=$2 i
  [[ $rate == unlimited || $rate =~ ^[0-9]+(k|m|g)bit$ ]] ||
    topo_die "link rate must be unlimited or like 300mbit, 1gbit, 10gbit (tc units), got '$rate'"
  for i in $([ "$target" = all ] && topo_nodes || echo "$target"); do
    local dev
    for dev in "$(topo_ns "$i") eth0" "$(topo_ns br) p$i"; do
      set -- $dev
      if [ "$rate" = unlimited ]; then
        ip -n "$1" link show "$2" >/dev/null && { tc -n "$1" qdisc del dev "$2" root 2>/dev/null || true; }
      else
        if [ -n "${TOPO_DSCP_PRIO:-}" ]; then topo_prio_dscp "$1" "$2" "$rate"
        else tc -n "$1" qdisc replace dev "$2" root tbf rate "$rate" burst 256kb latency 50ms; fi
      fi
    done
  done
}

# topo_prio_dscp NS DEV RATE: DEV shaped to RATE with strict priority, as a switch honouring
# DSCP would forward: packets marked CS1 (TOS 0x20: the best-effort channel's datagrams) go only
# when nothing else waits; everything else is high. HTB, because this kernel has no prio qdisc:
# the high class may take the whole rate, the low one borrows what is left. topo_shape uses it
# instead of tbf when TOPO_DSCP_PRIO is set. TOPO_LOW_QUEUE=N gives the low class a queue of N
# packets (a switch's shallow low-priority buffer; 0 drops all of it at the sender) instead of
# the device's default (txqueuelen, 1000).
topo_prio_dscp() {
  local t=(tc -n "$1")
  "${t[@]}" qdisc del dev "$2" root 2>/dev/null || true # a fresh tree: htb cannot be replaced in place
  "${t[@]}" qdisc add dev "$2" root handle 1: htb default 10
  "${t[@]}" class add dev "$2" parent 1: classid 1:1 htb rate "$3" ceil "$3" burst 256kb quantum 60000
  "${t[@]}" class add dev "$2" parent 1:1 classid 1:10 htb rate "$3" ceil "$3" burst 256kb quantum 60000 prio 0
  "${t[@]}" class add dev "$2" parent 1:1 classid 1:20 htb rate 1mbit ceil "$3" burst 256kb quantum 60000 prio 1
  "${t[@]}" filter add dev "$2" parent 1: protocol ip prio 1 u32 match ip tos 0x20 0xfc flowid 1:20
  [ -z "${TOPO_LOW_QUEUE:-}" ] || "${t[@]}" qdisc add dev "$2" parent 1:20 handle 20: pfifo limit "$TOPO_LOW_QUEUE"
}

# topo_linkspeed FROM TO [SECONDS]: bits per second of one TCP stream from node FROM to node TO.
topo_linkspeed() {
  local port=5999
  ip netns exec "$(topo_ns "$2")" /usr/bin/python3 "$TOPO_E2E_DIR/linkspeed.py" serve $port &
  local server=$!
  topo_exec "$1" /usr/bin/python3 "$TOPO_E2E_DIR/linkspeed.py" send "$(topo_addr "$2")" $port "${3:-1}"
  wait $server
}

# topo_traffic_start: every node streams TCP to the next one (a ring, as the ring all-reduce
# loads the links: each node's link full in both directions) until topo_traffic_stop. The kernel
# work of moving those bytes (veth, bridge, tbf, TCP) runs on the same cores as the ranks: a
# compute-only run next to it measures the compute the machine has left at line rate.
TOPO_TRAFFIC_PIDS=() TOPO_TRAFFIC_SENDERS=()
topo_traffic_start() {
  local i port=5998
  for i in $(topo_nodes); do
    ip netns exec "$(topo_ns "$i")" /usr/bin/python3 "$TOPO_E2E_DIR/linkspeed.py" serve $port &
    TOPO_TRAFFIC_PIDS+=($!)
  done
  for i in $(topo_nodes); do
    ip netns exec "$(topo_ns "$i")" /usr/bin/python3 "$TOPO_E2E_DIR/linkspeed.py" flood \
      "$(topo_addr $(((i + 1) % TOPO_NODES)))" $port &
    TOPO_TRAFFIC_SENDERS+=($!)
  done
}
topo_traffic_stop() {
  [ ${#TOPO_TRAFFIC_SENDERS[@]} -eq 0 ] || kill -TERM "${TOPO_TRAFFIC_SENDERS[@]}" 2>/dev/null
  wait "${TOPO_TRAFFIC_SENDERS[@]}" "${TOPO_TRAFFIC_PIDS[@]}" 2>/dev/null
  TOPO_TRAFFIC_PIDS=() TOPO_TRAFFIC_SENDERS=()
}

# Cuts node i's link at the bridge: both ends keep their carrier, every frame is dropped (a dead
# switch port or a partition, not an unplugged cable: peers only notice by timeouts).
topo_cut() { ip -n "$(topo_ns br)" link set "p$1" nomaster; }
topo_restore() { ip -n "$(topo_ns br)" link set "p$1" master br0; }

# topo_mpirun LOG mpirun-arguments...: mpirun in the launcher namespace with the ranks' daemons
# started in the nodes' namespaces (rsh_agent.sh) and every byte between ranks over the links
# (btl tcp restricted to the topology's subnet: no shared memory, no loopback). Output goes to
# LOG. --bind-to none: every node's daemon believes it has the machine to itself and binds its
# first rank to core 0, so all ranks (compute and communication threads) would share one core.
# A daemon start that fails (TOPO_MPI_START_FAILURE) is retried; returns mpirun's status.
# TOPO_TIMEOUT (seconds, default none) ends an attempt that runs longer (status 124).
topo_mpirun() {
  local log=$1 attempt rc
  shift
  : >"$log"
  for attempt in $(seq "$TOPO_MPI_ATTEMPTS"); do
    echo "=== topo_mpirun attempt $attempt: mpirun $*" >>"$log"
    local from
    from=$(wc -l <"$log")
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 10 "${TOPO_TIMEOUT:-0}" \
      ip netns exec "$(topo_ns run)" mpirun --oversubscribe --bind-to none \
      --mca plm_rsh_agent "$TOPO_E2E_DIR/rsh_agent.sh" --mca btl self,tcp \
      --mca btl_tcp_if_include "$TOPO_SUBNET" --mca oob_tcp_if_include "$TOPO_SUBNET" "$@" >>"$log" 2>&1 &
    wait $! # (a foreground command would hold off the INT/TERM traps until it ended)
    rc=$?
    [ $rc -eq 0 ] && return 0
    tail -n +"$((from + 1))" "$log" | grep -qE "$TOPO_MPI_START_FAILURE" || return $rc
    echo "=== topo_mpirun: an MPI daemon failed to start in its namespace; retrying" >>"$log"
  done
  return $rc
}

# topo_on_each_node LOG COMMAND...: COMMAND in every node's namespace at once, %RANK% replaced by
# the node's index, output to LOG; waits for all and returns the first failure. TOPO_TIMEOUT
# (seconds, default none) ends them.
topo_on_each_node() {
  local log=$1 i pids=() rc=0 status
  shift
  for i in $(topo_nodes); do
    topo_exec "$i" timeout -k 10 "${TOPO_TIMEOUT:-0}" "${@//%RANK%/$i}" >>"$log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do
    wait "$i"
    status=$?
    [ $rc -ne 0 ] || rc=$status
  done
  return $rc
}

# Deletes the namespaces and cgroups of topologies whose shell is gone (killed with SIGKILL: no
# trap ran).
topo_clean_stale() {
  local ns pid cgroup root
  for ns in $(ip netns list | awk -v p="^$TOPO_PREFIX-" '$1 ~ p {print $1}'); do
    pid=${ns#"$TOPO_PREFIX"-}
    pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null && continue
    echo "topology: removing stale namespace $ns (its shell $pid is gone)" >&2
    TOPO_ID=${ns%-*} topo_destroy
  done
  root=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/mounts)
  for cgroup in "${root:-/nonexistent}/$TOPO_PREFIX"-*; do
    [ -d "$cgroup" ] || continue
    pid=${cgroup##*/"$TOPO_PREFIX"-}
    kill -0 "${pid%%-*}" 2>/dev/null && continue
    [ ! -e "$cgroup/cgroup.kill" ] || echo 1 >"$cgroup/cgroup.kill"
    sleep 0.1
    rmdir "$cgroup" && echo "topology: removed stale cgroup $cgroup" >&2
  done
}

topo_usage() {
  cat <<EOF
usage: topology.sh demo [NODES [RATE]]   create, list, measure node 0 -> last node, tear down
       topology.sh clean                 delete namespaces left by killed runs ($TOPO_PREFIX-<pid>-...)
       source topology.sh                the topo_* functions (see the header of this file)
EOF
}

# Run as a program: a few commands for trying the topology by hand.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  case ${1:-help} in
    demo)
      topo_create "${2:-2}"
      topo_shape all "${3:-1gbit}"
      echo "topology $TOPO_ID: $TOPO_NODES node(s) at ${3:-1gbit}, launcher $TOPO_NET.254"
      ip netns list | grep "^$TOPO_ID-"
      bps=$(topo_linkspeed 0 $((TOPO_NODES - 1)) 2)
      echo "one TCP stream node 0 -> node $((TOPO_NODES - 1)): $(awk -v b="$bps" 'BEGIN {printf "%.2f", b / 1e9}') Gbit/s"
      ;;
    clean)
      topo_require
      topo_clean_stale
      ;;
    *) topo_usage ;;
  esac
fi
