#include "core/ir/verifier.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "core/ir/dtype_rules.h"
#include "core/ir/op_schema.h"
#include "core/ir/printer.h"

namespace kiln::ir {

namespace {

struct PrimArity {
  int inputs, outputs;
};
constexpr PrimArity kPrimArity[] = {
#define KILN_PRIM(Id, name, nin, nout, effect) {nin, nout},
#include "core/ir/prims.def"
};

class Verifier {
 public:
  explicit Verifier(const Graph& g) : g_(g) {}

  std::vector<std::string> run() {
    scopes_.emplace_back();
    block(*g_.block());
    return std::move(errors_);
  }

 private:
  template <class... Args>
  void error(const Node& n, fmt::format_string<Args...> f, Args&&... args) {
    auto it = printed().lines.find(&n);
    int line = n.line ? n.line : (it != printed().lines.end() ? it->second : 0);
    errors_.push_back(fmt::format("line {}: {}: {}", line, n.kind_name(), fmt::format(f, std::forward<Args>(args)...)));
  }

  std::string name(const Value* v) const {
    auto it = printed().names.find(v);
    return it != printed().names.end() ? it->second : "%<unnamed>";
  }

  // Printed for an error message only: printing every graph verified cost a compile more than the checks.
  const PrintedGraph& printed() const {
    if (!printed_) printed_ = print_graph(g_);
    return *printed_;
  }

  bool visible(const Value* v) const {
    for (const auto& s : scopes_)
      if (s.count(v)) return true;
    return false;
  }

  void uses_of(const Node& n) {
    for (size_t i = 0; i < n.inputs().size(); ++i) {
      const Value* v = n.inputs()[i];
      if (!visible(v)) error(n, "input {} ({}) is used before its definition or outside its block", i, name(v));
      const auto& uses = v->uses();
      if (std::find(uses.begin(), uses.end(), Use{const_cast<Node*>(&n), i}) == uses.end())
        error(n, "input {} ({}) is missing from its value's use list", i, name(v));
    }
  }

  void defs_of(const Node& n) {
    for (const Value* v : n.outputs()) {
      if (v->node() != &n) error(n, "output {} does not point back to its node", name(v));
      for (const Use& u : v->uses())
        if (u.index >= u.user->inputs().size() || u.user->inputs()[u.index] != v)
          error(n, "output {} lists a use that does not read it", name(v));
      scopes_.back().insert(v);
    }
  }

  void block(const Block& b) {
    for (const Value* v : b.inputs()) scopes_.back().insert(v);
    for (Node* n : b.nodes()) {
      if (n->owning_block() != &b) error(*n, "node does not point back to its block");
      uses_of(*n);
      check(*n);
      for (const Block* sub : n->blocks()) {
        scopes_.emplace_back();
        block(*sub);
        scopes_.pop_back();
      }
      defs_of(*n);
    }
    uses_of(*b.return_node());
  }

  void check(const Node& n) {
    if (n.is_op()) return check_op(n);
    PrimArity a = kPrimArity[size_t(n.prim())];
    if (a.inputs >= 0 && int(n.inputs().size()) != a.inputs)
      error(n, "expects {} inputs, got {}", a.inputs, n.inputs().size());
    if (a.outputs >= 0 && int(n.outputs().size()) != a.outputs)
      error(n, "expects {} outputs, got {}", a.outputs, n.outputs().size());
    size_t want_blocks = n.prim() == Prim::If ? 2 : (n.prim() == Prim::Loop || n.prim() == Prim::FusionGroup) ? 1 : 0;
    if (n.blocks().size() != want_blocks) {
      error(n, "expects {} blocks, got {}", want_blocks, n.blocks().size());
      return;
    }
    switch (n.prim()) {
      case Prim::If: return check_if(n);
      case Prim::Loop: return check_loop(n);
      case Prim::FusionGroup: return check_group(n);
      case Prim::Constant: return check_constant(n);
      default: return;
    }
  }

