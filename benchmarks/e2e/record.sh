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
