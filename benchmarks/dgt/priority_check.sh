#!/usr/bin/env bash
# Does the emulated link give the reliable traffic strict priority over DGT's datagrams? One TCP
# stream from node 0 to node 1 across links shaped as table1.sh shapes them (TOPO_DSCP_PRIO),
# alone and next to a flood of 1 KB UDP datagrams marked CS1, as the best-effort channel marks
# them; then the bytes each class carried on node 0's uplink. Run as root; about 20 s.
#
#   benchmarks/dgt/priority_check.sh [RATE]        # default 200mbit
set -uo pipefail
DGT_DIR=$(cd "$(dirname "$0")" && pwd)
source "$DGT_DIR/../e2e/topology.sh"
rate=${1:-200mbit}
[ "$(id -u)" -eq 0 ] || topo_die "network namespaces need root"
TOPO_DSCP_PRIO=1
topo_create 2 >/dev/null || topo_die "cannot create the topology"
topo_shape all "$rate"
alone=$(topo_linkspeed 0 1 3)
# the flood: node 0 sends CS1 datagrams as fast as the socket takes them, node 1 reads them
flood='import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
if sys.argv[1] == "send":
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x20)
    s.setblocking(False)
    end, data = time.time() + 6, bytes(1056)
    while time.time() < end:
        try: s.sendto(data, (sys.argv[2], 7000))
        except OSError: time.sleep(0.0002)
else:
    s.bind(("", 7000)); s.setblocking(False)
    end = time.time() + 8
    while time.time() < end:
        try: s.recv(2048)
        except BlockingIOError: time.sleep(0.0005)'
ip netns exec "$(topo_ns 1)" python3 -c "$flood" recv &
topo_exec 0 python3 -c "$flood" send "$(topo_addr 1)" &
sleep 1
flooded=$(topo_linkspeed 0 1 3)
wait
awk -v a="$alone" -v f="$flooded" -v r="$rate" \
  'BEGIN {printf "priority_check: %s: one TCP stream %.1f Mbit/s alone, %.1f Mbit/s next to a CS1 flood\n", r, a / 1e6, f / 1e6}'
tc -n "$(topo_ns 0)" -s class show dev eth0 | awk '/^class/ {c = $3} /Sent/ {printf "  class %s (%s): %.1f MB\n", c, c == "1:20" ? "CS1" : c == "1:10" ? "reliable" : "link", $2 / 1e6}'
topo_destroy
