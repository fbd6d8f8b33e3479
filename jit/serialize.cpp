// A Function to and from a .kiln file. The graph is printed with every value named (so names are
// stable keys), each tensor constant's elements move to the tensor section under its value's name and
// the node keeps a reference, `prim::Constant[tensor="w"]()`; a traced module's bound inputs are stored
// under their input's name. Loading reverses this and checks everything the file claims against the
// graph before the graph verifier has the last word.
#include "jit/serialize.h"

#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "core/ir/parser.h"
#include "core/ir/printer.h"
#include "core/ir/verifier.h"
#include "eager/io.h"
#include "jit/ir_utils.h"
#include "jit/kiln_file.h"

namespace kiln {

namespace {

// The attribute of a constant that names its tensor in the tensor section.
constexpr const char* kTensorAttr = "tensor";
// Guard values are stored beside the values' tensors under keys no value name can have (they never hold ':').
std::string guard_key(size_t i) { return fmt::format("guard:{}", i); }

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.'; }

void for_each_value(ir::Block& b, const std::function<void(ir::Value*)>& f) {
  for (ir::Value* v : b.inputs()) f(v);
  for (ir::Node* n : b.nodes()) {
    for (ir::Value* v : n->outputs()) f(v);
    for (ir::Block* sub : n->blocks()) for_each_value(*sub, f);
  }
}

// The tensor as the file stores it: its own elements, on the CPU, without autograd history.
Tensor stored(const Tensor& t) { return t.detach().cpu().contiguous(); }

std::string join_commas(const std::vector<std::string>& parts) { return fmt::format("{}", fmt::join(parts, ",")); }

}  // namespace

void save(const Function& fn, const std::string& path) {
  if (!fn.defined()) fail("save: {}: the function is undefined", path);
  const Function::Binding& b = fn.binding();
  std::unique_ptr<ir::Graph> g = fn.graph().copy();

  // Names the text form can read back, then the printer's unique names fixed on every value.
  for_each_value(*g->block(), [](ir::Value* v) {
    std::string n = v->name();
    for (char& c : n)
      if (!name_char(c)) c = '_';
    v->set_name(n);
  });
  ir::PrintedGraph printed = ir::print_graph(*g);
  for_each_value(*g->block(), [&](ir::Value* v) { v->set_name(printed.names.at(v).substr(1)); });

  std::map<std::string, Tensor> tensors;
  jit::for_each_node(*g->block(), [&](ir::Node* n) {
    if (n->prim() != ir::Prim::Constant || !n->tensor().defined()) return;
    const std::string& key = n->output()->name();
    tensors[key] = stored(n->tensor());
    n->set_tensor(Tensor());
    n->attrs().set(kTensorAttr, key);
  });

  std::map<std::string, std::string> meta;
  meta["name"] = fn.name();
  size_t first_bound = g->inputs().size() - b.bound.size();
  std::vector<std::string> requires_grad;
  for (size_t i = 0; i < b.bound.size(); ++i) {
    tensors[g->inputs()[first_bound + i]->name()] = stored(b.bound[i]);
    requires_grad.push_back(b.bound[i].requires_grad() ? "1" : "0");
  }
  meta["bound"] = std::to_string(b.bound.size());
  meta["bound_requires_grad"] = join_commas(requires_grad);
  std::vector<std::string> writebacks;
  for (auto [in, out] : b.writebacks) writebacks.push_back(fmt::format("{}:{}", in, out));
  meta["writebacks"] = join_commas(writebacks);
  meta["exact_shapes"] = std::to_string(int(b.exact_shapes));
  meta["exact_shapes_reason"] = b.exact_shapes_reason;
  meta["guards"] = std::to_string(b.guards.size());
  for (size_t i = 0; i < b.guards.size(); ++i) {
    tensors[guard_key(i)] = stored(b.guards[i].expected);
    meta[guard_key(i) + ":output"] = std::to_string(b.guards[i].output);
    meta[guard_key(i) + ":what"] = b.guards[i].what;
  }

  std::string text = g->str();
  // What cannot be read back is refused now, not found out by whoever loads the file.
  try {
    ir::parse_ir(text, path);
  } catch (const Error& e) {
    fail("save: {}: the graph's text form does not read back: {}", path, e.what());
  }
  jit::write_kiln_file(path, text, safetensors_bytes(tensors, meta, "save"));
}

namespace {

class Loader {
 public:
  Loader(const std::string& path, std::map<std::string, Tensor> tensors, std::map<std::string, std::string> meta)
      : path_(path), tensors_(std::move(tensors)), meta_(std::move(meta)) {}

