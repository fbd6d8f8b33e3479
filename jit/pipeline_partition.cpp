#include "jit/pipeline_partition.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include "core/dtype.h"
#include "eager/profiler/flops.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

int64_t bytes_of(const ir::Value* v) {
  const ir::Type& t = v->type();
  if (!t.is_tensor() || !t.dtype || !t.has_static_shape()) return 0;
  Shape s = t.static_shape();
  return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<>()) * int64_t(itemsize(*t.dtype));
}

int64_t node_flops(const ir::Node* n) {
  if (!n->is_op()) return 0;
  std::vector<Shape> in, out;
  for (const ir::Value* v : n->inputs()) {
    if (!v->type().is_tensor() || !v->type().has_static_shape()) return 0;
    in.push_back(v->type().static_shape());
  }
  for (const ir::Value* v : n->outputs()) {
    if (!v->type().is_tensor() || !v->type().has_static_shape()) return 0;
    out.push_back(v->type().static_shape());
  }
  return op_flops(n->op(), in, n->attrs(), out);
}

// The top-level node a use belongs to (a use inside a loop or if body counts as its owning node's).
const ir::Node* top_level(const ir::Node* n, const ir::Block* top) {
  while (n->owning_block() != top) n = n->owning_block()->owning_node();
  return n;
}

// What the partition needs of a graph: its top-level nodes in order, their costs, and for each value that
// can cross a cut, where it is defined and last read (in top-level node positions).
struct Layout {
  std::vector<const ir::Node*> nodes;
  std::vector<int64_t> flops;             // per node
  std::vector<int64_t> prefix;            // flops of nodes [0, i)
  struct Crossing {
    const ir::Value* value;
    int64_t def;   // the defining node's position; -1 for the caller's inputs
    int64_t last;  // the last reading node's position; nodes.size() for a graph output
    int64_t bytes;
  };
  std::vector<Crossing> values;  // in definition order
  size_t num_inputs = 0;         // the caller's (unbound) inputs

  // bytes of the values crossing the cut before node position p
  int64_t cut_bytes(size_t p) const {
    int64_t b = 0;
    for (const Crossing& c : values)
      if (c.def < int64_t(p) && c.last >= int64_t(p)) b += c.bytes;
    return b;
  }
};

// Per graph output: whether it is the new value of an input the forward writes in place (Binding::writebacks).
std::vector<bool> written_back_outputs(const Function& fn) {
  std::vector<bool> w(fn.graph().outputs().size(), false);
  for (auto [in, o] : fn.binding().writebacks) w[o] = true;
  return w;
}

Layout layout_of(const Function& fn, int64_t num_bound) {
  const ir::Graph& g = fn.graph();
  const ir::Block* top = g.block();
  Layout L;
  size_t bound = num_bound >= 0 ? size_t(num_bound) : fn.binding().bound.size();
  if (bound > g.inputs().size())
    fail("pipeline partition: {} bound parameters, but the graph has {} inputs", bound, g.inputs().size());
  L.num_inputs = g.inputs().size() - bound;
  std::unordered_map<const ir::Node*, int64_t> pos;
  for (const ir::Node* n : top->nodes()) {
    pos[n] = int64_t(L.nodes.size());
    L.nodes.push_back(n);
    int64_t f = node_flops(n);
    for (const ir::Block* b : n->blocks())
      for (const ir::Node* m : b->nodes()) f += node_flops(m);
    L.flops.push_back(f);
  }
  L.prefix.assign(L.nodes.size() + 1, 0);
  for (size_t i = 0; i < L.nodes.size(); ++i) L.prefix[i + 1] = L.prefix[i] + L.flops[i];
  // a value written back into a bound tensor is the stage's own business: it crosses no cut for that
  std::unordered_set<const ir::Value*> outputs;
  const std::vector<bool> written_back = written_back_outputs(fn);
  for (size_t o = 0; o < g.outputs().size(); ++o)
    if (!written_back[o]) outputs.insert(g.outputs()[o]);
  auto add = [&](const ir::Value* v, int64_t def) {
    int64_t last = outputs.count(v) ? int64_t(L.nodes.size()) : def;
    for (const ir::Use& u : v->uses())
      if (u.user->owning_block() != top || u.user != top->return_node()) {
        const ir::Node* t = top_level(u.user, top);
        if (t != top->return_node()) last = std::max(last, pos.at(t));
      }
    L.values.push_back({v, def, last, bytes_of(v)});
  };
  for (size_t i = 0; i < L.num_inputs; ++i) add(g.inputs()[i], -1);
  for (size_t i = 0; i < L.nodes.size(); ++i) {
    const ir::Node* n = L.nodes[i];
    if (n->prim() == ir::Prim::Constant) continue;  // copied into each stage that reads it
    for (const ir::Value* v : n->outputs()) add(v, int64_t(i));
  }
  return L;
}

