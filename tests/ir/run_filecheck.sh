#!/bin/sh
# Runs one golden IR file the way lit would: its `# RUN: MODE [ARG]` line picks the ir_tool mode
# (ARG defaults to the file itself) and FileCheck matches the output against the file's CHECK lines.
set -eu
tool=$1 filecheck=$2 file=$3
run=$(sed -n 's/^# RUN: *//p' "$file" | head -n 1)
[ -n "$run" ] || { echo "$file: no '# RUN:' line" >&2; exit 1; }
mode=${run%% *}
arg=${run#"$mode"}
arg=${arg# }
[ -n "$arg" ] || arg=$file
out=$("$tool" "$mode" "$arg") || { echo "$out"; echo "ir_tool $mode failed" >&2; exit 1; }
printf '%s\n' "$out" | "$filecheck" --dump-input=fail "$file"
