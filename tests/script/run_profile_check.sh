#!/bin/sh
# `kiln profile` on tests/script/profile/gram.py: the table's rows (calls and FLOPs of each op, a
# scripted loop counted per iteration), the memory section, and the Chrome trace written by --trace.
#   run_profile_check.sh KILN SCRIPT_DIR NPY_DIR
set -eu
kiln=$1 dir=$2 npy=$3
trace=$(mktemp)
trap 'rm -f "$trace"' EXIT
out=$("$kiln" profile "$dir/profile/gram.py" gram "$npy/f4_2x3.npy" 3 --trace "$trace")
echo "$out"
fail() { echo "run_profile_check: $1" >&2; exit 1; }
# x [2,3]: x @ x.t() is 2*2*2*3 FLOPs; relu, each of 3 adds and the sum 4 each.
echo "$out" | grep -Eq '^matmul +1 +24 ' || fail "no matmul row with 1 call and 24 FLOPs"
echo "$out" | grep -Eq '^add +3 +12 ' || fail "no add row with 3 calls and 12 FLOPs"
echo "$out" | grep -Eq '^permute +1 +0 ' || fail "no permute row with 0 FLOPs"
echo "$out" | grep -Eq '^total +7 +44 ' || fail "total is not 7 ops and 44 FLOPs"
echo "$out" | grep -Eq '^total \(allocator\)' || fail "no memory section"
head -c 40 "$trace" | grep -q '{"displayTimeUnit":"ms","traceEvents":\[' || fail "trace does not start as a trace object"
[ "$(grep -c '"ph":"X"' "$trace")" -eq 7 ] || fail "trace does not hold 7 complete events"
"$kiln" profile "$dir/profile/gram.py" gram "$npy/f4_2x3.npy" 2>&1 | grep -q 'kiln profile: gram takes 2 arguments, got 1' ||
  fail "a missing argument is not reported"
