// The interpreter's plan: slots for values, the steps of each block, the order steps may run in (which
// wait for which, which keep their place) and when a value is released.
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "backends/interp/input_reads.h"
#include "backends/interp/interpreter_plan.h"
#include "backends/interp/takeover.h"

namespace kiln::interp {

namespace {

using ir::Block;
using ir::Node;
using ir::Value;

// Control flow and nodes with an effect keep their place: they run alone, in program order (the RNG
// sequence, which error is raised and the printed text match a sequential run).
bool ordered(const Node& n) {
  if (n.prim() == ir::Prim::If || n.prim() == ir::Prim::Loop || ir::prim_effect(n.prim()) != ir::Effect::Pure) return true;
  for (const Block* b : n.blocks())
    for (const Node* m : b->nodes())
      if (ordered(*m)) return true;
  return false;
}

// Values a node reads from outside itself: its inputs and what its nested blocks read from above.
void outer_reads(const Node& n, std::vector<const Value*>& out) {
  for (const Value* v : n.inputs()) out.push_back(v);
  if (n.blocks().empty()) return;
  std::unordered_set<const Value*> inside;
  std::vector<const Value*> reads;
  std::function<void(const Block&)> walk = [&](const Block& b) {
    for (const Value* a : b.inputs()) inside.insert(a);
    for (const Node* m : b.nodes()) {
      for (const Value* v : m->inputs()) reads.push_back(v);
      for (const Block* sub : m->blocks()) walk(*sub);
      for (const Value* v : m->outputs()) inside.insert(v);
    }
    for (const Value* v : b.outputs()) reads.push_back(v);
  };
  for (const Block* b : n.blocks()) walk(*b);
  for (const Value* v : reads)
    if (!inside.count(v)) out.push_back(v);
}

// Step j waits for the steps writing what it reads; an ordered step waits for every step before it
// and every step after it waits for it. Sets `concurrent` when two non-constant steps have the same
// depth (longest path from a step with no predecessor), so some pair can run at once.
void build_order(Plan::BlockPlan& bp, const std::unordered_map<int, int>& writer) {
  size_t n = bp.steps.size();
  StepGraph& o = bp.order;
  o.num_deps.assign(n, 0);
  o.succs.assign(n, {});
  o.exclusive.assign(n, false);
  auto edge = [&](size_t from, size_t to) {
    o.succs[from].push_back(int(to));
    ++o.num_deps[to];
  };
  int last_ordered = -1;
  for (size_t j = 0; j < n; ++j) {
    const Plan::Step& s = bp.steps[j];
    for (int slot : s.reads)
      if (auto it = writer.find(slot); it != writer.end()) edge(size_t(it->second), j);
    // A step that drops values (takeover.h) runs after every step writing or reading them: the values are
    // dead after it, and the tensor it takes over must be unshared when it runs.
    for (int slot : s.drop) {
      if (auto it = writer.find(slot); it != writer.end()) edge(size_t(it->second), j);
      for (size_t i = 0; i < j; ++i)
        if (std::find(bp.steps[i].reads.begin(), bp.steps[i].reads.end(), slot) != bp.steps[i].reads.end()) edge(i, j);
    }
    if (ordered(*s.node)) {
      o.exclusive[j] = true;
      for (size_t i = size_t(last_ordered + 1); i < j; ++i) edge(i, j);
      if (last_ordered >= 0) edge(size_t(last_ordered), j);
      last_ordered = int(j);
    } else if (last_ordered >= 0) {
      edge(size_t(last_ordered), j);
    }
  }
  std::vector<int> depth(n, 0);
  std::unordered_map<int, int> at_depth;
  for (size_t j = 0; j < n; ++j) {
    for (int s : o.succs[j]) depth[size_t(s)] = std::max(depth[size_t(s)], depth[j] + 1);
    const Node& node = *bp.steps[j].node;
    if (node.is_op() || node.prim() != ir::Prim::Constant)
      if (++at_depth[depth[j]] > 1) bp.concurrent = true;
  }
}

}  // namespace

Plan::Plan(const ir::Graph& g, bool free_dead_values) : graph_(g) {
  std::unordered_map<const Value*, int> slot;
  auto number = [&](const Value* v) { return slot.emplace(v, int(slot.size())).first->second; };
  std::function<void(const Block&)> build = [&](const Block& b) {
    auto& owned = blocks_[&b];
    owned = std::make_unique<BlockPlan>();
    BlockPlan& bp = *owned;
    for (const Value* a : b.inputs()) bp.args.push_back(number(a));
    std::unordered_map<int, int> writer;  // slot → the step of this block writing it
    for (Node* n : b.nodes()) {
      Step s{n, {}, {}, {}, {}, {}};
      for (const Value* v : n->inputs()) {
        auto it = slot.find(v);
        if (it == slot.end()) fail("interp: {} reads a value before its definition (run the verifier)", n->kind_name());
        s.in.push_back(it->second);
      }
      for (Block* sub : n->blocks()) build(*sub);
      std::vector<const Value*> reads;
      outer_reads(*n, reads);
      for (const Value* v : reads)
        if (auto it = slot.find(v); it != slot.end() && std::find(s.reads.begin(), s.reads.end(), it->second) == s.reads.end())
          s.reads.push_back(it->second);
      for (const Value* v : n->outputs()) {
        s.out.push_back(number(v));
        writer[s.out.back()] = int(bp.steps.size());
      }
      bp.steps.push_back(std::move(s));
    }
    for (const Value* v : b.outputs()) bp.results.push_back(slot.at(v));
    for (const Takeover& t : takeovers(b))
      for (const Value* v : t.dead) bp.steps[t.step].drop.push_back(slot.at(v));
    build_order(bp, writer);
  };
  build(*g.block());
  num_slots_ = int(slot.size());
  std::function<void(const Block&)> scan = [&](const Block& b) {
    for (const Node* n : b.nodes()) {
      if (!n->is_op() && n->prim() == ir::Prim::Constant && n->tensor().defined() &&
          (n->tensor().requires_grad() || !n->tensor().device().is_cpu()))
        constants_allow_interop_ = false;
      for (const Block* sub : n->blocks()) scan(*sub);
    }
  };
  scan(*g.block());
  if (!free_dead_values) return;
  // The last top-level step reading each top-level value; graph outputs are never released.
  BlockPlan& top = *blocks_.at(g.block());
  std::unordered_map<const Node*, size_t> step_of;  // any node → its enclosing top-level step
  std::function<void(const Block&, size_t)> walk = [&](const Block& b, size_t k) {
    for (Node* n : b.nodes()) {
      step_of[n] = k;
      for (Block* sub : n->blocks()) walk(*sub, k);
    }
  };
  for (size_t k = 0; k < top.steps.size(); ++k) {
    step_of[top.steps[k].node] = k;
    for (Block* sub : top.steps[k].node->blocks()) walk(*sub, k);
  }
  std::unordered_set<const Value*> outputs(g.outputs().begin(), g.outputs().end());
  auto consider = [&](const Value* v) {
    if (outputs.count(v)) return;
    size_t last = 0;
    bool any = false;
    for (const ir::Use& u : v->uses()) {
      auto it = step_of.find(u.user);
      if (it == step_of.end()) return;  // read by a block's Return: keep
      last = any ? std::max(last, it->second) : it->second;
      any = true;
    }
    if (any) top.steps[last].dead.push_back(slot.at(v));
  };
  for (const Value* v : g.inputs()) consider(v);
  for (Node* n : g.block()->nodes())
    for (const Value* v : n->outputs()) consider(v);
  top.releases.assign(size_t(num_slots_), 0);
  for (const Step& s : top.steps)
    for (int d : s.dead) top.releases[size_t(d)] = -1;  // marked; counted below
  for (const Step& s : top.steps)
    for (int r : s.reads)
      if (top.releases[size_t(r)] != 0) top.releases[size_t(r)] = std::max(top.releases[size_t(r)], 0) + 1;
}

Plan::~Plan() = default;

const Plan::BlockPlan& Plan::block_plan(const ir::Block& b) const { return *blocks_.at(&b); }

const std::vector<InputReads>& Plan::input_reads() const {
  std::call_once(reads_once_, [&] { reads_ = std::make_unique<std::vector<InputReads>>(interp::input_reads(*this)); });
  return *reads_;
}

}  // namespace kiln::interp
