// A report, not a rewrite: the peak memory of the top-level block if each tensor value of static shape
// lives from its definition to its last use and buffers are reused greedily (the smallest free buffer
// that fits) once their value is dead, against one buffer per value. The executor gets that reuse
// without an assignment: it drops each value after its last use (interp::run with free_dead_values) and
// the caching allocator hands the block to the next node of that size.
#include <functional>
#include <map>
#include <unordered_set>
#include <unordered_map>

#include "jit/passes/passes.h"

namespace kiln::jit {

namespace {

int64_t bytes_of(const ir::Value* v) {
  const ir::Type& t = v->type();
  if (!t.is_tensor() || !t.dtype || !t.has_static_shape()) return 0;
  return numel_of(t.static_shape()) * int64_t(itemsize(*t.dtype));
}

}  // namespace

PassResult report_memory(ir::Graph& g) {
  std::vector<ir::Node*> order;
  std::unordered_map<const ir::Node*, size_t> index;
  for (ir::Node* n : g.block()->nodes()) {
    index[n] = order.size();
    order.push_back(n);
  }
  std::unordered_map<const ir::Node*, const ir::Node*> top;  // nested node → its top-level node
  std::function<void(const ir::Block&, const ir::Node*)> walk = [&](const ir::Block& b, const ir::Node* t) {
    for (ir::Node* n : b.nodes()) {
      top[n] = t;
      for (ir::Block* sub : n->blocks()) walk(*sub, t);
    }
  };
  for (ir::Node* n : order) {
    top[n] = n;
    for (ir::Block* sub : n->blocks()) walk(*sub, n);
  }
  std::unordered_set<const ir::Value*> outputs(g.outputs().begin(), g.outputs().end());
  // last use per value (SIZE_MAX: lives to the end)
  std::vector<std::vector<const ir::Value*>> dies_after(order.size());
  int64_t naive = 0;
  for (ir::Node* n : order)
    for (const ir::Value* v : n->outputs()) {
      if (bytes_of(v) == 0) continue;
      naive += bytes_of(v);
      if (outputs.count(v)) continue;
      size_t last = index[n];
      bool to_end = false;
      for (const ir::Use& u : v->uses()) {
        auto it = top.find(u.user);
        if (it == top.end() || !it->second) {
          to_end = true;
          break;
        }
        last = std::max(last, index[it->second]);
      }
      if (!to_end) dies_after[last].push_back(v);
    }
  std::multimap<int64_t, int> free_buffers;  // size → buffer id
  std::vector<int64_t> buffer_size;
  std::unordered_map<const ir::Value*, int> assigned;
  int64_t live = 0, peak = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    for (const ir::Value* v : order[i]->outputs()) {
      int64_t b = bytes_of(v);
      if (b == 0) continue;
      auto it = free_buffers.lower_bound(b);
      if (it != free_buffers.end()) {
        assigned[v] = it->second;
        free_buffers.erase(it);
      } else {
        assigned[v] = int(buffer_size.size());
        buffer_size.push_back(b);
        live += b;
        peak = std::max(peak, live);
      }
    }
    for (const ir::Value* v : dies_after[i]) {
      int id = assigned.at(v);
      free_buffers.emplace(buffer_size[size_t(id)], id);
    }
  }
  return {0, fmt::format("planned peak {} bytes in {} buffers, one buffer per value {} bytes", peak,
                         buffer_size.size(), naive)};
}

}  // namespace kiln::jit