  Function run(const std::string& text) {
    std::shared_ptr<ir::Graph> g = ir::parse_ir(text, path_);
    jit::for_each_node(*g->block(), [&](ir::Node* n) { resolve_constant(*n); });

    Function::Binding b;
    const auto& ins = g->inputs();
    uint64_t nbound = number("bound", ins.size());
    std::vector<std::string> rg = list("bound_requires_grad");
    if (rg.size() != nbound)
      fail("load: {}: bound_requires_grad has {} entries for {} bound inputs", path_, rg.size(), nbound);
    for (size_t i = 0; i < nbound; ++i) {
      const ir::Value* v = ins[ins.size() - nbound + i];
      Tensor t = take(v->name(), fmt::format("bound input %{}", v->name()));
      check_type(t, v->type(), fmt::format("bound input %{}", v->name()), false);
      if (rg[i] != "0" && rg[i] != "1") fail("load: {}: bound_requires_grad entry '{}' is not 0 or 1", path_, rg[i]);
      if (rg[i] == "1") {
        if (!is_floating(t.dtype()))
          fail("load: {}: bound input %{} of dtype {} cannot require grad", path_, v->name(), dtype_name(t.dtype()));
        t.requires_grad_();
      }
      b.bound.push_back(std::move(t));
    }
    for (const std::string& w : list("writebacks")) {
      size_t colon = w.find(':');
      if (colon == std::string::npos) fail("load: {}: writeback '{}' is not INPUT:OUTPUT", path_, w);
      size_t in = parse_index(w.substr(0, colon), "writeback input", ins.size());
      size_t out = parse_index(w.substr(colon + 1), "writeback output", g->outputs().size());
      if (!ins[in]->type().is_tensor() || !g->outputs()[out]->type().is_tensor())
        fail("load: {}: writeback {} joins values that are not both tensors", path_, w);
      b.writebacks.emplace_back(in, out);
    }
    b.exact_shapes = flag("exact_shapes");
    b.exact_shapes_reason = meta_text("exact_shapes_reason");
    uint64_t nguards = number("guards", g->outputs().size());
    for (size_t i = 0; i < nguards; ++i) {
      Function::Binding::Guard guard;
      guard.output = parse_index(meta_text(guard_key(i) + ":output"), "guard output", g->outputs().size());
      guard.what = meta_text(guard_key(i) + ":what");
      guard.expected = take(guard_key(i), fmt::format("guard {}'s value", i));
      b.guards.push_back(std::move(guard));
    }
    std::string name = meta_text("name");

    if (!tensors_.empty())
      fail("load: {}: the tensor section holds \"{}\", which nothing in the graph uses", path_, tensors_.begin()->first);
    if (!meta_.empty()) fail("load: {}: unknown metadata \"{}\" in the tensor section", path_, meta_.begin()->first);
    try {
      ir::verify(*g);
    } catch (const Error& e) {
      fail("load: {}: the graph is invalid: {}", path_, e.what());
    }
    return Function(std::move(g), std::move(name), std::move(b));
  }

