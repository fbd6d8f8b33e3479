// The flow network, per forward value v (constants excluded: both graphs may copy them):
//   v_in → v_out  capacity = v's bytes (0 for a primal: the caller holds it anyway)
//   u_out → v_in  ∞ for each input u of v's node
//   source → v_in ∞ for primals, for the outputs of ops the forward runs anyway and that are not
//                  cheap to recompute, and for values compared with eq/ne (banned from recomputation)
//   v_out → sink  ∞ when a backward node reads v
// A cut edge v_in → v_out is a saved value; everything the backward needs beyond the saved values is
// recomputed from them (a value on the sink side has all its inputs on the sink side).
#include "jit/min_cut_partition.h"

#include <algorithm>
#include <deque>
#include <functional>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "eager/autograd/derivatives.h"
#include "jit/ir_utils.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

// Dinic's maximum flow; small graphs (a node per value), so adjacency lists of edge indices.
class FlowNetwork {
 public:
  explicit FlowNetwork(int n) : adj_(size_t(n)), level_(size_t(n)), it_(size_t(n)) {}
  void add_edge(int u, int v, int64_t cap) {
    adj_[size_t(u)].push_back(int(edges_.size()));
    edges_.push_back({v, cap});
    adj_[size_t(v)].push_back(int(edges_.size()));
    edges_.push_back({u, 0});
  }
  int64_t max_flow(int s, int t) {
    int64_t flow = 0;
    while (bfs(s, t)) {
      std::fill(it_.begin(), it_.end(), 0);
      while (int64_t f = dfs(s, t, kInf)) flow += f;
    }
    return flow;
  }
  // After max_flow: the vertices that cannot reach t in the residual graph, the source side of the min
  // cut nearest the sink. Of cuts that cost the same it saves the latest values (a matmul's result
  // after its bias add rather than before), which leaves the forward's epilogues whole to fuse.
  std::vector<bool> source_side(int t) const {
    std::vector<bool> reaches_t(adj_.size(), false);
    std::deque<int> q{t};
    reaches_t[size_t(t)] = true;
    while (!q.empty()) {
      int x = q.front();
      q.pop_front();
      // adj_[x] holds x's edges x -> y; each one's pair (e ^ 1) is y -> x, usable while it has capacity left.
      for (int e : adj_[size_t(x)]) {
        int y = edges_[size_t(e)].to;
        if (edges_[size_t(e ^ 1)].cap > 0 && !reaches_t[size_t(y)]) {
          reaches_t[size_t(y)] = true;
          q.push_back(y);
        }
      }
    }
    reaches_t.flip();
    return reaches_t;
  }

 private:
  struct E {
    int to;
    int64_t cap;
  };
  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::deque<int> q{s};
    level_[size_t(s)] = 0;
    while (!q.empty()) {
      int u = q.front();
      q.pop_front();
      for (int e : adj_[size_t(u)])
        if (edges_[size_t(e)].cap > 0 && level_[size_t(edges_[size_t(e)].to)] < 0) {
          level_[size_t(edges_[size_t(e)].to)] = level_[size_t(u)] + 1;
          q.push_back(edges_[size_t(e)].to);
        }
    }
    return level_[size_t(t)] >= 0;
  }
  int64_t dfs(int u, int t, int64_t f) {
    if (u == t) return f;
    for (int& i = it_[size_t(u)]; i < int(adj_[size_t(u)].size()); ++i) {
      E& e = edges_[size_t(adj_[size_t(u)][size_t(i)])];
      if (e.cap <= 0 || level_[size_t(e.to)] != level_[size_t(u)] + 1) continue;
      if (int64_t got = dfs(e.to, t, std::min(f, e.cap))) {
        e.cap -= got;
        edges_[size_t(adj_[size_t(u)][size_t(i)] ^ 1)].cap += got;
        return got;
      }
    }
    return 0;
  }
  std::vector<E> edges_;
  std::vector<std::vector<int>> adj_;
  std::vector<int> level_, it_;
};

int64_t bytes_of(const ir::Value* v) {
  const ir::Type& t = v->type();
  if (!t.is_tensor() || !t.dtype || !t.has_static_shape()) return 0;
  int64_t n = 1;
  for (int64_t d : t.static_shape()) n *= d;
  return n * int64_t(itemsize(*t.dtype));
}