PipelinePartition facts(const Layout& L, std::vector<size_t> starts) {
  PipelinePartition p;
  p.starts = std::move(starts);
  for (size_t s = 0; s < p.starts.size(); ++s) {
    size_t end = s + 1 < p.starts.size() ? p.starts[s + 1] : L.nodes.size();
    p.stage_flops.push_back(L.prefix[end] - L.prefix[p.starts[s]]);
    if (s > 0) p.cut_bytes.push_back(L.cut_bytes(p.starts[s]));
  }
  return p;
}

}  // namespace

int64_t PipelinePartition::max_flops() const { return *std::max_element(stage_flops.begin(), stage_flops.end()); }
int64_t PipelinePartition::total_cut_bytes() const { return std::accumulate(cut_bytes.begin(), cut_bytes.end(), int64_t(0)); }

PipelinePartition partition_for_pipeline(const Function& fn, int stages, PipelinePartitionOptions o) {
  Layout L = layout_of(fn, o.num_bound);
  size_t n = L.nodes.size();
  if (stages < 1) fail("pipeline partition: {} stages; at least 1", stages);
  if (size_t(stages) > n) fail("pipeline partition: {} stages for a graph of {} nodes; each stage needs one", stages, n);
  if (o.slack < 0) fail("pipeline partition: slack {} is negative", o.slack);
  auto cost = [&](size_t a, size_t b) { return L.prefix[b] - L.prefix[a]; };
  // The best balance: best[s][j] = the smallest largest-stage cost of nodes [0, j) in s stages.
  std::vector<std::vector<int64_t>> best(size_t(stages) + 1, std::vector<int64_t>(n + 1, kInf));
  best[0][0] = 0;
  for (size_t s = 1; s <= size_t(stages); ++s)
    for (size_t j = s; j <= n; ++j)
      for (size_t i = s - 1; i < j; ++i)
        if (best[s - 1][i] < kInf) best[s][j] = std::min(best[s][j], std::max(best[s - 1][i], cost(i, j)));
  int64_t bound = int64_t(double(best[size_t(stages)][n]) * (1.0 + o.slack));
  // Within that bound, the fewest crossing bytes: bytes[s][j] for nodes [0, j) in s stages, a cut at each
  // stage's start but the first.
  std::vector<int64_t> cut(n + 1, 0);
  for (size_t j = 1; j < n; ++j) cut[j] = L.cut_bytes(j);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> bytes(size_t(stages) + 1,
                                                              std::vector<std::pair<int64_t, int64_t>>(n + 1, {kInf, kInf}));
  std::vector<std::vector<size_t>> from(size_t(stages) + 1, std::vector<size_t>(n + 1, 0));
  bytes[0][0] = {0, 0};
  for (size_t s = 1; s <= size_t(stages); ++s)
    for (size_t j = s; j <= n; ++j)
      for (size_t i = s - 1; i < j; ++i) {
        if (bytes[s - 1][i].first >= kInf || cost(i, j) > bound) continue;
        std::pair<int64_t, int64_t> c{bytes[s - 1][i].first + (s > 1 ? cut[i] : 0), std::max(bytes[s - 1][i].second, cost(i, j))};
        if (c < bytes[s][j]) {
          bytes[s][j] = c;
          from[s][j] = i;
        }
      }
  std::vector<size_t> starts(static_cast<size_t>(stages), 0);
  for (size_t s = size_t(stages), j = n; s > 0; --s) {
    starts[s - 1] = from[s][j];
    j = from[s][j];
  }
  return facts(L, std::move(starts));
}

