#pragma once
// torch.einsum for one or two operands, lowered to permute, sum, reshape and one matmul: the indices of a
// pair split into batch (both operands and the output), contracted (both, not the output), left-only and
// right-only; each operand is permuted to (batch, free, contracted) / (batch, contracted, free), the groups
// merged to one dim each, multiplied, and the result split and permuted to the output's order. Where no
// shape is known when lowering (a script graph), each of the three groups may hold at most one index (the
// contractions model code writes: 'bhid,bhjd->bhij', 'bij,bjk->bik', 'ij,jk->ik', 'i,j->ij').
#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "eager/composites.h"

namespace kiln::composite {

namespace detail {

struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
};

inline EinsumSpec parse_einsum(const std::string& eq, size_t n_operands, const std::function<void(const std::string&)>& fail) {
  std::string s;
  for (char c : eq)
    if (c != ' ') s += c;
  EinsumSpec spec;
  const size_t arrow = s.find("->");
  std::string lhs = arrow == std::string::npos ? s : s.substr(0, arrow);
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    spec.inputs.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (s.find("...") != std::string::npos) fail("einsum: ellipsis ('...') is not supported");
  for (const std::string& in : spec.inputs)
    for (char c : in)
      if (!std::isalpha(static_cast<unsigned char>(c))) fail(fmt::format("einsum: invalid subscript '{}' in the equation", c));
  if (spec.inputs.size() != n_operands)
    fail(fmt::format("einsum: the equation has {} operand subscripts but {} operands were given", spec.inputs.size(), n_operands));
  if (arrow != std::string::npos) {
    spec.output = s.substr(arrow + 2);
  } else {  // implicit output: the indices seen once, in alphabetical order
    std::string all;
    for (const std::string& in : spec.inputs) all += in;
    std::string once;
    for (char c : all)
      if (std::count(all.begin(), all.end(), c) == 1) once += c;
    std::sort(once.begin(), once.end());
    spec.output = once;
  }
  for (const std::string& in : spec.inputs)
    for (size_t i = 0; i < in.size(); ++i)
      if (in.find(in[i], i + 1) != std::string::npos)
        fail(fmt::format("einsum: repeated subscript '{}' within an operand (a diagonal) is not supported", in[i]));
  for (char c : spec.output) {
    bool found = false;
    for (const std::string& in : spec.inputs) found = found || in.find(c) != std::string::npos;
    if (!found) fail(fmt::format("einsum: output subscript '{}' does not appear in the equation for any input operand", c));
  }
  return spec;
}

}  // namespace detail

// x (with subscripts `have`) permuted to `order` (a subset is fine: the rest must have been summed)
template <class B>
Val<B> einsum_permute(B& b, Val<B> x, const std::string& have, const std::string& order) {
  if (have == order) return x;
  Shape dims;
  for (char c : order) dims.push_back(int64_t(have.find(c)));
  return b.op(OpId::Permute, {x}, Attrs().set("dims", dims));
}

// the operand with the indices it alone has and the output lacks summed out
template <class B>
Val<B> einsum_sum_private(B& b, Val<B> x, std::string& sub, const std::string& other, const std::string& out) {
  Shape dims;
  std::string kept;
  for (size_t i = 0; i < sub.size(); ++i) {
    if (other.find(sub[i]) == std::string::npos && out.find(sub[i]) == std::string::npos) dims.push_back(int64_t(i));
    else kept += sub[i];
  }
  sub = kept;
  if (dims.empty()) return x;
  return b.op(OpId::Sum, {x}, Attrs().set("dims", dims).set("keepdim", false));
}

template <class B>
Val<B> einsum(B& b, const std::string& equation, const std::vector<Val<B>>& ops) {
  auto fail = [&](const std::string& m) { b.fail(m); };
  if (ops.empty() || ops.size() > 2) b.fail(fmt::format("einsum: kiln takes one or two operands, got {}", ops.size()));
  detail::EinsumSpec spec = detail::parse_einsum(equation, ops.size(), fail);
  for (size_t k = 0; k < ops.size(); ++k)
    if (std::optional<int64_t> r = b.rank(ops[k]); r && *r != int64_t(spec.inputs[k].size()))
      b.fail(fmt::format("einsum: the number of subscripts in the equation ({}) does not match the number of dimensions ({}) "
                         "for operand {}", spec.inputs[k].size(), *r, k));
  const std::string& out = spec.output;
  if (ops.size() == 1) {
    std::string sub = spec.inputs[0];
    Val<B> x = einsum_sum_private(b, ops[0], sub, "", out);
    return einsum_permute(b, x, sub, out);
  }
  std::string sa = spec.inputs[0], sb = spec.inputs[1];
  Val<B> a = einsum_sum_private(b, ops[0], sa, sb, out);
  Val<B> c = einsum_sum_private(b, ops[1], sb, sa, out);
  std::string batch, left, right, contract;
  for (char ch : sa) {
    const bool in_b = sb.find(ch) != std::string::npos, in_out = out.find(ch) != std::string::npos;
    if (in_b && in_out) batch += ch;
    else if (in_b) contract += ch;
    else left += ch;
  }
  for (char ch : sb)
    if (sa.find(ch) == std::string::npos) right += ch;
  a = einsum_permute(b, a, sa, batch + left + contract);
  c = einsum_permute(b, c, sb, batch + contract + right);
  const int64_t nb = int64_t(batch.size());
  std::optional<Shape> as = b.shape(a), cs = b.shape(c);
  // each group as one dim: (batch, L, K) @ (batch, K, R)
  auto group = [&](Val<B> v, const std::optional<Shape>& s, int64_t at, int64_t len, const char* what) -> Val<B> {
    if (len == 1) return v;
    if (len == 0) return b.op(OpId::Unsqueeze, {v}, Attrs().set("dim", at));
    if (!s) b.fail(fmt::format("einsum: a script graph whose shapes are unknown when it is lowered takes at most one {} index "
                               "per contraction (equation '{}')", what, equation));
    return b.flatten(v, at, at + len - 1);
  };
  a = group(a, as, nb, int64_t(left.size()), "free");
  a = group(a, as, nb + 1, int64_t(contract.size()), "contracted");
  c = group(c, cs, nb, int64_t(contract.size()), "contracted");
  c = group(c, cs, nb + 1, int64_t(right.size()), "free");
  Val<B> y = b.op(OpId::Matmul, {a, c});
  // back to (batch, left..., right...)
  std::string have = batch;
  if (left.size() == 1 && right.size() == 1) {
    have += left + right;
  } else {
    if (!as || !cs) {
      // only the empty groups remain to undo: the unsqueezed size-1 dims
      Shape drop;
      if (left.empty()) drop.push_back(nb);
      if (right.empty()) drop.push_back(nb + 1);
      y = b.op(OpId::Squeeze, {y}, Attrs().set("dims", drop));
    } else {
      Shape full;
      std::optional<Shape> ys = b.shape(y);
      for (int64_t i = 0; i < nb; ++i) full.push_back((*ys)[size_t(i)]);
      for (size_t i = 0; i < left.size(); ++i) full.push_back((*as)[size_t(nb) + i]);
      for (size_t i = 0; i < right.size(); ++i) full.push_back((*cs)[size_t(nb) + contract.size() + i]);
      y = b.op(OpId::Reshape, {y}, Attrs().set("shape", full));
    }
    have += left + right;
  }
  return einsum_permute(b, y, have, out);
}

}  // namespace kiln::composite
