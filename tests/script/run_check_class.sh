#!/bin/sh
# `kiln check FILE CLASS ARGS`: builds the class from literal arguments and lowers its forward; a bad
# argument fails naming it in the source error format.
#   run_check_class.sh KILN MODELS_DIR
kiln="$1"; models="$2"
"$kiln" check "$models/resnet.py" ResNet num_classes=10 || { echo "kiln check ResNet num_classes=10 failed"; exit 1; }
"$kiln" check "$models/mlp.py" MLP 4 8 2 depth=3 || { echo "kiln check MLP 4 8 2 depth=3 failed"; exit 1; }
out=$("$kiln" check "$models/resnet.py" ResNet bogus=1 2>&1) && { echo "a bad keyword passed"; exit 1; }
echo "$out" | grep -q "resnet.py:[0-9]*:[0-9]*: error: __init__() got an unexpected keyword argument 'bogus'" ||
  { echo "unexpected error: $out"; exit 1; }
echo "ok"