// Cheap enough to run twice (core/op_facts.def): elementwise ops, views and copies (memory-bound, and fusible), and amax/
// amin, which eager's own formulas run again and which give the same bits in any order.
bool recomputable(const ir::Node& n) { return n.is_op() && op_facts(n.op()).cost != OpCost::Saved; }

// Read by eq/ne (amax's and maximum's formulas find the winners with x == max): a recomputation one
// ulp off (another kernel, another fusion) would match nothing, so such values are never recomputed.
// An amax/amin itself may be: recomputed from the same saved input it gives the same bits.
bool compared_for_equality(const ir::Value* v) {
  if (v->node()->is_op(OpId::Amax) || v->node()->is_op(OpId::Amin)) return false;
  for (const ir::Use& u : v->uses())
    if (u.user->is_op(OpId::Eq) || u.user->is_op(OpId::Ne)) return true;
  return false;
}

// A copy of j's graph with tangents (and, for the backward, saved values) as inputs.
struct Copy {
  std::shared_ptr<ir::Graph> g = std::make_shared<ir::Graph>();
  std::unordered_map<const ir::Value*, ir::Value*> env;
};
Copy copy_joint(const ir::Graph& jg) {
  Copy c;
  for (const ir::Value* v : jg.inputs()) c.env[v] = c.g->add_input(v->type(), v->name());
  c.g->block()->clone_from(*jg.block(), c.env);
  return c;
}

// The backward's copy of a forward draw (prim::rand_like, never recomputed, so what the backward reads of
// it is saved) has lost its readers; dead-code elimination keeps it, as it keeps every impure node, and
// it would draw again.
void drop_unread_draws(ir::Graph& g) {
  eliminate_dead_code(g);
  std::vector<ir::Node*> draws;
  for (ir::Node* n : g.block()->nodes())
    if (ir::prim_effect(n->prim()) == ir::Effect::Draws && !n->output()->has_uses()) draws.push_back(n);
  for (ir::Node* n : draws) n->destroy();
}

// Drops the graph inputs in [first, last) once dead code is gone; each must be unused by then.
void erase_inputs(ir::Graph& g, size_t first, size_t last) {
  eliminate_dead_code(g);
  for (size_t i = last; i-- > first;) g.block()->erase_input(i);
}

// The backward as autograd's engine runs it: a node no tangent reaches (a recomputation, or arithmetic on
// saved values alone) runs just before the first node that reads it, not at the top where the copy of the
// joint graph leaves it (torch's partitioner reorders its backward the same way). At the top, every
// recomputed value and every forward input it reads is held from the backward's start: a GPT's layer
// norms for every block at once, and with them every FSDP unit (gathered at a graph's first read).
void run_recomputations_late(ir::Graph& g, size_t num_tangents) {
  ir::Block& b = *g.block();
  std::unordered_set<const ir::Value*> reached;
  for (size_t i = g.inputs().size() - num_tangents; i < g.inputs().size(); ++i) reached.insert(g.inputs()[i]);
  std::vector<ir::Node*> nodes;
  for (ir::Node* n : b.nodes()) nodes.push_back(n);
  std::unordered_set<const ir::Node*> waiting;  // nodes that go just before their first reader
  for (ir::Node* n : nodes) {
    bool tangent = false;
    for (const ir::Value* in : n->inputs()) tangent |= reached.count(in) > 0;
    if (tangent) {
      for (const ir::Value* o : n->outputs()) reached.insert(o);
    } else if (n->blocks().empty() && is_pure(*n)) {
      waiting.insert(n);
    }
  }
  std::vector<ir::Node*> order;
  std::function<void(ir::Node*)> place = [&](ir::Node* n) {
    std::vector<ir::Value*> reads(n->inputs().begin(), n->inputs().end());
    for (ir::Block* inner : n->blocks())
      for_each_node(*inner, [&](ir::Node* m) { reads.insert(reads.end(), m->inputs().begin(), m->inputs().end()); });
    for (ir::Value* in : reads)
      if (waiting.erase(in->node())) place(in->node());
    order.push_back(n);
  };
  std::unordered_set<const ir::Node*> sinks(waiting.begin(), waiting.end());
  for (ir::Node* n : nodes)
    if (!sinks.count(n)) place(n);
  for (ir::Node* n : nodes)  // what only the graph's outputs read
    if (waiting.erase(n)) place(n);
  for (ir::Node* n : order) n->move_before(b.return_node());
}

}  // namespace

