#!/bin/sh
# `kiln check FILE` without a class: each class that builds with its defaults is built and its forward
# lowered; every independent error is reported (exit 1), a class that needs arguments is named as skipped.
#   run_check_all.sh KILN CHECK_DIR
kiln="$1"; dir="$2"
f="$dir/classes.py"
err=$("$kiln" check "$f" 2>&1 >/dev/null) && { echo "kiln check $f passed, expected errors"; exit 1; }
out=$("$kiln" check "$f" 2>/dev/null)
n=$(echo "$err" | grep -c ": error: ")
[ "$n" = 2 ] || { echo "expected 2 errors, got $n:"; echo "$err"; exit 1; }
echo "$err" | grep -q "^$f:29:[0-9]*: error: " || { echo "no error on line 29:"; echo "$err"; exit 1; }
echo "$err" | grep -q "^$f:31:[0-9]*: error: " || { echo "no error on line 31:"; echo "$err"; exit 1; }
echo "$out" | grep -qx "$f:34:7: class Sized skipped: its __init__ needs 'width', 'depth' (kiln check $f Sized ARGS...)" ||
  { echo "Sized not named as skipped: $out"; exit 1; }
# given its arguments, the skipped class is checked, and is clean
"$kiln" check "$f" Sized 4 depth=2 || { echo "kiln check $f Sized 4 depth=2 failed"; exit 1; }
echo "ok"
