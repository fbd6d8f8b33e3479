// Common subexpression elimination: two pure nodes of the same kind, inputs and attributes compute
// the same values, so the later one's uses move to the earlier. Scoped: a node in a block may reuse
// one from an enclosing block, never the other way round. Tensor constants merge when equal.
#include <map>
#include <tuple>

#include "core/ir/printer.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

// The identity of a node's computation, as text: kind, attributes (and a small constant's values),
// and the input values.
std::string key_of(const ir::Node& n) {
  std::string k(n.kind_name());
  if (n.prim() == ir::Prim::Constant && n.tensor().defined()) {
    if (n.tensor().numel() > 64) return {};  // large constants: equality costs more than it saves
    ir::Graph tmp;
    tmp.register_output(tmp.insert_constant(n.tensor(), n.attrs().has("wrapped")));
    k += tmp.str();
  }
  // formatted, not concatenated: GCC 12 -Wrestrict misfires on `"|" + std::string` once inlined here
  for (const auto& [name, v] : n.attrs().items()) k += fmt::format("|{}={}", name, ir::attr_value_str(v));
  for (const ir::Value* v : n.inputs()) k += fmt::format("|{}", static_cast<const void*>(v));
  for (const ir::Value* v : n.outputs()) k += fmt::format("|{}", v->type().str());
  return k;
}

int64_t run_block(ir::Block& b, std::vector<std::map<std::string, ir::Node*>>& scopes) {
  int64_t merged = 0;
  scopes.emplace_back();
  for (ir::Node* n : b.nodes()) {
    for (ir::Block* sub : n->blocks()) merged += run_block(*sub, scopes);
    if (!n->blocks().empty() || !is_pure(*n) || n->outputs().empty()) continue;
    std::string k = key_of(*n);
    if (k.empty()) continue;
    ir::Node* same = nullptr;
    for (auto& s : scopes) {
      auto it = s.find(k);
      if (it != s.end()) same = it->second;
    }
    if (!same) {
      scopes.back()[k] = n;
      continue;
    }
    for (size_t i = 0; i < n->outputs().size(); ++i) n->output(i)->replace_all_uses_with(same->output(i));
    n->destroy();
    ++merged;
  }
  scopes.pop_back();
  return merged;
}

}  // namespace

PassResult eliminate_common_subexpressions(ir::Graph& g) {
  std::vector<std::map<std::string, ir::Node*>> scopes;
  return {run_block(*g.block(), scopes), {}};
}

}  // namespace kiln::jit