PipelinePartition evaluate_pipeline_plan(const Function& fn, std::vector<size_t> starts, int64_t num_bound) {
  Layout L = layout_of(fn, num_bound);
  if (starts.empty() || starts[0] != 0) fail("pipeline plan: the first stage must start at node 0");
  for (size_t s = 1; s < starts.size(); ++s)
    if (starts[s] <= starts[s - 1] || starts[s] >= L.nodes.size())
      fail("pipeline plan: stage {} starts at node {}, after stage {}'s start {} and before the graph's {} nodes "
           "expected (every stage needs a node)", s, starts[s], s - 1, starts[s - 1], L.nodes.size());
  return facts(L, std::move(starts));
}

std::vector<StageGraph> split_for_pipeline(const Function& fn, const PipelinePartition& plan) {
  Layout L = layout_of(fn, -1);
  const ir::Graph& g = fn.graph();
  size_t stages = plan.starts.size(), n = L.nodes.size(), num_inputs = L.num_inputs;
  auto crossing = [&](size_t p) {  // the values crossing the cut before position p, in definition order
    std::vector<const ir::Value*> vs;
    for (const Layout::Crossing& c : L.values)
      if (c.def < int64_t(p) && c.last >= int64_t(p)) vs.push_back(c.value);
    return vs;
  };
  std::vector<StageGraph> out;
  for (size_t s = 0; s < stages; ++s) {
    size_t end = s + 1 < stages ? plan.starts[s + 1] : n;
    StageGraph sg;
    sg.graph = std::make_shared<ir::Graph>();
    ir::Graph& h = *sg.graph;
    // The whole graph is copied, the stage's received values replace what computes them, and dead-code
    // elimination then drops the nodes of the other stages (the constants this stage reads stay).
    std::vector<const ir::Value*> in = s == 0 ? std::vector<const ir::Value*>(g.inputs().begin(), g.inputs().begin() + long(num_inputs))
                                              : crossing(plan.starts[s]);
    std::unordered_map<const ir::Value*, ir::Value*> env, received;
    std::unordered_map<const ir::Value*, size_t> stands_for;  // a stand-in input: which graph input
    for (const ir::Value* v : in) received[v] = h.add_input(v->type(), v->name());
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      const ir::Value* v = g.inputs()[i];
      if (received.count(v)) {
        env[v] = received[v];
      } else {
        env[v] = h.add_input(v->type(), v->name());
        stands_for[env[v]] = i;
      }
    }
    h.block()->clone_from(*g.block(), env);
    for (auto& [v, r] : received)
      if (env[v] != r) env[v]->replace_all_uses_with(r);
    auto map = [&](const ir::Value* v) { return received.count(v) ? received[v] : env.at(v); };
    const std::vector<bool> written_back = written_back_outputs(fn);
    if (s + 1 < stages) {
      for (const ir::Value* v : crossing(end)) h.register_output(map(v));
    } else {
      for (size_t o = 0; o < g.outputs().size(); ++o)
        if (!written_back[o]) h.register_output(map(g.outputs()[o]));
    }
    // the new values of bound tensors this stage's nodes compute, written back by it
    const size_t first = plan.starts[s];
    for (auto [gi, o] : fn.binding().writebacks) {
      const ir::Value* v = g.outputs()[o];
      const ir::Node* t = v->node()->owning_block() == g.block() ? v->node() : nullptr;
      auto at = t ? std::find(L.nodes.begin(), L.nodes.end(), t) : L.nodes.end();
      const size_t def = at == L.nodes.end() ? size_t(-1) : size_t(at - L.nodes.begin());
      if (def == size_t(-1) && s + 1 < stages) continue;  // an input written back as it is: the last stage's
      if (def != size_t(-1) && (def < first || def >= end)) continue;
      if (gi < num_inputs) fail("pipeline split: the forward writes its input {} in place; only bound tensors may be", gi);
      h.register_output(map(v));
      sg.writebacks.push_back(gi - num_inputs);
    }
    eliminate_dead_code(h);
    // Inputs: the received values, then the parameters it reads; the rest go.
    sg.num_received = in.size();
    for (size_t i = h.inputs().size(); i-- > in.size();) {
      size_t original = stands_for.at(h.inputs()[i]);
      if (!h.inputs()[i]->has_uses()) {
        h.block()->erase_input(i);
      } else if (original < num_inputs) {
        fail("pipeline split: stage {} reads the caller's input {}, which reaches stage 0 only", s, original);
      } else {
        sg.params.push_back(original - num_inputs);
      }
    }
    std::reverse(sg.params.begin(), sg.params.end());
    out.push_back(std::move(sg));
  }
  return out;
}

}  // namespace kiln::jit
