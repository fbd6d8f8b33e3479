#include "core/ir/printer.h"

#include <fmt/format.h>

#include <cmath>
#include <unordered_set>

namespace kiln::ir {

namespace {

constexpr int64_t kMaxPrintedElements = 64;

// Shortest text that reads back to the same value in its own type (0.1f prints as 0.1).
template <class F>
std::string float_str(F v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";  // keeps it a float when read back
  return s;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + '"';
}

std::string tensor_elements(const Tensor& t) {
  if (t.numel() > kMaxPrintedElements) return fmt::format("<{} elements>", t.numel());
  Tensor c = t.host_contiguous();
  std::string s = "[";
  visit_dtype(c.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* p = static_cast<const T*>(c.raw_data());
    for (int64_t i = 0; i < c.numel(); ++i) {
      if (i) s += ", ";
      if constexpr (std::is_same_v<T, bool>) s += p[i] ? "true" : "false";
      else if constexpr (std::is_integral_v<T>) s += std::to_string(p[i]);
      else if constexpr (std::is_floating_point_v<T>) s += float_str(p[i]);
      else s += float_str(float(p[i]));
    }
  });
  return s + "]";
}

class Printer {
 public:
  explicit Printer(const Graph& g) : g_(g) { collect_names(*g.block()); }

  PrintedGraph run() {
    out_.text = "graph(";
    params(*g_.block());
    out_.text += "):\n";
    line_ = 2;
    body(*g_.block(), 1);
    out_.text += "  return (" + value_list(g_.outputs()) + ")\n";
    return std::move(out_);
  }

 private:
  void collect_names(const Block& b) {
    for (Value* v : b.inputs())
      if (!v->name().empty()) taken_.insert(v->name());
    for (Node* n : b.nodes()) {
      for (Value* v : n->outputs())
        if (!v->name().empty()) taken_.insert(v->name());
      for (Block* sub : n->blocks()) collect_names(*sub);
    }
  }

  const std::string& name(const Value* v) {
    auto it = out_.names.find(v);
    if (it != out_.names.end()) return it->second;
    std::string n;
    if (!v->name().empty()) {
      n = v->name();
      for (int k = 1; used_.count(n); ++k) n = fmt::format("{}.{}", v->name(), k);
    } else {
      do n = std::to_string(next_number_++);
      while (taken_.count(n) || used_.count(n));
    }
    used_.insert(n);
    return out_.names[v] = "%" + n;
  }

  std::string value_list(const std::vector<Value*>& vs) {
    std::string s;
    for (size_t i = 0; i < vs.size(); ++i) s += (i ? ", " : "") + lookup(vs[i]);
    return s;
  }

  // A use of a value the printer has not defined (broken IR) still prints, so the verifier can point at it.
  std::string lookup(const Value* v) {
    auto it = out_.names.find(v);
    return it != out_.names.end() ? it->second : "%<undefined>";
  }

  void params(const Block& b) {
    for (size_t i = 0; i < b.inputs().size(); ++i) {
      Value* v = b.inputs()[i];
      out_.text += (i ? ", " : "") + name(v) + " : " + v->type().str();
    }
  }

  void indent(int depth) { out_.text.append(size_t(depth) * 2, ' '); }

  void body(const Block& b, int depth) {
    for (Node* n : b.nodes()) node(*n, depth);
  }

  void node(const Node& n, int depth) {
    indent(depth);
    out_.lines[&n] = line_++;
    for (size_t i = 0; i < n.outputs().size(); ++i) {
      Value* v = n.outputs()[i];
      out_.text += (i ? ", " : "") + name(v) + " : " + v->type().str();
    }
    if (!n.outputs().empty()) out_.text += " = ";
    out_.text += n.kind_name();
    attrs(n);
    out_.text += "(" + value_list(n.inputs()) + ")\n";
    for (size_t i = 0; i < n.blocks().size(); ++i) {
      const Block& b = *n.blocks()[i];
      indent(depth + 1);
      out_.text += fmt::format("block{}(", i);
      params(b);
      out_.text += "):\n";
      ++line_;
      body(b, depth + 2);
      indent(depth + 2);
      out_.text += "-> (" + value_list(b.outputs()) + ")\n";
      ++line_;
    }
  }

  void attrs(const Node& n) {
    std::vector<std::string> parts;
    if (n.prim() == Prim::Constant && n.tensor().defined()) parts.push_back("value=" + tensor_elements(n.tensor()));
    for (const auto& [k, v] : n.attrs().items()) parts.push_back(k + "=" + attr_value_str(v));
    if (parts.empty()) return;
    out_.text += "[" + fmt::format("{}", fmt::join(parts, ", ")) + "]";
  }

  const Graph& g_;
  PrintedGraph out_;
  std::unordered_set<std::string> taken_, used_;
  int next_number_ = 0;
  int line_ = 1;
};

}  // namespace

std::string attr_value_str(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) return std::to_string(x);
        else if constexpr (std::is_same_v<T, double>) return float_str(x);
        else if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return quoted(x);
        else if constexpr (std::is_same_v<T, DType>) return dtype_short_name(x);
        else return fmt::format("[{}]", fmt::join(x, ", "));
      },
      v);
}

PrintedGraph print_graph(const Graph& g) { return Printer(g).run(); }

std::string Graph::str() const { return print_graph(*this).text; }

}  // namespace kiln::ir
