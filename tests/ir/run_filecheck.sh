#!/bin/sh
# Runs one golden IR file the way lit would: its `# RUN: MODE [ARG]` line picks the ir_tool mode
# (`ir_tool MODE [ARG] FILE`) and FileCheck matches the output against the file's CHECK lines.
# A line `# -----` splits the file into cases (MLIR's split-input-file): each runs on its own, the
# outputs are joined in order, and each case's checks start with a CHECK-LABEL. A case's file keeps the
# original name and line numbers (the other cases' lines blanked), so `file:line:col` errors read the same.
set -eu
tool=$1 filecheck=$2 file=$3
run=$(sed -n 's/^# RUN: *//p' "$file" | head -n 1)
[ -n "$run" ] || { echo "$file: no '# RUN:' line" >&2; exit 1; }
mode=${run%% *}
arg=${run#"$mode"}
arg=${arg# }
cases=$(awk '/^# -----$/ { n++ } END { print n + 1 }' "$file")
if [ "$cases" -gt 1 ] && ! grep -q 'CHECK-LABEL:' "$file"; then
  echo "$file: $cases cases but no CHECK-LABEL: each case's checks start with one" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=""
k=0
while [ "$k" -lt "$cases" ]; do
  mkdir "$tmp/$k"
  piece="$tmp/$k/$(basename "$file")"
  awk -v k="$k" '/^# -----$/ { n++; print ""; next } { print (n == k ? $0 : "") }' "$file" > "$piece"
  part=$("$tool" "$mode" $arg "$piece") || { echo "$part"; echo "ir_tool $mode $arg failed on case $k of $file" >&2; exit 1; }
  out="$out$part
"
  k=$((k + 1))
done
printf '%s' "$out" | "$filecheck" --dump-input=fail "$file"
