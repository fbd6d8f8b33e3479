# Writes the binary fixtures that tests/test_io.cpp reads: .npy files from NumPy and .safetensors
# files from the safetensors library with PyTorch tensors. Run once from the repository root:
#   python3 tests/data/make_fixtures.py      (numpy, torch and safetensors importable)
# The values are small and fixed; test_io.cpp states them again.
import os

import numpy as np
import torch
from safetensors.numpy import save_file as save_np
from safetensors.torch import save_file as save_pt

here = os.path.dirname(os.path.abspath(__file__))
npy = os.path.join(here, "npy")
st = os.path.join(here, "safetensors")
os.makedirs(npy, exist_ok=True)
os.makedirs(st, exist_ok=True)


def put(name, arr, version=None):
    path = os.path.join(npy, name)
    if version is None:
        np.save(path, arr)
    else:
        with open(path, "wb") as f:
            np.lib.format.write_array(f, arr, version=version)


put("f4_2x3.npy", np.arange(6, dtype="<f4").reshape(2, 3) / np.float32(4))
put("f8_3.npy", np.array([0.5, -1.25, 1e300], dtype="<f8"))
put("f2_4.npy", np.array([1, 0.5, -2, 65504], dtype="<f2"))
put("i4_2x2.npy", np.array([[1, -2], [3, 2147483647]], dtype="<i4"))
put("i8_3.npy", np.array([-9223372036854775808, 0, 9223372036854775807], dtype="<i8"))
put("b1_5.npy", np.array([True, False, True, True, False]))
put("f4_scalar.npy", np.array(3.5, dtype="<f4"))
put("f4_empty_0x3.npy", np.zeros((0, 3), dtype="<f4"))
put("f4_fortran_2x3x4.npy", np.asfortranarray(np.arange(24, dtype="<f4").reshape(2, 3, 4)))
put("f8_bigendian_2x2.npy", np.array([[1.5, -2.0], [3.25, 1e-300]], dtype=">f8"))
put("i4_bigendian_3.npy", np.array([1, -2, 65536], dtype=">i4"))
put("f4_v2_3.npy", np.array([1, 2, 3], dtype="<f4"), version=(2, 0))
put("f4_v3_3.npy", np.array([1, 2, 3], dtype="<f4"), version=(3, 0))
put("u1_unsupported.npy", np.array([1, 2], dtype="u1"))
put("structured_unsupported.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))

save_pt(
    {
        "weight": (torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4),
        "bias": torch.tensor([0.5, -1.25, 1e300], dtype=torch.float64),
        "half": torch.tensor([1, 0.5, -2, 65504], dtype=torch.float16),
        "brain": torch.tensor([1.0, -0.5, 3.0e38], dtype=torch.bfloat16),
        "ints": torch.tensor([[1, -2], [3, 2147483647]], dtype=torch.int32),
        "longs": torch.tensor([-9223372036854775808, 0, 9223372036854775807], dtype=torch.int64),
        "mask": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 4),
        # safetensors.torch refuses views, so the transpose is packed first
        "transposed": torch.arange(6, dtype=torch.float32).reshape(2, 3).t().contiguous(),
    },
    os.path.join(st, "torch_mixed.safetensors"),
    metadata={"format": "pt", "note": "made by make_fixtures.py"},
)
save_np({"bytes": np.array([1, 2, 3], dtype=np.uint8), "ok": np.ones(2, dtype="<f4")},
        os.path.join(st, "u8_unsupported.safetensors"))
