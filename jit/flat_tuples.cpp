#include "jit/flat_tuples.h"

#include "core/ir/verifier.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

using ir::Prim;

bool only_tensors(const ir::Type& t) {
  if (t.is_tensor()) return true;
  if (t.kind != ir::TypeKind::Tuple) return false;
  for (const ir::Type& e : t.elems)
    if (!only_tensors(e)) return false;
  return true;
}

size_t num_tensors(const ir::Type& t) {
  if (t.is_tensor()) return 1;
  size_t n = 0;
  for (const ir::Type& e : t.elems) n += num_tensors(e);
  return n;
}

// Adds g's inputs for t's tensors; returns t's value built from them.
ir::Value* add_inputs(ir::Graph& g, const ir::Type& t, const std::string& name) {
  if (t.is_tensor()) return g.add_input(t, name);
  ir::Node* n = g.create(Prim::TupleConstruct, 1);
  for (size_t i = 0; i < t.elems.size(); ++i) n->add_input(add_inputs(g, t.elems[i], name + "." + std::to_string(i)));
  n->output()->set_type(t);
  return g.block()->append(n)->output();
}

ir::Value* element(ir::Graph& g, ir::Value* tuple, size_t i) {
  if (tuple->node()->prim() == Prim::TupleConstruct) return tuple->node()->input(i);
  ir::Node* n = g.create(Prim::TupleIndex, 1);
  n->add_input(tuple);
  n->attrs().set("index", int64_t(i));
  n->output()->set_type(tuple->type().elems[i]);
  return g.block()->append(n)->output();
}

void add_outputs(ir::Graph& g, ir::Value* v) {
  if (v->type().is_tensor()) {
    g.register_output(v);
    return;
  }
  for (size_t i = 0; i < v->type().elems.size(); ++i) add_outputs(g, element(g, v, i));
}

void flatten_value(const IValue& v, std::vector<IValue>& out) {
  if (!v.is_tuple()) {
    out.push_back(v);
    return;
  }
  for (const IValue& e : v.elements()) flatten_value(e, out);
}

IValue nest(std::vector<IValue>& flat, size_t& at, const ir::Type& t) {
  if (t.kind != ir::TypeKind::Tuple) return std::move(flat.at(at++));
  std::vector<IValue> es;
  for (const ir::Type& e : t.elems) es.push_back(nest(flat, at, e));
  return IValue::tuple(std::move(es));
}

}  // namespace

FlatTuples flatten_tuples(const ir::Graph& source) {
  FlatTuples r;
  for (const ir::Value* v : source.outputs()) r.output_types.push_back(v->type());
  for (const ir::Value* v : source.inputs())
    if (!only_tensors(v->type())) return r;
  for (const ir::Value* v : source.outputs())
    if (!only_tensors(v->type())) return r;
  auto g = std::make_shared<ir::Graph>();
  std::unordered_map<const ir::Value*, ir::Value*> env;
  for (const ir::Value* v : source.inputs()) env[v] = add_inputs(*g, v->type(), v->name());
  g->block()->clone_from(*source.block(), env);
  for (const ir::Value* v : source.outputs()) add_outputs(*g, env.at(v));
  // Where the tuple is built in the graph, its element is read directly: the tuple itself goes unused.
  for_each_node(*g->block(), [](ir::Node* n) {
    if (n->prim() != Prim::TupleIndex || n->input(0)->node()->prim() != Prim::TupleConstruct) return;
    n->output()->replace_all_uses_with(n->input(0)->node()->input(size_t(n->attrs().i("index"))));
  });
  eliminate_dead_code(*g);
  ir::verify(*g);
  r.graph = std::move(g);
  return r;
}

std::vector<IValue> flatten_values(const std::vector<IValue>& values) {
  std::vector<IValue> out;
  out.reserve(values.size());
  for (const IValue& v : values) flatten_value(v, out);
  return out;
}

std::vector<IValue> nest_values(std::vector<IValue> flat, const std::vector<ir::Type>& types) {
  std::vector<IValue> out;
  size_t at = 0;
  for (const ir::Type& t : types) out.push_back(nest(flat, at, t));
  return out;
}

std::vector<bool> flatten_flags(const std::vector<bool>& flags, const std::vector<ir::Type>& types) {
  std::vector<bool> out;
  for (size_t i = 0; i < types.size(); ++i) out.insert(out.end(), num_tensors(types[i]), i < flags.size() && flags[i]);
  return out;
}

}  // namespace kiln::jit
