#!/bin/sh
# One golden IR test of the script lowering: the file's `# RUN: ir FUNC` (or `dot FUNC`) line names the
# kiln command and function; FileCheck matches its output against the file's CHECK lines.
#   run_ir_check.sh KILN FILECHECK FILE.py
set -eu
kiln=$1 filecheck=$2 file=$3
run=$(sed -n 's/^# RUN: *//p' "$file" | head -n 1)
[ -n "$run" ] || { echo "$file: no '# RUN:' line" >&2; exit 1; }
mode=${run%% *}
fn=${run#"$mode" }
out=$("$kiln" "$mode" "$file" $fn) || { echo "$out"; echo "kiln $mode failed" >&2; exit 1; }
printf '%s\n' "$out" | "$filecheck" --dump-input=fail "$file"
