#!/bin/sh
# `kiln check FILE CLASS ARG... NAME=ARG...` reads each ARG as docs/script.md says: a literal (an int, a float,
# True/False, None, a,b for a list), Python where it is a word the file binds at its top level (or a capitalised
# typo of a class of it) or holds one of [ ( { ' " . , and a string otherwise (act=GELU where the file has no GELU).
#   run_check_args.sh KILN CHECK_DIR
kiln="$1"; f="$2/arguments.py"
pass() {
  out=$("$kiln" check "$f" Probe "$@" 2>&1) || { echo "kiln check $f Probe $*: $out"; exit 1; }
}
pass gelu GELU
pass gelu value=GELU
pass quoted "'Block'"
pass block Block
pass block value=make_block
pass constant SCALE
pass int 3
pass float value=0.5
pass bool True
pass none None
pass list 2,2
pass list "[2, 2]"
# a capitalised typo of a class of the file is read as Python, so that the error names it (a lowercase word
# such as `block` above stays a string)
out=$("$kiln" check "$f" Probe block Blok 2>&1) && { echo "a misspelt class passed"; exit 1; }
echo "$out" | grep -q "undefined name 'Blok'; did you mean Block?" || { echo "unexpected error: $out"; exit 1; }
# another word naming nothing the file binds is a string, which Probe refuses here by its assert
out=$("$kiln" check "$f" Probe block Sequential 2>&1) && { echo "a string passed as a class"; exit 1; }
echo "$out" | grep -q "arguments.py:[0-9]*:[0-9]*: error: 'str' object is not callable" || { echo "unexpected error: $out"; exit 1; }
echo "ok"
