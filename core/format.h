#pragma once
// Tensor printing, character for character as PyTorch's repr (torch/_tensor_str.py with its default
// print options), so kiln output can be diffed against torch output. Tensor::str() is the entry point;
// these make it reachable from iostreams and fmt.
#include <fmt/format.h>

#include <ostream>
#include <string>

#include "core/tensor.h"

namespace kiln {

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace kiln

// fmt::format("{}", t) gives t.str(); no format spec is accepted.
template <>
struct fmt::formatter<kiln::Tensor> {
  constexpr auto parse(fmt::format_parse_context& ctx) -> decltype(ctx.begin()) { return ctx.begin(); }
  template <class FormatContext>
  auto format(const kiln::Tensor& t, FormatContext& ctx) const -> decltype(ctx.out()) {
    std::string s = t.str();
    return std::copy(s.begin(), s.end(), ctx.out());
  }
};