Partition partition_min_cut(const JointGraph& j, bool recompute_late) {
  const ir::Graph& jg = *j.graph;
  const size_t np = j.num_primals, nt = jg.inputs().size() - np;
  // Which values depend on a tangent (backward) and which on a primal that requires grad.
  std::unordered_set<const ir::Value*> bwd, grad_dep;
  for (size_t i = np; i < jg.inputs().size(); ++i) bwd.insert(jg.inputs()[i]);
  for (size_t p : j.grad_of) grad_dep.insert(jg.inputs()[p]);
  std::vector<const ir::Node*> nodes;
  for (const ir::Node* n : jg.block()->nodes()) {
    nodes.push_back(n);
    bool b = false, d = false;
    for (const ir::Value* in : n->inputs()) b |= bwd.count(in) > 0, d |= grad_dep.count(in) > 0;
    for (const ir::Value* o : n->outputs()) {
      if (b) bwd.insert(o);
      if (d) grad_dep.insert(o);
    }
  }
  // Forward nodes the forward outputs need: the forward runs them whatever the cut.
  std::unordered_set<const ir::Node*> fwd_needed;
  std::vector<const ir::Value*> stack(jg.outputs().begin(), jg.outputs().begin() + long(j.num_forward_outputs));
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    const ir::Node* n = v->node();
    if (n->prim() == ir::Prim::Param || bwd.count(v) || !fwd_needed.insert(n).second) continue;
    for (const ir::Value* in : n->inputs()) stack.push_back(in);
  }
  auto is_primal = [&](const ir::Value* v) { return v->node()->prim() == ir::Prim::Param; };
  // An activation (a unary Math op: gelu, silu, tanh) that a forward GEMM reads is in memory anyway; run again
  // for the backward it repeats a transcendental pass over the whole tensor (the GPT's gelu: as long as its
  // forward kernel), where keeping it costs its bytes only, as eager keeps it.
  auto gemm_read_activation = [&](const ir::Value* v) {
    const ir::Node* n = v->node();
    if (!n->is_op() || op_info(n->op()).kind != OpKind::Unary || op_facts(n->op()).cost != OpCost::Math) return false;
    for (const ir::Use& u : v->uses())
      if (u.user->is_op(OpId::Matmul) && !bwd.count(u.user->output(0))) return true;
    return false;
  };
  // A parameter narrowed by a cast that a forward GEMM or conv reads (autocast's bf16 weights) is kept too, as
  // eager keeps it: run again, the backward repeats a pass over the float32 parameter for half its bytes
  // saved (ResNet-18 under bf16 autocast: ~4 ms a training step, most of it layer4's 512-channel 3x3s).
  auto gemm_read_cast = [&](const ir::Value* v) {
    const ir::Node* n = v->node();
    if (!n->is_op(OpId::Cast) || !is_primal(n->input()) || bytes_of(v) >= bytes_of(n->input())) return false;
    for (const ir::Use& u : v->uses())
      if ((u.user->is_op(OpId::Matmul) || u.user->is_op(OpId::Conv2d)) && !bwd.count(u.user->output(0))) return true;
    return false;
  };
  // Number the forward values that take part.
  std::unordered_map<const ir::Value*, int> id;
  std::vector<const ir::Value*> values;
  auto number = [&](const ir::Value* v) {
    if (bwd.count(v) || is_constant(v) || id.count(v)) return;
    id[v] = int(values.size());
    values.push_back(v);
  };
  for (size_t i = 0; i < np; ++i) number(jg.inputs()[i]);
  for (const ir::Node* n : nodes)
    for (const ir::Value* o : n->outputs()) number(o);
  const int source = 0, sink = 1;
  auto vin = [&](const ir::Value* v) { return 2 + 2 * id.at(v); };
  FlowNetwork net(2 + 2 * int(values.size()));
  for (const ir::Value* v : values) {
    const ir::Node* n = v->node();
    net.add_edge(vin(v), vin(v) + 1, is_primal(v) ? 0 : bytes_of(v));
    if (is_primal(v) || (fwd_needed.count(n) && (!recomputable(*n) || gemm_read_activation(v) || gemm_read_cast(v))) || compared_for_equality(v))
      net.add_edge(source, vin(v), kInf);
    if (!is_primal(v))
      for (const ir::Value* u : n->inputs())
        if (id.count(u)) net.add_edge(vin(u) + 1, vin(v), kInf);
  }
  auto backward_reads = [&](const ir::Value* v) {
    for (const ir::Use& u : v->uses())
      if (u.user->prim() == ir::Prim::Return ? u.index >= j.num_forward_outputs : bwd.count(u.user->output(0)) > 0)
        return true;
    return false;
  };
  for (const ir::Value* v : values)
    if (backward_reads(v)) net.add_edge(vin(v) + 1, sink, kInf);
  net.max_flow(source, sink);
  std::vector<bool> s_side = net.source_side(sink);

  // The cut values the backward reaches (a primal's edge is free, so unread primals are cut too), and
  // the forward ops between them and what the backward reads, which it runs again.
  std::unordered_set<const ir::Value*> cut, reached;
  for (const ir::Value* v : values)
    if (s_side[size_t(vin(v))] && !s_side[size_t(vin(v) + 1)]) cut.insert(v);
  std::unordered_set<const ir::Node*> recompute;
  for (const ir::Value* v : values)
    if (backward_reads(v)) stack.push_back(v);
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    if (cut.count(v)) {
      reached.insert(v);
      continue;
    }
    if (is_constant(v) || !recompute.insert(v->node()).second) continue;
    for (const ir::Value* in : v->node()->inputs()) stack.push_back(in);
  }
  Partition p;
  p.recomputed_nodes = int64_t(recompute.size());
  std::vector<const ir::Value*> saved;
  for (const ir::Value* v : values)
    if (reached.count(v)) saved.push_back(v);
  // What eager keeps: the inputs each recorded op's formula reads, for ops on the gradient's path.
  std::unordered_set<const ir::Value*> eager;
  for (const ir::Node* n : fwd_needed) {
    if (!n->is_op() || !is_differentiable(n->op())) continue;
    bool on_path = false;
    for (const ir::Value* in : n->inputs()) on_path |= grad_dep.count(in) > 0;
    if (!on_path) continue;
    for (size_t i = 0; i < n->inputs().size(); ++i)
      if (derivative_reads_input(n->op(), i) && id.count(n->input(i)) && !is_primal(n->input(i)))
        eager.insert(n->input(i));
    for (size_t k = 0; k < n->outputs().size(); ++k)
      if (op_facts(n->op()).derivative_reads_output(k) && id.count(n->output(k))) eager.insert(n->output(k));
  }
  for (const ir::Value* v : eager) p.eager_saved_bytes += bytes_of(v);

  // Forward: the joint graph returning its forward outputs and the saved values; the rest is dead.
  Copy f = copy_joint(jg);
  for (size_t k = 0; k < j.num_forward_outputs; ++k) f.g->register_output(f.env.at(jg.outputs()[k]));
  for (const ir::Value* v : saved) {
    f.g->register_output(f.env.at(v));
    p.saved_is_primal.push_back(is_primal(v));
    if (!is_primal(v)) p.saved_bytes += bytes_of(v);
  }
  erase_inputs(*f.g, np, np + nt);
  p.forward = f.g;
  p.num_saved = saved.size();

  // Backward: the joint graph with saved values as inputs; the forward ops left are recomputations.
  Copy b = copy_joint(jg);
  std::vector<ir::Value*> saved_in;
  for (const ir::Value* v : saved) saved_in.push_back(b.g->add_input(v->type(), v->name()));
  for (size_t k = j.num_forward_outputs; k < jg.outputs().size(); ++k) b.g->register_output(b.env.at(jg.outputs()[k]));
  for (size_t i = 0; i < nt; ++i) {  // tangents after the saved values
    ir::Value* t = b.g->add_input(jg.inputs()[np + i]->type(), jg.inputs()[np + i]->name());
    b.env.at(jg.inputs()[np + i])->replace_all_uses_with(t);
  }
  for (size_t s = 0; s < saved.size(); ++s) b.env.at(saved[s])->replace_all_uses_with(saved_in[s]);
  drop_unread_draws(*b.g);
  erase_inputs(*b.g, 0, np + nt);
  if (recompute_late) run_recomputations_late(*b.g, nt);
  p.backward = b.g;
  return p;
}

}  // namespace kiln::jit
