// Scatters that write into their base: slice_scatter / select_scatter taking the base over (eager),
// the interpreter handing a scatter its base at the base's last use (interp, script, compile), and
// everything that must still copy: a tensor someone else holds (the caller, a view, a constant),
// and writes autograd records.
#include "eager/slice_scatter.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::values;

namespace {
const void* address(const Tensor& t) { return t.raw_data(); }

// Rows i of an [n, m] tensor set to x[i] * 2 one by one, as a scripted loop writes them.
const char* kFill = R"(
import torch
from torch import Tensor


def fill(x: Tensor) -> Tensor:
    out = torch.zeros(x.shape[0], x.shape[1])
    for i in range(x.shape[0]):
        out[i] = x[i] * 2.0
        out[i, 1:3] = -1.0
    return out
)";
}  // namespace

TEST_CASE("scatter takeover: a base held by one handle is written in place, a shared one is copied") {
  Tensor b = zeros({3, 4});
  const void* p = address(b);
  Tensor r = select_scatter(std::move(b), ones({4}), 0, 1);
  CHECK(address(r) == p);
  r = slice_scatter(std::move(r), full({3, 1}, 5.0), 1, 2, 3);
  CHECK(address(r) == p);
  CHECK(values(r) == std::vector<double>{0, 0, 5, 0, 1, 1, 5, 1, 0, 0, 5, 0});

  // Another handle, a view, borrowed memory: the holder keeps its values, the result is new memory.
  Tensor held = zeros({3, 4}), other = held;
  Tensor r2 = select_scatter(std::move(held), ones({4}), 0, -1);
  CHECK(address(r2) != address(other));
  CHECK(values(other.sum()) == std::vector<double>{0});
  Tensor base = zeros({3, 4});
  Tensor row = base[0];
  Tensor r3 = slice_scatter(std::move(base), ones({3, 2}), 1, 0, 2);
  CHECK(address(r3) != address(row));
  CHECK(values(row) == std::vector<double>{0, 0, 0, 0});
  std::vector<float> mem(12, 0.0f);
  Tensor borrowed = Tensor::from_blob(mem.data(), {3, 4}, DType::Float32);
  Tensor r4 = select_scatter(std::move(borrowed), ones({4}), 0, 0);
  CHECK(mem[0] == 0.0f);
  CHECK(values(r4.sum()) == std::vector<double>{4});
  // An expanded base has one address for several elements: copied, as the functional form writes it.
  Tensor r5 = select_scatter(zeros({1, 4}).expand({3, 4}), ones({4}), 0, 0);
  CHECK(values(r5.sum()) == std::vector<double>{4});
}

TEST_CASE("scatter takeover: a write autograd records keeps the functional form") {
  Tensor v = ones({4}).requires_grad_(true);
  Tensor b = zeros({3, 4});
  const void* p = address(b);
  Tensor r = select_scatter(std::move(b), v * 2.0, 0, 1);
  CHECK(address(r) != p);
  REQUIRE(r.requires_grad());
  (r * r).sum().backward();
  CHECK(values(v.grad()) == std::vector<double>{8, 8, 8, 8});
  // A base saved for another op's backward (mul saves it for w's gradient) is not written either.
  Tensor w = full({3, 4}, 3.0).requires_grad_(true);
  Tensor base = ones({3, 4});
  Tensor h = w * base;
  Tensor r2 = select_scatter(std::move(base), zeros({4}), 0, 0);
  h.sum().backward();
  CHECK(values(w.grad().sum()) == std::vector<double>{12});
  CHECK(values(r2.sum()) == std::vector<double>{8});
  // Under no_grad nothing records: in place again.
  NoGradGuard no_grad;
  Tensor c = zeros({3, 4});
  const void* q = address(c);
  CHECK(address(select_scatter(std::move(c), v, 0, 2)) == q);
}