  void check_kind(const Node& n, const Value* v, TypeKind k, const char* what) {
    if (v->type().kind != k && v->type().kind != TypeKind::Tensor)
      error(n, "{} ({}) must be {}, got {}", what, name(v), Type::scalar(k).str(), v->type().str());
  }

  // An Optional[T] output may take a None or a T from a block (script: `return None` on one path).
  static bool fits_optional(const Type& got, const Type& want) {
    return want.kind == TypeKind::Optional && (got.kind == TypeKind::None || got.kind == want.elems[0].kind);
  }

  void same_kinds(const Node& n, const std::vector<Value*>& got, const std::vector<Value*>& want, const char* what) {
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
      if (got[i]->type().kind != want[i]->type().kind && !fits_optional(got[i]->type(), want[i]->type()))
        error(n, "{} {} is {} but the node's output {} is {}", what, i, got[i]->type().str(), i, want[i]->type().str());
  }

  void check_if(const Node& n) {
    if (!n.inputs().empty()) check_kind(n, n.input(0), TypeKind::Bool, "the condition");
    for (size_t i = 0; i < 2; ++i) {
      const Block& b = *n.blocks()[i];
      if (!b.inputs().empty()) error(n, "block{} takes no arguments, got {}", i, b.inputs().size());
      if (b.outputs().size() != n.outputs().size())
        error(n, "block{} returns {} values for {} outputs", i, b.outputs().size(), n.outputs().size());
      else same_kinds(n, b.outputs(), n.outputs(), fmt::format("block{} result", i).c_str());
    }
  }

  void check_loop(const Node& n) {
    if (n.inputs().size() < 2) {
      error(n, "expects a trip count and a condition, got {} inputs", n.inputs().size());
      return;
    }
    check_kind(n, n.input(0), TypeKind::Int, "the trip count");
    check_kind(n, n.input(1), TypeKind::Bool, "the condition");
    size_t carried = n.inputs().size() - 2;
    const Block& body = *n.blocks()[0];
    if (n.outputs().size() != carried) error(n, "has {} carried values but {} outputs", carried, n.outputs().size());
    if (body.inputs().size() != carried + 1)
      error(n, "body takes {} arguments, expected {} (the iteration and {} carried values)", body.inputs().size(),
            carried + 1, carried);
    if (body.outputs().size() != carried + 1)
      error(n, "body returns {} values, expected {} (the condition and {} carried values)", body.outputs().size(),
            carried + 1, carried);
  }

  void check_group(const Node& n) {
    const Block& b = *n.blocks()[0];
    if (b.inputs().size() != n.inputs().size())
      error(n, "block takes {} arguments for {} inputs", b.inputs().size(), n.inputs().size());
    if (b.outputs().size() != n.outputs().size())
      error(n, "block returns {} values for {} outputs", b.outputs().size(), n.outputs().size());
    // Self-contained: a backend compiles the block alone.
    std::unordered_set<const Value*> own(b.inputs().begin(), b.inputs().end());
    for (const Node* inner : b.nodes()) {
      for (const Value* v : inner->inputs())
        if (!own.count(v)) error(n, "{} inside the group reads {}, defined outside it", inner->kind_name(), name(v));
      own.insert(inner->outputs().begin(), inner->outputs().end());
    }
  }

