#pragma once
// torch.einsum, lowered to permute, sum, reshape and one matmul per pair of operands: three or more are
// contracted left to right, each intermediate keeping the indices the output or a later operand still
// needs. The indices of a pair split into batch (both operands and the output), contracted (both, not the
// output), left-only and right-only; each operand is permuted to (batch, free, contracted) / (batch,
// contracted, free), the groups merged to one dim each, multiplied, and the result split and permuted to the
// output's order. '...' stands for an operand's leading or middle dims beyond its letters, aligned from the
// right across operands as torch broadcasts them, and needs each operand's rank when lowering, but where it
// leads every term of two operands (then matmul broadcasts its dims). einsum_lowered answers nullopt for the
// rest where a rank is unknown (the ellipsis summed away or not leading, three or more operands): the script
// frontend checks their letters now and makes one prim::einsum, which runs this composite once ranks are known.
// Where no shape is known when lowering, each of the three groups may hold at most one index (the
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

// An ellipsis becomes one placeholder subscript per dim it covers ('0' + position, counted so that the last
// dims of every operand's ellipsis share placeholders, as torch broadcasts them); ranks[k] is operand k's
// rank where known.
inline EinsumSpec parse_einsum(const std::string& eq, const std::vector<std::optional<int64_t>>& ranks,
                               const std::function<void(const std::string&)>& fail) {
  const size_t n_operands = ranks.size();
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
  if (spec.inputs.size() != n_operands)
    fail(fmt::format("einsum: the equation has {} operand subscripts but {} operands were given", spec.inputs.size(), n_operands));
  auto letters_of = [&](const std::string& sub, std::optional<size_t> operand) {
    const size_t dots = sub.find("...");
    if (dots != std::string::npos && sub.find('.', dots + 3) != std::string::npos)
      fail(operand ? fmt::format("einsum: found '.' for operand {} for which an ellipsis was already found", *operand)
                   : std::string("einsum: found '.' for output but an ellipsis (...) was already found"));
    std::string rest = dots == std::string::npos ? sub : sub.substr(0, dots) + sub.substr(dots + 3);
    for (char c : rest)
      if (!std::isalpha(static_cast<unsigned char>(c)))
        fail(fmt::format("einsum: invalid subscript '{}' in the equation", c == '.' ? std::string("...") : std::string(1, c)));
    return dots;
  };
  // each operand's ellipsis width, from its rank
  int64_t width = 0;
  std::vector<int64_t> widths(n_operands, 0);
  bool any_ellipsis = false;
  for (size_t k = 0; k < n_operands; ++k) {
    const size_t dots = letters_of(spec.inputs[k], k);
    const int64_t letters = int64_t(spec.inputs[k].size()) - (dots == std::string::npos ? 0 : 3);
    if (dots == std::string::npos) {
      if (ranks[k] && *ranks[k] != letters)
        fail(fmt::format("einsum: the number of subscripts in the equation ({}) does not match the number of dimensions "
                         "({}) for operand {} and no ellipsis was given", letters, *ranks[k], k));
      continue;
    }
    any_ellipsis = true;
    if (!ranks[k]) fail("einsum: an ellipsis ('...') needs each operand's rank when the graph is lowered");
    if (*ranks[k] < letters)
      fail(fmt::format("einsum: the number of subscripts in the equation ({}) is more than the number of dimensions ({}) for "
                       "operand {}", letters, *ranks[k], k));
    widths[k] = *ranks[k] - letters;
    width = std::max(width, widths[k]);
  }
  auto placeholders = [](int64_t from, int64_t to) {
    std::string p;
    for (int64_t i = from; i < to; ++i) p += char('0' + i);
    return p;
  };
  for (size_t k = 0; k < n_operands; ++k)
    if (size_t dots = spec.inputs[k].find("..."); dots != std::string::npos)
      spec.inputs[k].replace(dots, 3, placeholders(width - widths[k], width));
  if (arrow != std::string::npos) {
    spec.output = s.substr(arrow + 2);
    const size_t dots = letters_of(spec.output, std::nullopt);
    if (dots != std::string::npos) spec.output.replace(dots, 3, placeholders(0, width));
  } else {  // implicit output: the ellipsis' dims, then the indices seen once, in alphabetical order
    std::string all;
    for (const std::string& in : spec.inputs) all += in;
    std::string once;
    for (char c : all)
      if (std::isalpha(static_cast<unsigned char>(c)) && std::count(all.begin(), all.end(), c) == 1) once += c;
    std::sort(once.begin(), once.end());
    spec.output = (any_ellipsis ? placeholders(0, width) : std::string()) + once;
  }
  for (const std::string& in : spec.inputs)
    for (size_t i = 0; i < in.size(); ++i)
      if (in.find(in[i], i + 1) != std::string::npos)
        fail(fmt::format("einsum: repeated subscript '{}' within an operand (a diagonal) is not supported", in[i]));
  for (size_t i = 0; i < spec.output.size(); ++i) {
    const char c = spec.output[i];
    if (spec.output.find(c, i + 1) != std::string::npos)
      fail(fmt::format("einsum: output subscript {} appears more than once in the output", c));
    bool found = false;
    for (const std::string& in : spec.inputs) found = found || in.find(c) != std::string::npos;
    if (!found && std::isalpha(static_cast<unsigned char>(c)))
      fail(fmt::format("einsum: output subscript '{}' does not appear in the equation for any input operand", c));
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

// two operands (subscripts sa, sb) contracted to the subscripts `out`
template <class B>
Val<B> einsum_pair(B& b, const std::string& equation, Val<B> x, std::string sa, Val<B> z, std::string sb,
                   const std::string& out) {
  Val<B> a = einsum_sum_private(b, x, sa, sb, out);
  Val<B> c = einsum_sum_private(b, z, sb, sa, out);
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


// The letters' errors, as parse_einsum gives them, each operand's '...' left out: what a graph that does not know
// the ranks can check when it is lowered. A second '.' stays, for parse_einsum to name.
template <class B>
void einsum_check_letters(B& b, const std::string& equation, const std::vector<Val<B>>& ops) {
  std::string s;
  for (char c : equation)
    if (c != ' ') s += c;
  const size_t arrow = s.find("->");
  std::string lhs = s.substr(0, arrow), letters;
  std::vector<std::optional<int64_t>> ranks;
  auto strip = [](std::string t) {
    const size_t dots = t.find("...");
    return dots != std::string::npos && t.find('.', dots + 3) == std::string::npos ? t.erase(dots, 3) : t;
  };
  for (size_t start = 0, k = 0;; ++k) {
    const size_t comma = lhs.find(',', start);
    const std::string t = lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    letters += (k ? "," : "") + strip(t);
    ranks.push_back(k < ops.size() && t.find("...") == std::string::npos ? b.rank(ops[k]) : std::nullopt);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) letters += "->" + strip(s.substr(arrow + 2));
  if (ranks.size() != ops.size()) ranks.resize(ops.size());  // parse_einsum names the count
  detail::parse_einsum(letters, ranks, [&](const std::string& m) { b.fail(m); });
}

// x's last dims (subscripts `have`, its ellipsis' dims before them, however many) transposed to `want`: the
// rank is not needed, as every dim is counted from the end
template <class B>
Val<B> einsum_order_trailing(B& b, Val<B> x, std::string have, const std::string& want) {
  const int64_t n = int64_t(have.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = int64_t(have.find(want[size_t(i)]));
    if (j == i) continue;
    x = b.transpose(x, i - n, j - n);
    std::swap(have[size_t(i)], have[size_t(j)]);
  }
  return x;
}

// Two operands whose '...' leads every term it is in, the output included, when a rank is not known (a script
// graph): the ellipsis' dims are matmul's batch dims, which it broadcasts as torch broadcasts them, so each
// operand's letters are ordered and grouped from the end: (..., batch, free, contracted) @ (..., batch,
// contracted, free), each group of at most one index. nullopt when the equation is not of that form.
template <class B>
std::optional<Val<B>> einsum_leading_ellipsis(B& b, const std::string& equation, const std::vector<Val<B>>& ops) {
  std::string s;
  for (char c : equation)
    if (c != ' ') s += c;
  size_t arrow = s.find("->");
  if (arrow == std::string::npos) {
    // the implicit output: the ellipsis, then the letters seen once, in alphabetical order
    std::string once;
    for (char c : s)
      if (std::isalpha(static_cast<unsigned char>(c)) && std::count(s.begin(), s.end(), c) == 1) once += c;
    std::sort(once.begin(), once.end());
    arrow = s.size();
    s += "->..." + once;
  }
  if (ops.size() != 2 || std::count(s.begin(), s.begin() + long(arrow), ',') != 1) return std::nullopt;
  std::vector<std::string> terms = {s.substr(0, s.find(',')), s.substr(s.find(',') + 1, arrow - s.find(',') - 1), s.substr(arrow + 2)};
  bool any = false;
  for (size_t k = 0; k < terms.size(); ++k) {
    std::string& t = terms[k];
    const size_t dots = t.find("...");
    if (dots != std::string::npos && dots != 0) return std::nullopt;
    if (dots == 0) {
      t = t.substr(3);
      any = true;
    } else if (k == 2 && any) {
      return std::nullopt;  // the ellipsis' dims summed: their number is needed
    }
  }
  einsum_check_letters(b, equation, ops);
  std::string sa = terms[0], sc = terms[1];
  const std::string& out = terms[2];
  std::string batch, left, right, contract;
  for (char ch : sa) {
    const bool in_c = sc.find(ch) != std::string::npos, in_out = out.find(ch) != std::string::npos;
    if (in_c && in_out) batch += ch;
    else if (in_c) contract += ch;
    else if (in_out) left += ch;
  }
  for (char ch : sc)
    if (sa.find(ch) == std::string::npos && out.find(ch) != std::string::npos) right += ch;
  if (left.size() > 1 || right.size() > 1 || contract.size() > 1) return std::nullopt;
  // an index of one operand alone that the output lacks is summed first, counted from the end
  auto sum_private = [&](Val<B> x, std::string& sub, const std::string& other) {
    Shape dims;
    std::string kept;
    for (size_t i = 0; i < sub.size(); ++i) {
      if (other.find(sub[i]) == std::string::npos && out.find(sub[i]) == std::string::npos) dims.push_back(int64_t(i) - int64_t(sub.size()));
      else kept += sub[i];
    }
    sub = kept;
    return dims.empty() ? x : b.op(OpId::Sum, {x}, Attrs().set("dims", dims).set("keepdim", false));
  };
  Val<B> a = sum_private(ops[0], sa, terms[1]);
  Val<B> c = sum_private(ops[1], sc, terms[0]);
  a = einsum_order_trailing(b, a, sa, batch + left + contract);
  c = einsum_order_trailing(b, c, sc, batch + contract + right);
  auto unsqueeze = [&](Val<B> x, int64_t d) { return b.op(OpId::Unsqueeze, {x}, Attrs().set("dim", d)); };
  if (contract.empty()) a = unsqueeze(a, -1);
  if (left.empty()) a = unsqueeze(a, -2);
  if (right.empty()) c = unsqueeze(c, -1);
  if (contract.empty()) c = unsqueeze(c, -2);
  Val<B> y = b.op(OpId::Matmul, {a, c});
  Shape drop;
  if (left.empty()) drop.push_back(-2);
  if (right.empty()) drop.push_back(-1);
  if (!drop.empty()) y = b.op(OpId::Squeeze, {y}, Attrs().set("dims", drop));
  return einsum_order_trailing(b, y, batch + left + right, out);
}

// torch.einsum; nullopt where a '...' needs a rank the builder does not know (never in eager)
template <class B>
std::optional<Val<B>> einsum_lowered(B& b, const std::string& equation, const std::vector<Val<B>>& ops) {
  auto fail = [&](const std::string& m) { b.fail(m); };
  if (ops.empty()) b.fail("einsum: must provide at least one operand");
  std::vector<std::optional<int64_t>> ranks;
  for (const Val<B>& v : ops) ranks.push_back(b.rank(v));
  if (equation.find("...") != std::string::npos && std::any_of(ranks.begin(), ranks.end(), [](const auto& r) { return !r; }))
    return einsum_leading_ellipsis(b, equation, ops);
  detail::EinsumSpec spec = detail::parse_einsum(equation, ranks, fail);
  const std::string& out = spec.output;
  if (ops.size() == 1) {
    std::string sub = spec.inputs[0];
    Val<B> x = einsum_sum_private(b, ops[0], sub, "", out);
    return einsum_permute(b, x, sub, out);
  }
  // left to right: each intermediate keeps the indices the output or a later operand reads
  Val<B> acc = ops[0];
  std::string sacc = spec.inputs[0];
  for (size_t k = 1; k < ops.size(); ++k) {
    if (k + 1 == ops.size()) return einsum_pair(b, equation, acc, sacc, ops[k], spec.inputs[k], out);
    std::string later = out;
    for (size_t j = k + 1; j < ops.size(); ++j) later += spec.inputs[j];
    std::string keep;
    for (char c : sacc + spec.inputs[k])
      if (later.find(c) != std::string::npos && keep.find(c) == std::string::npos) keep += c;
    acc = einsum_pair(b, equation, acc, sacc, ops[k], spec.inputs[k], keep);
    sacc = keep;
  }
  return acc;
}

template <class B>
Val<B> einsum(B& b, const std::string& equation, const std::vector<Val<B>>& ops) {
  if (std::optional<Val<B>> y = einsum_lowered(b, equation, ops)) return *y;
  b.fail(fmt::format("einsum: '...' in '{}' needs each operand's rank", equation));
}

}  // namespace kiln::composite
