"""Converts scikit-learn's bundled 8x8 digits (python3-sklearn) into .npy files for the samples."""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

out = sys.argv[1] if len(sys.argv) > 1 else "samples/data"
os.makedirs(out, exist_ok=True)
d = load_digits()
x = (d.data / 16.0).astype(np.float32)  # pixel values 0..16 scaled to [0, 1]
y = d.target.astype(np.int64)
rng = np.random.default_rng(0)
perm = rng.permutation(len(y))
x, y = x[perm], y[perm]
np.save(os.path.join(out, "digits_x.npy"), x)
np.save(os.path.join(out, "digits_y.npy"), y)
print(f"wrote {len(y)} digits to {out}")
