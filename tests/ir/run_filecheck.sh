#!/bin/sh
# Runs one golden IR file the way lit would: its `# RUN: MODE [ARG]` line picks the ir_tool mode
# (`ir_tool MODE [ARG] FILE`) and FileCheck matches the output against the file's CHECK lines.
set -eu
tool=$1 filecheck=$2 file=$3
run=$(sed -n 's/^# RUN: *//p' "$file" | head -n 1)
[ -n "$run" ] || { echo "$file: no '# RUN:' line" >&2; exit 1; }
mode=${run%% *}
arg=${run#"$mode"}
arg=${arg# }
out=$("$tool" "$mode" $arg "$file") || { echo "$out"; echo "ir_tool $mode $arg failed" >&2; exit 1; }
printf '%s\n' "$out" | "$filecheck" --dump-input=fail "$file"
