// Memory filled on demand (eager/on_demand.h): the interpreter asks an input's owner for it just before
// the first step reading the input or a view of it, and hands it back after the last, unless the graph
// returns a view of it.
#include "backends/interp/interpreter.h"
#include "core/ir/parser.h"
#include "core/ir/verifier.h"
#include "eager/on_demand.h"
#include "support.h"

using namespace kiln;
using kiln::test::values;

namespace {

struct Recorder : OnDemandOwner {
  std::vector<std::string> events;
  void acquire(size_t key) override { events.push_back(fmt::format("acquire {}", key)); }
  void used(size_t key, const std::vector<Tensor>& outputs, bool last) override {
    events.push_back(fmt::format("{} {} ({} outputs)", last ? "last" : "used", key, outputs.size()));
  }
};

const char* kLinear = R"(graph(%x : f32[2,3], %w : f32[4,3], %b : f32[4]):
  %shape : List[int] = prim::shape(%w)
  %wt : f32[3,4] = permute[dims=[1, 0]](%w)
  %y : f32[2,4] = matmul(%x, %wt)
  %z : f32[2,4] = relu(%y)
  %u : f32[2,4] = add(%z, %b)
  return (%u{})
)";

std::vector<std::string> run_recorded(const std::string& returns, size_t caller_results = SIZE_MAX) {
  auto g = ir::parse_ir(fmt::format(fmt::runtime(kLinear), returns));
  ir::verify(*g);
  Tensor x = ones({2, 3}), w = full({4, 3}, 0.5), b = full({4}, -1.0);
  auto owner = std::make_shared<Recorder>();
  set_on_demand(w.storage().get(), owner, 1);
  set_on_demand(b.storage().get(), owner, 2);
  CHECK(any_on_demand());
  interp::Plan plan(*g);
  auto r = interp::run(plan, {x, w, b}, nullptr, caller_results);
  CHECK(values(r[0].to_tensor()) == std::vector<double>(8, 0.5));
  set_on_demand(w.storage().get(), {}, 1);
  set_on_demand(b.storage().get(), {}, 2);
  CHECK_FALSE(any_on_demand());
  return owner->events;
}

}  // namespace

TEST_CASE("on demand: an input is acquired before the first step reading it (or its view) and handed back after the last") {
  // w is read through its permuted view by the matmul (asking its shape and making the view read no element);
  // b by the add alone
  CHECK(run_recorded("") == std::vector<std::string>{"acquire 1", "last 1 (1 outputs)", "acquire 2", "last 2 (1 outputs)"});
  // a graph returning a view of w never hands w back: the caller may read it
  CHECK(run_recorded(", %wt") == std::vector<std::string>{"acquire 1", "used 1 (1 outputs)", "acquire 2", "last 2 (1 outputs)"});
  // unless that result goes only to another graph run (a training forward's saved values), which acquires it
  CHECK(run_recorded(", %wt", 1) == std::vector<std::string>{"acquire 1", "last 1 (1 outputs)", "acquire 2", "last 2 (1 outputs)"});
}
