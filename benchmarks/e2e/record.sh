# shellcheck shell=bash
# record KEY=VALUE...: appends one line of JSON to the file "$runs" (the sweeps' runs.jsonl);
# values are numbers, plain words or empty (null). Sourced by sweep.sh and ../torch/sweep.sh.
record() {
  local kv fields=()
  for kv in "$@"; do
    local v=${kv#*=}
    [ -n "$v" ] || v=null
    [[ $v =~ ^(-?[0-9.]+|null)$ ]] || v="\"$v\""
    fields+=("\"${kv%%=*}\": $v")
  done
  (IFS=,; echo "{${fields[*]}}") >>"$runs"
}

# record_machine: one line saying where and on what the results were measured - the CPU model,
# cores, memory, the commit (and whether the tree had changes), the compiler - so figures quoted
# from these results name their machine.
record_machine() {
  local repo cpu commit dirty=0
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null)
  git -C "$repo" diff --quiet HEAD 2>/dev/null || dirty=1
  record machine="${cpu//\"/}" cores="$(getconf _NPROCESSORS_ONLN)" memory_gib="$(awk '/MemTotal/ {printf "%.1f", $2 / 1048576}' /proc/meminfo)" \
    commit="$commit" tree_changed=$dirty compiler="$(c++ --version 2>/dev/null | head -1 | tr -d '"')" date="$(date -u +%FT%TZ)"
}
