#pragma once
// Tensors to and from files that NumPy, PyTorch and the safetensors library read and write.
//
// .npy: versions 1.0 and 2.0 are written (2.0 only when the header needs it), 1.0 / 2.0 / 3.0 are read,
// C order and fortran_order=True, dtypes <f2 <f4 <f8 <i4 <i8 |b1 in either byte order (big-endian
// data is byte-swapped on load). NumPy has no bfloat16, so save_npy refuses a bfloat16 tensor rather
// than silently widening it; convert with t.to(DType::Float32) or use safetensors, which has BF16.
//
// .safetensors: an 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, "__metadata__": {...}}
// and the raw little-endian bytes; dtypes F32 F64 F16 BF16 I32 I64 BOOL.
//
// Saved tensors may be any view: they are written in row-major order. Every unreadable, corrupt,
// truncated or unsupported file raises kiln::Error naming the function, the path and the problem.
#include <map>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace kiln {

Tensor load_npy(const std::string& path);
void save_npy(const std::string& path, const Tensor& t);

std::map<std::string, Tensor> load_safetensors(const std::string& path);
// The "__metadata__" strings of a safetensors file (empty when it has none), without reading tensor data.
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// For file formats that embed a safetensors image (kiln::save's .kiln files):
// the bytes save_safetensors would write, and a section [offset, offset + length) of a file read as a
// whole .safetensors file, its errors saying `op: label: ...`.
struct SafetensorsContents {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};
std::string safetensors_bytes(const std::map<std::string, Tensor>& tensors,
                              const std::map<std::string, std::string>& metadata = {},
                              std::string_view op = "safetensors_bytes");
SafetensorsContents load_safetensors_section(const std::string& path, uint64_t offset, uint64_t length,
                                             std::string_view op, const std::string& label);

}  // namespace kiln
