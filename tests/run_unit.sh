#!/usr/bin/env bash
# Runs the unit suite in a random order, a fresh seed each run (doctest's own default seed is 0: the
# same order every time), so a test that leans on state an earlier one left fails somewhere. The seed is
# printed first; KILN_TEST_SEED=N replays that order. Extra arguments go to doctest.
set -euo pipefail
exe="$1"; shift
seed="${KILN_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
echo "unit: --order-by=rand --rand-seed=$seed (replay: KILN_TEST_SEED=$seed)"
exec "$exe" --order-by=rand --rand-seed="$seed" "$@"
