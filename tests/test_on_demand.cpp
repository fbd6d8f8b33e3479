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

TEST_CASE("on demand: a compiled backward recomputes what it reads of such memory just before its first reader") {
  // two layers, a unit each: x * w + b recomputed for the matmul's weight gradient (its inputs are free to
  // keep). Recomputed at the backward's top, both units were acquired there and the first held to the end.
  Function f = trace([](const Tensors& in) {
    Tensor y1 = matmul(in[0] * in[1] + in[2], in[3]);
    return Tensors{sum(matmul(y1 * in[4] + in[5], in[6]))};
  }, {randn({4, 8}), randn({8}), randn({8}), randn({8, 8}), randn({8}), randn({8}), randn({8, 8})});
  Function c = compile(f);
  manual_seed(3);
  Tensors in{randn({4, 8})};
  for (int i = 0; i < 2; ++i)
    for (Shape s : {Shape{8}, Shape{8}, Shape{8, 8}}) in.push_back(randn(s).requires_grad_(true));
  c(in).at(0).backward();  // an entry for memory of its own
  auto owner = std::make_shared<Recorder>();
  for (size_t i = 1; i < in.size(); ++i) set_on_demand(in[i].storage().get(), owner, i < 4 ? 1 : 2);
  Tensor loss = c(in).at(0);
  CHECK(compile_stats(c).last_miss_reason == "input 1 now has memory filled on demand");
  owner->events.clear();
  loss.backward();
  std::vector<std::string> backward = owner->events;
  for (size_t i = 1; i < in.size(); ++i) set_on_demand(in[i].storage().get(), {}, 0);
  auto at = [&](const std::string& e) { return std::find(backward.begin(), backward.end(), e) - backward.begin(); };
  auto last = [&](int key) {
    return std::find_if(backward.begin(), backward.end(), [&](const std::string& e) { return e.rfind(fmt::format("last {}", key), 0) == 0; }) - backward.begin();
  };
  std::string seen;
  for (const std::string& e : backward) seen += e + "; ";
  CAPTURE(seen);
  // the second layer's gradients come first: its unit is done with before the first's is acquired
  CHECK(at("acquire 2") == 0);
  CHECK(last(2) < at("acquire 1"));
  CHECK(last(1) < std::ptrdiff_t(backward.size()));
}