 private:
  void resolve_constant(ir::Node& n) {
    if (!n.attrs().has(kTensorAttr)) return;
    if (n.prim() != ir::Prim::Constant || n.outputs().size() != 1)
      fail("load: {}: line {}: {} has a tensor reference, which only a constant may have", path_, n.line, n.kind_name());
    const AttrValue* key = nullptr;
    for (const auto& [k, v] : n.attrs().items())
      if (k == kTensorAttr) key = &v;
    if (!std::holds_alternative<std::string>(*key))
      fail("load: {}: line {}: the tensor reference of a constant is not a string", path_, n.line);
    const std::string& name = std::get<std::string>(*key);
    if (n.attrs().has("value") || n.tensor().defined())
      fail("load: {}: line {}: constant %{} has both a value and a tensor reference", path_, n.line, n.output()->name());
    std::string what = fmt::format("constant %{} (line {})", n.output()->name(), n.line);
    Tensor t = take(name, what);
    check_type(t, n.output()->type(), what, true);
    n.set_tensor(std::move(t));
    n.attrs() = n.attrs().without(kTensorAttr);
  }

  Tensor take(const std::string& key, const std::string& what) {
    auto it = tensors_.find(key);
    if (it == tensors_.end()) {
      if (used_.count(key)) fail("load: {}: {} reuses tensor \"{}\", which each holder should have alone", path_, what, key);
      fail("load: {}: {} refers to tensor \"{}\", which the tensor section lacks", path_, what, key);
    }
    Tensor t = std::move(it->second);
    tensors_.erase(it);
    used_.insert(key);
    return t;
  }

  // A constant's type is exactly its tensor's; a bound input's type may leave dims open.
  void check_type(const Tensor& t, const ir::Type& ty, const std::string& what, bool exact) {
    ir::Type have = ir::type_of(t.dtype(), t.sizes());
    bool ok = ty.is_tensor() && (!ty.dtype || *ty.dtype == t.dtype());
    if (ok && exact) ok = ty == have;
    if (ok && ty.dims) {
      ok = ty.dims->size() == size_t(t.dim());
      for (size_t d = 0; ok && d < ty.dims->size(); ++d)
        ok = !(*ty.dims)[d].is_known() || (*ty.dims)[d].size == t.sizes()[d];
    }
    if (!ok) fail("load: {}: {} has type {} but its tensor in the file is {}", path_, what, ty.str(), have.str());
  }

  std::string meta_text(const std::string& key) {
    auto it = meta_.find(key);
    if (it == meta_.end()) fail("load: {}: the tensor section's metadata lacks \"{}\"", path_, key);
    std::string v = std::move(it->second);
    meta_.erase(it);
    return v;
  }

  std::vector<std::string> list(const std::string& key) {
    std::string s = meta_text(key);
    std::vector<std::string> out;
    for (size_t start = 0; !s.empty();) {
      size_t comma = s.find(',', start);
      out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }

  static bool parse_u64(const std::string& s, uint64_t* out) {
    if (s.empty() || s.size() > 19) return false;
    uint64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + uint64_t(c - '0');
    }
    *out = v;
    return true;
  }

  uint64_t number(const std::string& key, uint64_t max) {
    std::string s = meta_text(key);
    uint64_t v;
    if (!parse_u64(s, &v)) fail("load: {}: metadata \"{}\" is '{}', not a count", path_, key, s);
    if (v > max) fail("load: {}: metadata \"{}\" is {}, more than the graph allows ({})", path_, key, v, max);
    return v;
  }

  size_t parse_index(const std::string& s, const char* what, size_t size) {
    uint64_t v;
    if (!parse_u64(s, &v)) fail("load: {}: {} '{}' is not an index", path_, what, s);
    if (v >= size) fail("load: {}: {} {} is out of range for the graph's {}", path_, what, v, size);
    return size_t(v);
  }

  bool flag(const std::string& key) {
    std::string s = meta_text(key);
    if (s != "0" && s != "1") fail("load: {}: metadata \"{}\" is '{}', not 0 or 1", path_, key, s);
    return s == "1";
  }

  const std::string& path_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::string> meta_;
  std::set<std::string> used_;
};

}  // namespace

Function load(const std::string& path) {
  jit::KilnSections file = jit::read_kiln_file(path);
  SafetensorsContents st =
      load_safetensors_section(path, file.tensors_offset, file.tensors_length, "load", path + ": tensor section");
  return Loader(path, std::move(st.tensors), std::move(st.metadata)).run(file.graph_text);
}

}  // namespace kiln
