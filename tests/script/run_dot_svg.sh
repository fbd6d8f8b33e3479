#!/bin/sh
# `kiln dot FILE FUNC -o graph.svg` renders through Graphviz's dot (python3-less: .ci/setup.sh installs
# graphviz, so this never skips); a name without a known extension is refused naming the file.
#   run_dot_svg.sh KILN SCRIPT_DIR
kiln="$1"; dir="$2"; out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
"$kiln" dot "$dir/activations.py" exp_family -o "$out/g.svg" || { echo "kiln dot -o g.svg failed"; exit 1; }
grep -q "<svg" "$out/g.svg" || { echo "g.svg is not an SVG"; exit 1; }
grep -q ">exp<\|>exp " "$out/g.svg" || { echo "g.svg does not show the exp node"; exit 1; }
"$kiln" dot "$dir/activations.py" exp_family -o "$out/g.dot" && head -1 "$out/g.dot" | grep -q '^digraph' ||
  { echo "kiln dot -o g.dot did not write DOT text"; exit 1; }
msg=$("$kiln" dot "$dir/activations.py" exp_family -o "$out/g.xyz" 2>&1) && { echo "g.xyz accepted"; exit 1; }
echo "$msg" | grep -q "cannot tell the format of .*g.xyz" || { echo "unexpected error: $msg"; exit 1; }
echo "ok"