TEST_CASE("scatter takeover: the interpreter writes into a base at its last use, never into the caller's") {
  auto g = ir::parse_ir(R"(graph(%x : f32[3,4], %v : f32[4]):
  %zero : int = prim::Constant[value=0]()
  %two : int = prim::Constant[value=2]()
  %y : f32[3,4] = prim::select_scatter(%x, %v, %zero, %two)
  return (%y)
)");
  ir::verify(*g);
  // The caller holds x: x keeps its values.
  Tensor x = zeros({3, 4});
  Tensor y = interp::run(*g, {x, ones({4})})[0].to_tensor();
  CHECK(values(x.sum()) == std::vector<double>{0});
  CHECK(values(y.sum()) == std::vector<double>{4});
  CHECK(address(y) != address(x));
  // Handed over (moved in, no other handle): x's memory becomes y's.
  interp::Plan plan(*g);
  Tensor z = zeros({3, 4});
  const void* p = address(z);
  std::vector<IValue> ins{std::move(z), ones({4})};
  Tensor y2 = interp::run(plan, std::move(ins))[0].to_tensor();
  CHECK(address(y2) == p);
  CHECK(values(y2.sum()) == std::vector<double>{4});
  // Through Function::call and compile(): the caller's x keeps its values, each call.
  Function fn(std::shared_ptr<ir::Graph>(ir::parse_ir(g->str())), "f");
  NoGradGuard no_grad;
  Function c = compile(fn);
  for (const Function* f : {&fn, &c, &c}) {
    Tensor out = f->call({x, ones({4})})[0].to_tensor();
    CHECK(values(x.sum()) == std::vector<double>{0});
    CHECK(values(out.sum()) == std::vector<double>{4});
  }

  // Read after the write (the base is returned too): copied, the base keeps its old values.
  auto g2 = ir::parse_ir(R"(graph(%v : f32[4]):
  %zero : int = prim::Constant[value=0]()
  %three : int = prim::Constant[value=3]()
  %four : int = prim::Constant[value=4]()
  %fill : float = prim::Constant[value=0.0]()
  %shape : List[int] = prim::ListConstruct(%three, %four)
  %base : f32[3,4] = prim::full(%shape, %fill)
  %y : f32[3,4] = prim::select_scatter(%base, %v, %zero, %zero)
  %s : f32[] = sum[dims=[0, 1], keepdim=false](%base)
  return (%y, %s)
)");
  auto r = interp::run(*g2, {ones({4})});
  CHECK(values(r[0].to_tensor().sum()) == std::vector<double>{4});
  CHECK(values(r[1].to_tensor()) == std::vector<double>{0});
}

TEST_CASE("scatter takeover: a scripted loop filling rows writes in place, interpreted and compiled") {
  Function f = script_source(kFill, "t.py").function("fill");
  Tensor x = randn({256, 64});
  Tensor want = x * 2.0;
  want.slice(1, 1, 3).fill_(-1.0);
  const int64_t bytes = 256 * 64 * 4;
  auto peak_of = [&](const Function& fn) {
    Tensor r;
    int64_t before = memory_stats().current_bytes;
    reset_peak_memory_stats();
    r = fn.call({x})[0].to_tensor();
    int64_t peak = memory_stats().peak_bytes - before;
    check_close(r, want);
    return peak;
  };
  // A copy per write would hold two [256, 64] tensors at once; in place, one and a row.
  CHECK(peak_of(f) < bytes * 3 / 2);
  // With inter-op threads the loop body's independent steps may run at once: the scatter still waits
  // for every reader of what it drops.
  int saved = get_num_interop_threads();
  set_num_interop_threads(2);
  CHECK(peak_of(f) < bytes * 3 / 2);
  set_num_interop_threads(saved);
  NoGradGuard no_grad;
  Function c = compile(f);
  CHECK(peak_of(c) < bytes * 3 / 2);
  CHECK(peak_of(c) < bytes * 3 / 2);  // a cached call too
}
