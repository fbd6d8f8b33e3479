#include "jit/fusion_group.h"

#include <unordered_map>
#include <unordered_set>

#include "jit/ir_utils.h"

namespace kiln::jit {

namespace {

bool is_scalar_constant(const ir::Value* v) {
  const Tensor* t = tensor_constant(v);
  return t && t->dim() == 0;
}

}  // namespace

const Backend& rules_of(const Backend* backend) { return backend ? *backend : backends::default_fusion_rules(); }

bool fusible(const ir::Node& n, bool reduction, const Backend* backend) { return rules_of(backend).can_fuse(n, reduction); }

ir::Node* make_group(ir::Graph& g, const std::vector<ir::Node*>& members) {
  std::unordered_set<const ir::Node*> in_group(members.begin(), members.end());
  ir::Node* last = members.back();
  ir::Node* group = g.create(ir::Prim::FusionGroup, 0);
  ir::Block* body = group->add_block();
  std::unordered_map<const ir::Value*, ir::Value*> env;
  std::string name = "fused";
  for (ir::Node* m : members) {
    if (m->prim() == ir::Prim::Constant) {  // a constant an inlined group had copied in
      ir::Node* c = g.create(ir::Prim::Constant);
      c->set_tensor(m->tensor());
      c->attrs() = m->attrs();
      c->output()->set_type(m->output()->type());
      body->append(c);
      env[m->output()] = c->output();
      continue;
    }
    for (ir::Value* v : m->inputs()) {
      if (env.count(v)) continue;
      if (is_scalar_constant(v)) {
        ir::Node* c = g.create(ir::Prim::Constant);
        c->set_tensor(*tensor_constant(v));
        c->attrs() = v->node()->attrs();
        c->output()->set_type(v->type());
        body->append(c);
        env[v] = c->output();
        continue;
      }
      group->add_input(v);
      env[v] = body->add_input(v->type());
    }
    ir::Node* c = g.create_op(m->op(), {}, m->attrs(), 0);
    for (ir::Value* v : m->inputs()) c->add_input(env.at(v));
    for (ir::Value* o : m->outputs()) env[o] = c->add_output(o->type());
    body->append(c);
    name += '_';  // two appends: GCC 12's -Wrestrict misfires on `"_" + std::string` once this is inlined
    name += m->kind_name();
  }
  std::vector<std::pair<ir::Value*, ir::Value*>> exported;  // member value → group output
  for (ir::Node* m : members)
    for (ir::Value* o : m->outputs()) {
      bool outside = false;
      for (const ir::Use& u : o->uses()) outside |= !in_group.count(u.user);
      if (!outside) continue;
      body->register_output(env.at(o));
      ir::Value* out = group->add_output(o->type());
      out->set_name(o->name());
      exported.emplace_back(o, out);
    }
  group->attrs().set("name", name);
  group->insert_before(last);
  for (auto& [from, to] : exported) from->replace_all_uses_with(to);
  for (auto it = members.rbegin(); it != members.rend(); ++it) (*it)->destroy();
  return group;
}

int64_t drop_unused_constants(ir::Block& b) {
  std::vector<ir::Node*> dead;
  for (ir::Node* n : b.nodes())
    if (n->prim() == ir::Prim::Constant && !n->output()->has_uses()) dead.push_back(n);
  for (ir::Node* n : dead) n->destroy();
  return int64_t(dead.size());
}

std::vector<ir::Node*> inline_group(ir::Node* group) {
  ir::Block* body = group->blocks()[0];
  for (size_t i = 0; i < group->inputs().size(); ++i) body->inputs()[i]->replace_all_uses_with(group->input(i));
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : body->nodes()) nodes.push_back(n);
  for (ir::Node* n : nodes) n->move_before(group);
  for (size_t i = 0; i < group->outputs().size(); ++i) {
    if (!group->output(i)->name().empty()) body->outputs()[i]->set_name(group->output(i)->name());
    group->output(i)->replace_all_uses_with(body->outputs()[i]);
  }
  group->destroy();
  return nodes;
}

}  // namespace kiln::jit
