#pragma once
// Tensor arithmetic in __init__, run eagerly as Python would run it: regnet's block widths
// (`torch.round(torch.log(widths / w_0) / math.log(w_m))`), swin's relative position index
// (`torch.meshgrid`, indexing, `+=` through a view), convnext's `torch.ones(dim, 1, 1) * layer_scale`.
// Each returns nullopt when the operation is not one of these (the caller reports it); a misuse raises
// kiln::Error with the message only (the caller adds the location). Internal to script_frontend.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "script_frontend/objects.h"

namespace kiln::script {

// a op b where a or b is a Tensor and the other a Tensor or a number: + - * / // % ** and comparisons
std::optional<Static> init_tensor_binary(PyOp op, const Static& a, const Static& b);
// -t, not supported otherwise
std::optional<Static> init_tensor_unary(PyOp op, const Static& a);
// torch.NAME(...) beyond the factories: log exp sqrt round floor abs pow divide mul add sub diff tensor stack
// cat meshgrid flatten
std::optional<Static> init_torch_function(const std::string& name, const std::vector<Static>& a,
                                          const std::map<std::string, Static>& kw);
// t.NAME(...): int long float double bool tolist item permute contiguous clone sum flatten view reshape
// unsqueeze round log exp sqrt abs, to(dtype or tensor) and to(device) / cpu() (t: a module's tensors are where it is)
std::optional<Static> init_tensor_method(const Tensor& t, const std::string& name, const std::vector<Static>& a,
                                         const std::map<std::string, Static>& kw);
// torch.NAME for a dtype kiln has (float32, float, float64, double, int64, long, int32, int, bool, bfloat16)
std::optional<DType> torch_dtype_name(const std::string& name);
// One element of t[...]: an int, a slice, None (a new dim of 1) or `...`.
struct TensorIndex {
  enum class Kind : uint8_t { Int, Slice, None, Ellipsis } kind = Kind::Int;
  int64_t i = 0;
  std::optional<int64_t> start, stop;
  int64_t step = 1;
};
// t[index] as torch's basic indexing: a view of t, so a write through it changes t.
Tensor init_tensor_index(const Tensor& t, const std::vector<TensorIndex>& index);

}  // namespace kiln::script
