#!/bin/sh
# Runs the script fuzzer for a fixed time, seeded with the script test files themselves (good and bad
# ones). New inputs go to a scratch folder (libFuzzer writes into its first corpus folder), so the
# sources stay clean.
#   run_fuzz.sh FUZZER SECONDS SEED_DIR...
set -eu
fuzzer=$1 seconds=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
"$fuzzer" "$work" "$@" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
  -artifact_prefix="$work/" -print_final_stats=1 >"$work/log" 2>&1 || status=$?
tail -n 40 "$work/log"
# A crash leaves crash-*/leak-*/timeout-* artifacts; show one and fail.
for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
  [ -e "$a" ] || continue
  echo "fuzz artifact: $a"; od -c "$a" | head -n 20
  exit 1
done
exit "$status"
