// The two autograd hook points kiln::dist's DistributedDataParallel is built on: a leaf's
// post-accumulate-grad hook (torch's Tensor.register_post_accumulate_grad_hook) and a callback queued
// to run when the backward in progress ends (torch's queue_callback), in eager and compiled backward.
#include "support.h"

#include "samples/digits_models.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

TEST_CASE("grad hooks: a post-accumulate-grad hook sees the accumulated .grad, once per backward") {
  Tensor w = tensor({1.0, 2.0}, {}, DType::Float64).requires_grad_();
  std::vector<Tensor> seen;
  w.register_post_accumulate_grad_hook([&](const Tensor& p) {
    CHECK(p.is_same(w));
    seen.push_back(p.grad().clone());
  });
  ((w * w).sum() + w.sum()).backward();  // w reached along two paths: one accumulation, one call
  REQUIRE(seen.size() == 1);
  check_close(seen[0], tensor({3.0, 5.0}, {}, DType::Float64));
  (w * 2).sum().backward();  // no zero_grad: the hook sees the sum of both backward passes
  REQUIRE(seen.size() == 2);
  check_close(seen[1], tensor({5.0, 7.0}, {}, DType::Float64));
  // grad() computes gradients without accumulating: no hook.
  kiln::grad({(w * 3).sum()}, {w});
  CHECK(seen.size() == 2);
}

TEST_CASE("grad hooks: post-accumulate-grad hooks take leaves that require grad only") {
  Tensor x = ones({2});
  check_error([&] { x.register_post_accumulate_grad_hook([](const Tensor&) {}); },
              "register_post_accumulate_grad_hook: cannot register a hook on a tensor that doesn't require gradient");
  Tensor w = ones({2}).requires_grad_();
  Tensor y = w * 2;
  check_error([&] { y.register_post_accumulate_grad_hook([](const Tensor&) {}); },
              "register_post_accumulate_grad_hook: post accumulate grad hooks cannot be registered on non-leaf tensors");
}

TEST_CASE("grad hooks: a queued callback runs once after every gradient of that backward is accumulated") {
  Tensor a = ones({3}).requires_grad_(), b = ones({3}).requires_grad_();
  std::vector<std::string> events;
  int queued = 0;
  auto hook = [&](const char* name) {
    return [&, name](const Tensor&) {
      events.push_back(name);
      if (queued++ == 0)
        queue_callback([&] {
          CHECK(a.grad().defined());
          CHECK(b.grad().defined());
          events.push_back("callback");
          queue_callback([&] { events.push_back("queued by the callback"); });
        });
    };
  };
  a.register_post_accumulate_grad_hook(hook("a"));
  b.register_post_accumulate_grad_hook(hook("b"));
  (a * b).sum().backward();
  REQUIRE(events.size() == 4);
  CHECK(events[2] == "callback");
  CHECK(events[3] == "queued by the callback");
  // The next backward starts with no callbacks pending.
  events.clear();
  queued = 1;
  (a + b).sum().backward();
  CHECK(events.size() == 2);
  check_error([] { queue_callback([] {}); }, "queue_callback: no backward is running on this thread");
}

TEST_CASE("grad hooks: a compiled training step's backward reaches the hooks and the callback before the update") {
  manual_seed(3);
  auto m = kiln::samples::digits_mlp();
  optim::SGD opt(m->parameters(), {0.1});
  CompiledTrainStep step(*m, [&](const Tensors& b) { return cross_entropy((*m)(b[0]), b[1]); }, opt);
  auto params = m->parameters();
  std::vector<Tensor> before;
  for (auto& p : params) before.push_back(p.detach().clone());
  int hooks = 0, callbacks = 0;
  for (auto& p : params)
    p.register_post_accumulate_grad_hook([&](const Tensor& t) {
      CHECK(t.grad().defined());
      if (hooks++ % int(params.size()) == 0)
        queue_callback([&] {
          ++callbacks;
          // The optimizer has not stepped yet: the parameters still hold their values from before.
          for (size_t i = 0; i < params.size(); ++i) check_close(params[i].detach(), before[i]);
        });
    });
  Tensor x = randn({8, 64}), y = randint(0, 10, {8});
  step({x, y});
  CHECK(hooks == int(params.size()));
  CHECK(callbacks == 1);
  CHECK(compile_stats(step.function()).eager_calls == 0);
}
