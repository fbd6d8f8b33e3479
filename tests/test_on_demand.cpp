// Memory filled on demand (eager/on_demand.h): the interpreter asks an input's owner for it just before
// the first step reading the input or a view of it, and hands it back after the last, unless the graph
// returns a view of it.
#include <cstring>

#include "backends/interp/interpreter.h"
#include "core/allocator.h"
#include "core/storage.h"
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

namespace {

// Fills a tensor's memory on acquire and releases it after a run's last read, as FSDP does with a unit.
struct Refiller : OnDemandOwner {
  Tensor t, values;
  int fills = 0;
  void acquire(size_t) override {
    Storage& s = *t.storage();
    if (s.data) return;
    s.data = cpu_allocator::allocate(s.nbytes, s.charged);
    std::memcpy(s.data, values.raw_data(), s.nbytes);
    ++fills;
  }
  void used(size_t, const std::vector<Tensor>&, bool last) override {
    Storage& s = *t.storage();
    if (!last || !s.data) return;
    cpu_allocator::release(s.data, s.nbytes, s.charged);
    s.data = nullptr;
  }
};

// Runs another graph over w where the outer graph's neg is, then lets the interpreter run the neg.
struct NestedRun : interp::NodeRunner {
  const interp::Plan* inner = nullptr;
  Tensor w, inner_result;
  bool run(const ir::Node& n, const std::vector<IValue>&, std::vector<IValue>&) override {
    if (n.is_op(OpId::Neg)) inner_result = interp::run(*inner, {w}).at(0).to_tensor();
    return false;
  }
};

}  // namespace

TEST_CASE("on demand: a run nested in another over the same memory hands it back, and the outer run acquires it again") {
  auto outer = ir::parse_ir(R"(graph(%x : f32[3], %w : f32[3]):
  %a : f32[3] = mul(%x, %w)
  %b : f32[3] = neg(%a)
  %c : f32[3] = mul(%b, %w)
  return (%c)
)");
  auto inner = ir::parse_ir(R"(graph(%w : f32[3]):
  %s : f32[3] = add(%w, %w)
  return (%s)
)");
  interp::Plan outer_plan(*outer), inner_plan(*inner);
  auto owner = std::make_shared<Refiller>();
  owner->values = tensor({1.0, 2.0, 3.0});
  owner->t = owner->values.clone();
  set_on_demand(owner->t.storage().get(), owner, 1);
  owner->used(1, {}, true);  // released, as between steps
  NestedRun nested;
  nested.inner = &inner_plan;
  nested.w = owner->t;
  // the inner run's last read releases w in the middle of the outer run, which reads it once more
  Tensor c = interp::run(outer_plan, {full({3}, 2.0), owner->t}, &nested).at(0).to_tensor();
  CHECK(values(c) == std::vector<double>{-2, -8, -18});
  CHECK(values(nested.inner_result) == std::vector<double>{2, 4, 6});
  CHECK(owner->fills == 2);
  CHECK(owner->t.storage()->data == nullptr);  // handed back after the outer run's last read
  set_on_demand(owner->t.storage().get(), {}, 1);
}
