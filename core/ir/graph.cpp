#include "core/ir/graph.h"

#include <algorithm>
#include <ostream>

#include "core/error.h"

namespace kiln::ir {

namespace {
struct PrimRow {
  Prim p;
  std::string_view name;
  Effect effect;
};
constexpr PrimRow kPrims[] = {
#define KILN_PRIM(Id, name, nin, nout, effect) {Prim::Id, name, Effect::effect},
#include "core/ir/prims.def"
};
}  // namespace

std::string_view prim_name(Prim p) { return kPrims[size_t(p)].name; }
Effect prim_effect(Prim p) { return kPrims[size_t(p)].effect; }
bool prim_from_name(std::string_view name, Prim* out) {
  for (const PrimRow& r : kPrims)
    if (r.name == name && r.p != Prim::Op && r.p != Prim::Param && r.p != Prim::Return) {
      *out = r.p;
      return true;
    }
  return false;
}

// ---------------------------------------------------------------------------------------------- Value

Graph* Value::graph() const { return node_->graph(); }

void Value::replace_all_uses_with(Value* v) {
  if (v == this) return;
  std::vector<Use> uses = uses_;
  for (const Use& u : uses) u.user->replace_input(u.index, v);
}

// ----------------------------------------------------------------------------------------------- Node

Node::~Node() {
  for (Value* v : outputs_) delete v;
  for (Block* b : blocks_) delete b;
}

OpId Node::op() const {
  if (prim_ != Prim::Op) fail("ir: {} is not a table op", kind_name());
  return op_;
}

std::string_view Node::kind_name() const { return prim_ == Prim::Op ? op_name(op_) : prim_name(prim_); }

Value* Node::input(size_t i) const {
  if (i >= inputs_.size()) fail("ir: {} has {} inputs, asked for input {}", kind_name(), inputs_.size(), i);
  return inputs_[i];
}

Value* Node::output(size_t i) const {
  if (i >= outputs_.size()) fail("ir: {} has {} outputs, asked for output {}", kind_name(), outputs_.size(), i);
  return outputs_[i];
}

Value* Node::add_input(Value* v) {
  v->uses_.push_back({this, inputs_.size()});
  inputs_.push_back(v);
  return v;
}

void Node::insert_input(size_t i, Value* v) {
  for (size_t j = i; j < inputs_.size(); ++j)
    for (Use& u : inputs_[j]->uses_)
      if (u.user == this && u.index == j) {
        ++u.index;
        break;
      }
  inputs_.insert(inputs_.begin() + ptrdiff_t(i), v);
  v->uses_.push_back({this, i});
}

void Node::drop_use(size_t i) {
  auto& uses = inputs_[i]->uses_;
  auto it = std::find(uses.begin(), uses.end(), Use{this, i});
  uses.erase(it);
}

Value* Node::replace_input(size_t i, Value* v) {
  Value* old = input(i);
  drop_use(i);
  inputs_[i] = v;
  v->uses_.push_back({this, i});
  return old;
}

void Node::replace_input_with(Value* from, Value* to) {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (inputs_[i] == from) replace_input(i, to);
}

void Node::remove_input(size_t i) {
  drop_use(i);
  for (size_t j = i + 1; j < inputs_.size(); ++j)
    for (Use& u : inputs_[j]->uses_)
      if (u.user == this && u.index == j) {
        --u.index;
        break;
      }
  inputs_.erase(inputs_.begin() + ptrdiff_t(i));
}

void Node::remove_all_inputs() {
  for (size_t i = 0; i < inputs_.size(); ++i) drop_use(i);
  inputs_.clear();
}

Value* Node::add_output(Type t) {
  outputs_.push_back(new Value(this, outputs_.size(), std::move(t)));
  return outputs_.back();
}

void Node::erase_output(size_t i) {
  Value* v = output(i);
  if (v->has_uses()) fail("ir: cannot erase output {} of {}: it still has {} uses", i, kind_name(), v->uses().size());
  delete v;
  outputs_.erase(outputs_.begin() + ptrdiff_t(i));
  for (size_t j = i; j < outputs_.size(); ++j) outputs_[j]->offset_ = j;
}

Block* Node::add_block() {
  blocks_.push_back(new Block(graph_, this));
  return blocks_.back();
}

void Node::erase_block(size_t i) {
  Block* b = blocks_.at(i);
  b->return_->remove_all_inputs();
  std::vector<Node*> nodes;
  for (Node* n : b->nodes()) nodes.push_back(n);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) (*it)->destroy();
  graph_->free_node(b->param_);
  graph_->free_node(b->return_);
  blocks_.erase(blocks_.begin() + ptrdiff_t(i));
  delete b;
}

Node* Node::insert_before(Node* n) {
  if (in_block_list()) fail("ir: {} is already in a block", kind_name());
  if (!n->prev_) fail("ir: cannot insert before a block's parameter node");
  owner_ = n->owner_;
  prev_ = n->prev_;
  next_ = n;
  n->prev_->next_ = this;
  n->prev_ = this;
  return this;
}

Node* Node::insert_after(Node* n) {
  if (!n->next_) fail("ir: cannot insert after a block's return node");
  return insert_before(n->next_);
}

void Node::remove_from_list() {
  if (!in_block_list()) return;
  prev_->next_ = next_;
  next_->prev_ = prev_;
  prev_ = next_ = nullptr;
  owner_ = nullptr;
}

void Node::move_before(Node* n) {
  remove_from_list();
  insert_before(n);
}

void Node::move_after(Node* n) {
  remove_from_list();
  insert_after(n);
}

