#!/usr/bin/env bash
# mpirun's launch agent (--mca plm_rsh_agent) inside a topology: where mpirun would ssh to a host,
# this runs the command in the namespace of the node that owns the address. mpirun passes its
# environment (TOPO_ID, TOPO_NODES from topo_create) down to us.
# usage (by mpirun): rsh_agent.sh HOST COMMAND...
source "$(dirname "$0")/topology.sh"
host=$1
shift
node=$(topo_node_of "$host") || exit 1
exec ip netns exec "$(topo_ns "$node")" /bin/sh -c "$*"