  void check_constant(const Node& n) {
    if (n.outputs().size() != 1) return;
    const Type& t = n.output()->type();
    if (n.tensor().defined()) {
      if (!t.is_tensor()) error(n, "holds a tensor but its type is {}", t.str());
      else if (!(t == type_of(n.tensor().dtype(), n.tensor().sizes())))
        error(n, "holds a {} tensor but its type is {}", type_of(n.tensor().dtype(), n.tensor().sizes()).str(), t.str());
      return;
    }
    if (!n.attrs().has("value")) {
      // None typed as an Optional[T] is how a None reaches a value that may also hold a T (script's
      // None arguments to Optional parameters, TorchScript's `Tensor?` constants).
      if (t.kind != TypeKind::None && t.kind != TypeKind::Optional)
        error(n, "has no value, so its type must be NoneType or Optional[...], got {}", t.str());
      return;
    }
    const AttrValue* v = nullptr;
    for (const auto& [k, val] : n.attrs().items())
      if (k == "value") v = &val;
    TypeKind want = std::holds_alternative<int64_t>(*v)       ? TypeKind::Int
                    : std::holds_alternative<double>(*v)      ? TypeKind::Float
                    : std::holds_alternative<bool>(*v)        ? TypeKind::Bool
                    : std::holds_alternative<std::string>(*v) ? TypeKind::Str
                                                              : TypeKind::Tensor;
    if (want == TypeKind::Tensor) error(n, "value must be a number, a bool, a string or a tensor");
    else if (t.kind != want) error(n, "value {} does not match its type {}", attr_value_str(*v), t.str());
  }

  void check_op(const Node& n) {
    OpId op = n.op();
    const OpSchema& s = op_schema(op);
    int nin = int(n.inputs().size());
    if (nin < s.min_inputs || (s.max_inputs >= 0 && nin > s.max_inputs)) {
      if (s.min_inputs == s.max_inputs) error(n, "expects {} inputs, got {}", s.min_inputs, nin);
      else if (s.max_inputs < 0) error(n, "expects at least {} inputs, got {}", s.min_inputs, nin);
      else error(n, "expects {} to {} inputs, got {}", s.min_inputs, s.max_inputs, nin);
      return;
    }
    if (int(n.outputs().size()) != s.outputs) error(n, "expects {} outputs, got {}", s.outputs, n.outputs().size());
    if (!n.blocks().empty()) error(n, "takes no blocks, got {}", n.blocks().size());
    for (const auto& [attr, kind] : s.required)
      if (!n.attrs().has(attr)) error(n, "missing attribute '{}' ({})", attr, attr_kind_name(kind));
    for (const auto& [k, v] : n.attrs().items()) {
      auto match = [&](const auto& list) {
        for (const auto& [attr, kind] : list)
          if (k == attr) return int(kind);
        return -1;
      };
      int want = std::max(match(s.required), match(s.optional));
      if (want < 0) error(n, "unknown attribute '{}'", k);
      else if (int(v.index()) != want)
        error(n, "attribute '{}' must be {}, got {}", k, attr_kind_name(AttrKind(want)), attr_value_str(v));
    }
    for (const Value* v : n.inputs())
      if (!v->type().is_tensor()) error(n, "input {} must be a tensor, got {}", name(v), v->type().str());
    for (const Value* v : n.outputs())
      if (!v->type().is_tensor()) error(n, "output {} must be a tensor, got {}", name(v), v->type().str());
    check_dtype(n);
  }

  void check_dtype(const Node& n) {
    if (n.outputs().empty()) return;
    const Value* out = n.output(0);
    std::optional<DType> want = op_result_dtype(n, /*others_keep_first=*/false);
    if (want && out->type().dtype && *out->type().dtype != *want) {
      std::string ins;
      for (const Value* v : n.inputs()) ins += (ins.empty() ? "" : ", ") + v->type().str();
      error(n, "inputs ({}) give dtype {}, but the output is declared {}", ins, dtype_short_name(*want),
            out->type().str());
    }
  }

  const Graph& g_;
  mutable std::optional<PrintedGraph> printed_;
  std::vector<std::unordered_set<const Value*>> scopes_;
  std::vector<std::string> errors_;
};

}  // namespace

std::vector<std::string> verify_errors(const Graph& g) { return Verifier(g).run(); }

void verify(const Graph& g) {
  std::vector<std::string> errs = verify_errors(g);
  if (errs.empty()) return;
  std::string msg = fmt::format("ir verify: {} problem{}", errs.size(), errs.size() == 1 ? "" : "s");
  for (const std::string& e : errs) msg += "\n  " + e;
  fail("{}", msg);
}

}  // namespace kiln::ir
