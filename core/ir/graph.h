#pragma once
// The IR: a Graph owns Nodes; a Node has input Values (uses), output Values (defs), attributes and,
// for control flow, Blocks; a Block is a list of Nodes between a Param node (its arguments) and a
// Return node (its results). SSA: each Value has one definition and a list of uses.
//
// Notes (invariants the verifier checks):
//   [def-before-use] a value is used only after its definition, in its block or a nested one.
//   [use-lists] v->uses() holds exactly the (node, input index) pairs that read v.
//   [owned] every node of a graph is reachable from graph.block(), except while being built.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/attrs.h"
#include "core/ir/type.h"
#include "core/op.h"
#include "core/tensor.h"

namespace kiln::ir {

enum class Prim : uint8_t {
#define KILN_PRIM(Id, name, nin, nout, effect) Id,
#include "core/ir/prims.def"
};
std::string_view prim_name(Prim p);
// What a node does besides its result (prims.def's effect column); op rows are Pure.
enum class Effect : uint8_t { Pure, Raises, Draws, Prints };
Effect prim_effect(Prim p);
bool prim_from_name(std::string_view name, Prim* out);

class Node;
class Block;
class Graph;

struct Use {
  Node* user;
  size_t index;
  bool operator==(const Use&) const = default;
};

class Value {
 public:
  Node* node() const { return node_; }
  size_t offset() const { return offset_; }
  const Type& type() const { return type_; }
  void set_type(Type t) { type_ = std::move(t); }
  // The name given by the user or the parser; empty values print as %<number>.
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }
  const std::vector<Use>& uses() const { return uses_; }
  bool has_uses() const { return !uses_.empty(); }
  Graph* graph() const;

  // Given:   %3 = f(%1)
  //          %4 = g(%1, %1)
  // Execute: %1->replace_all_uses_with(%2)
  // Result:  %3 = f(%2)
  //          %4 = g(%2, %2)
  void replace_all_uses_with(Value* v);

 private:
  friend class Node;
  friend class Block;
  Value(Node* n, size_t off, Type t) : node_(n), offset_(off), type_(std::move(t)) {}
  Node* node_;
  size_t offset_;
  Type type_;
  std::string name_;
  std::vector<Use> uses_;
};

class Node {
 public:
  ~Node();
  Prim prim() const { return prim_; }
  bool is_op() const { return prim_ == Prim::Op; }
  bool is_op(OpId op) const { return prim_ == Prim::Op && op_ == op; }
  OpId op() const;  // raises unless is_op()
  // "add", "prim::If", ...: the name the text form uses.
  std::string_view kind_name() const;

  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(size_t i = 0) const;
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* output(size_t i = 0) const;
  const std::vector<Block*>& blocks() const { return blocks_; }
  Attrs& attrs() { return attrs_; }
  const Attrs& attrs() const { return attrs_; }
  // The value of a tensor constant (prim::Constant with a tensor output).
  const Tensor& tensor() const { return tensor_; }
  void set_tensor(Tensor t) { tensor_ = std::move(t); }

  Block* owning_block() const { return owner_; }
  Graph* graph() const { return graph_; }
  Node* next() const { return next_; }
  Node* prev() const { return prev_; }
  bool in_block_list() const { return next_ != nullptr; }
  // Source line this node came from (the parser's or the script file's), 0 when none.
  int line = 0;

  // ---- inputs ----
  Value* add_input(Value* v);
  void insert_input(size_t i, Value* v);
  // Given:   %3 = f(%1, %2)
  // Execute: n->replace_input(1, %1)
  // Result:  %3 = f(%1, %1)      (%2 loses the use, %1 gains it)
  Value* replace_input(size_t i, Value* v);
  // Replaces every input equal to `from` with `to`.
  void replace_input_with(Value* from, Value* to);
  void remove_input(size_t i);
  void remove_all_inputs();

  // ---- outputs and blocks ----
  Value* add_output(Type t = Type::tensor());
  void erase_output(size_t i);  // raises when the output still has uses
  Block* add_block();
  void erase_block(size_t i);

  // ---- position ----
  // Given:   %1 = f()        Execute: g->insert_before(f-node)     Result:  %2 = g()
  //                                                                         %1 = f()
  // (g must not be in a block yet; insert_after is the mirror image.)
  Node* insert_before(Node* n);
  Node* insert_after(Node* n);
  // Given:   %1 = f()
  //          %2 = g()
  //          %3 = h(%1)
  // Execute: h-node->move_before(g-node)
  // Result:  %1 = f()
  //          %3 = h(%1)
  //          %2 = g()
  // The caller keeps [def-before-use]; the verifier checks it.
  void move_before(Node* n);
  void move_after(Node* n);
  // Unlinks the node from its block without freeing it (for moving between blocks).
  void remove_from_list();
  // True when this node comes earlier in the same block than n.
  bool is_before(const Node* n) const;
  // Given:   %1 = f()            Execute: g-node->destroy()     Result:  %1 = f()
  //          %2 = g(%1)                                                  (%1 has no uses)
  // Raises when an output of the node still has uses. Nested blocks go with it.
  void destroy();