bool Node::is_before(const Node* n) const {
  if (owner_ != n->owner_) fail("ir: is_before: {} and {} are in different blocks", kind_name(), n->kind_name());
  for (const Node* p = next_; p; p = p->next_)
    if (p == n) return true;
  return false;
}

void Node::destroy() {
  for (Value* v : outputs_)
    if (v->has_uses())
      fail("ir: cannot destroy {}: output {} still has {} uses", kind_name(), v->offset(), v->uses().size());
  while (!blocks_.empty()) erase_block(blocks_.size() - 1);
  remove_all_inputs();
  remove_from_list();
  graph_->free_node(this);
}

// ---------------------------------------------------------------------------------------------- Block

Block::Block(Graph* g, Node* owner) : graph_(g), owner_(owner) {
  param_ = g->new_node(Prim::Param, OpId{});
  return_ = g->new_node(Prim::Return, OpId{});
  param_->owner_ = return_->owner_ = this;
  param_->next_ = return_;
  return_->prev_ = param_;
}

Block::~Block() = default;  // the graph frees the nodes

const std::vector<Value*>& Block::inputs() const { return param_->outputs(); }
const std::vector<Value*>& Block::outputs() const { return return_->inputs(); }

Value* Block::add_input(Type t, std::string name) {
  Value* v = param_->add_output(std::move(t));
  v->set_name(std::move(name));
  return v;
}

void Block::erase_input(size_t i) { param_->erase_output(i); }
size_t Block::register_output(Value* v) {
  return_->add_input(v);
  return return_->inputs().size() - 1;
}
void Block::erase_output(size_t i) { return_->remove_input(i); }

void Block::clone_from(const Block& src, std::unordered_map<const Value*, Value*>& env) {
  auto lookup = [&](const Value* v) {
    auto it = env.find(v);
    if (it == env.end()) fail("ir: clone: value used before its definition was mapped");
    return it->second;
  };
  for (Node* n : src.nodes()) {
    Node* c = graph_->new_node(n->prim_, n->op_);
    c->attrs_ = n->attrs_;
    c->tensor_ = n->tensor_;
    c->line = n->line;
    for (Value* in : n->inputs()) c->add_input(lookup(in));
    for (Value* out : n->outputs()) {
      Value* co = c->add_output(out->type());
      co->set_name(out->name());
      env[out] = co;
    }
    for (Block* b : n->blocks()) {
      Block* cb = c->add_block();
      for (Value* a : b->inputs()) env[a] = cb->add_input(a->type(), a->name());
      cb->clone_from(*b, env);
      for (Value* r : b->outputs()) cb->register_output(lookup(r));
    }
    append(c);
  }
}

// ---------------------------------------------------------------------------------------------- Graph

Graph::Graph() {
  Node* root = nullptr;  // the top block has no owning node
  top_ = new Block(this, root);
  insert_point_ = top_->return_node();
}

Graph::~Graph() {
  for (Node* n : all_) {
    for (Block* b : n->blocks_) b->owner_ = nullptr;
    delete n;
  }
  delete top_;
}

Node* Graph::new_node(Prim p, OpId op) {
  Node* n = new Node(this, p, op);
  all_.insert(n);
  return n;
}

void Graph::free_node(Node* n) {
  if (insert_point_ == n) fail("ir: cannot free the node that is the insertion point");
  all_.erase(n);
  delete n;
}

Node* Graph::create(Prim p, size_t num_outputs) {
  if (p == Prim::Op) fail("ir: create a table op with create_op");
  Node* n = new_node(p, OpId{});
  for (size_t i = 0; i < num_outputs; ++i) n->add_output();
  return n;
}

Node* Graph::create_op(OpId op, const std::vector<Value*>& inputs, Attrs attrs, size_t num_outputs) {
  Node* n = new_node(Prim::Op, op);
  for (Value* v : inputs) n->add_input(v);
  n->attrs_ = std::move(attrs);
  for (size_t i = 0; i < num_outputs; ++i) n->add_output();
  return n;
}

Node* Graph::insert(Node* n) { return n->insert_before(insert_point_); }

Value* Graph::insert_constant(const Tensor& t, bool wrapped) {
  Node* n = create(Prim::Constant);
  n->set_tensor(t);
  if (wrapped) n->attrs().set("wrapped", true);
  n->output()->set_type(type_of(t.dtype(), t.sizes()));
  return insert(n)->output();
}

namespace {
Value* scalar_constant(Graph& g, AttrValue v, TypeKind k) {
  Node* n = g.create(Prim::Constant);
  n->attrs().set("value", std::move(v));
  n->output()->set_type(Type::scalar(k));
  return g.insert(n)->output();
}
}  // namespace

Value* Graph::insert_constant(int64_t v) { return scalar_constant(*this, v, TypeKind::Int); }
Value* Graph::insert_constant(double v) { return scalar_constant(*this, v, TypeKind::Float); }
Value* Graph::insert_constant(bool v) { return scalar_constant(*this, v, TypeKind::Bool); }
Value* Graph::insert_constant(const std::string& v) { return scalar_constant(*this, v, TypeKind::Str); }
Value* Graph::insert_none() {
  Node* n = create(Prim::Constant);
  n->output()->set_type(Type::scalar(TypeKind::None));
  return insert(n)->output();
}

std::unique_ptr<Graph> Graph::copy() const {
  auto g = std::make_unique<Graph>();
  std::unordered_map<const Value*, Value*> env;
  for (Value* in : inputs()) env[in] = g->add_input(in->type(), in->name());
  g->block()->clone_from(*top_, env);
  for (Value* out : outputs()) g->register_output(env.at(out));
  return g;
}

std::ostream& operator<<(std::ostream& os, const Graph& g) { return os << g.str(); }

}  // namespace kiln::ir
