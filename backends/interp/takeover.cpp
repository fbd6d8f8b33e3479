#include "backends/interp/takeover.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace kiln::interp {

using ir::Node;
using ir::Prim;
using ir::Value;

std::vector<Takeover> takeovers(const ir::Block& b) {
  constexpr long kLive = std::numeric_limits<long>::max();  // read by the block's return
  std::unordered_map<const Node*, long> index;
  long k = 0;
  for (const Node* n : b.nodes()) index[n] = k++;
  // The step of b holding a use: the user itself, or the node whose nested block holds it.
  auto step_of = [&](const Node* u) -> long {
    for (const Node* m = u; m;) {
      const ir::Block* ob = m->owning_block();
      if (ob == &b) {
        auto it = index.find(m);
        return it == index.end() ? kLive : it->second;
      }
      m = ob ? ob->owning_node() : nullptr;
    }
    return kLive;
  };
  // The values of b: where each is defined (-1: an argument) and last read (its definition when
  // never), and whether that last step reads it only as a direct input (not inside its blocks).
  struct Life {
    long def, last;
    bool direct;
  };
  std::vector<const Value*> values;
  std::unordered_map<const Value*, Life> life;
  auto add = [&](const Value* v, long def) {
    Life l{def, def, true};
    for (const ir::Use& u : v->uses()) {
      long s = step_of(u.user);
      if (s > l.last) l = {def, s, true};
      if (s == l.last && u.user->owning_block() != &b) l.direct = false;
    }
    values.push_back(v);
    life[v] = l;
  };
  for (const Value* a : b.inputs()) add(a, -1);
  for (const Node* n : b.nodes())
    for (const Value* v : n->outputs()) add(v, index.at(n));
  auto dies_at = [&](const Value* v, long j) {
    auto it = life.find(v);
    return it != life.end() && it->second.last == j;
  };
  std::vector<Takeover> out;
  long prev = -2;  // the last takeover's step: values dead before it were dropped there
  for (const Node* n : b.nodes()) {
    long j = index.at(n);
    bool takes = false;
    if (n->prim() == Prim::SliceScatter || n->prim() == Prim::SelectScatter) takes = dies_at(n->input(0), j);
    if (n->prim() == Prim::Loop)
      for (size_t i = 2; i < n->inputs().size(); ++i) takes = takes || (n->input(i)->type().is_tensor() && dies_at(n->input(i), j));
    if (!takes) continue;
    Takeover t{size_t(j), {}};
    for (const Value* v : values) {
      const Life& l = life.at(v);
      if (l.def < j && l.last > prev && l.last <= j && (l.last < j || l.direct)) t.dead.push_back(v);
    }
    out.push_back(std::move(t));
    prev = j;
  }
  return out;
}

}  // namespace kiln::interp