 private:
  friend class Graph;
  friend class Block;
  Node(Graph* g, Prim p, OpId op) : graph_(g), prim_(p), op_(op) {}
  void drop_use(size_t i);
  Graph* graph_;
  Prim prim_;
  OpId op_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;  // owned
  std::vector<Block*> blocks_;   // owned
  Attrs attrs_;
  Tensor tensor_;
  Block* owner_ = nullptr;
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
};

// Iterates the nodes of a block, Param and Return excluded. Robust to destroying the current node.
class NodeRange {
 public:
  class iterator {
   public:
    explicit iterator(Node* n) : n_(n), next_(n ? n->next() : nullptr) {}
    Node* operator*() const { return n_; }
    iterator& operator++() {
      n_ = next_;
      next_ = n_ ? n_->next() : nullptr;
      return *this;
    }
    bool operator!=(const iterator& o) const { return n_ != o.n_; }

   private:
    Node* n_;
    Node* next_;
  };
  NodeRange(Node* first, Node* end) : first_(first), end_(end) {}
  iterator begin() const { return iterator(first_); }
  iterator end() const { return iterator(end_); }

 private:
  Node* first_;
  Node* end_;
};

class Block {
 public:
  ~Block();
  const std::vector<Value*>& inputs() const;
  const std::vector<Value*>& outputs() const;
  Value* add_input(Type t, std::string name = {});
  void erase_input(size_t i);  // raises when it has uses
  size_t register_output(Value* v);
  void erase_output(size_t i);
  NodeRange nodes() const { return {param_->next(), return_}; }
  Node* param_node() const { return param_; }
  Node* return_node() const { return return_; }
  Node* append(Node* n) { return n->insert_before(return_); }
  Node* prepend(Node* n) { return n->insert_after(param_); }
  Node* owning_node() const { return owner_; }
  Graph* graph() const { return graph_; }
  // Copies src's nodes (nested blocks too) to the end of this block. `env` maps src's values that are
  // defined outside the copied nodes (src's arguments, outer values) to values here; the copies'
  // outputs are added to it. Returns nothing; src's results map through env afterwards.
  //
  // Given:   src = block0(%a):  %1 = neg(%a)  -> (%1)      env = {%a: %x}
  // Execute: dst->clone_from(src, env)
  // Result:  dst gains  %2 = neg(%x), env[%1] = %2
  void clone_from(const Block& src, std::unordered_map<const Value*, Value*>& env);

 private:
  friend class Graph;
  friend class Node;
  Block(Graph* g, Node* owner);
  Graph* graph_;
  Node* owner_;
  Node* param_;
  Node* return_;
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Block* block() const { return top_; }
  const std::vector<Value*>& inputs() const { return top_->inputs(); }
  const std::vector<Value*>& outputs() const { return top_->outputs(); }
  Value* add_input(Type t, std::string name = {}) { return top_->add_input(std::move(t), std::move(name)); }
  size_t register_output(Value* v) { return top_->register_output(v); }

  // A new node, not yet in any block, with `num_outputs` outputs of unknown tensor type.
  Node* create(Prim p, size_t num_outputs = 1);
  Node* create_op(OpId op, const std::vector<Value*>& inputs, Attrs attrs = {}, size_t num_outputs = 1);
  // Inserts at the insertion point (default: the end of the top block) and returns n.
  Node* insert(Node* n);
  // Subsequent insert() calls put nodes before `n` (or at the end of block `b`).
  void set_insert_point(Node* n) { insert_point_ = n; }
  void set_insert_point(Block* b) { insert_point_ = b->return_node(); }
  Node* insert_point() const { return insert_point_; }

  // Constants, inserted at the insertion point.
  Value* insert_constant(const Tensor& t, bool wrapped = false);
  Value* insert_constant(int64_t v);
  Value* insert_constant(double v);
  Value* insert_constant(bool v);
  Value* insert_constant(const std::string& v);
  Value* insert_none();

  std::unique_ptr<Graph> copy() const;
  std::string str() const;  // the text form (core/ir/printer.cpp)
  size_t num_nodes() const { return all_.size(); }

 private:
  friend class Node;
  friend class Block;
  Node* new_node(Prim p, OpId op);
  void free_node(Node* n);
  std::unordered_set<Node*> all_;
  Block* top_;
  Node* insert_point_;
};

// Restores the graph's insertion point when it goes out of scope.
class InsertPointGuard {
 public:
  explicit InsertPointGuard(Graph& g) : g_(g), saved_(g.insert_point()) {}
  ~InsertPointGuard() { g_.set_insert_point(saved_); }

 private:
  Graph& g_;
  Node* saved_;
};

std::ostream& operator<<(std::ostream& os, const Graph& g);

}  // namespace kiln::ir
