# Sourced by retune.sh and tune_steady.sh. ranks_alike TAG MISSING: in gradsync-train's output
# $out (run with --print-digest), at least 2 ranks printed their weights' digest, all the same, and
# each printed the same lines after "gradsync-train: rank R: TAG: " (rank 0's are left in
# $reference, the ranks in $ranks); MISSING says why a rank without such lines fails. The caller
# defines fail().
ranks_alike() {
  ranks=$(echo "$out" | sed -n 's/.*rank \([0-9]*\) weights digest .*/\1/p' | sort -n)
  [ "$(echo "$ranks" | wc -w)" -ge 2 ] || fail "fewer than 2 ranks printed their digest"
  [ "$(echo "$out" | sed -n 's/.*weights digest //p' | sort -u | wc -l)" = 1 ] || fail "the ranks' weights differ"
  reference=''
  local r mine
  for r in $ranks; do
    mine=$(echo "$out" | sed -n "s/^gradsync-train: rank $r: $1: //p")
    [ -n "$mine" ] || fail "rank $r: $2"
    [ -z "$reference" ] && reference=$mine
    [ "$mine" = "$reference" ] || fail "rank $r's $1 differs: '$mine' against rank 0's '$reference'"
  done
}
