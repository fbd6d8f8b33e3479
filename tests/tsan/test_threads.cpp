// The ThreadSanitizer program (docs/threads.md): kiln's uses of threads, built with -fsanitize=thread
// in build-tsan and run clean (halt_on_error=1), with suppressions only for uninstrumented libraries
// (tests/tsan/suppressions.txt):
//   (a) the inter-op pool: independent branches of one graph on the caller's OpenMP team, interpreted
//       and compiled, and an error raised in one branch;
//   (b) one compiled Function called from 4 std::threads at once, as an inference server calls it;
//   (c) the compile cache filled from several threads at once (other shapes, a dim turning symbolic),
//       and compile() of separate functions on separate threads;
//   (d) autocast's weight cache, each thread inside its own AutocastGuard.
// Run it with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (main refuses otherwise): libgomp's fork, join and
// barriers and OpenBLAS's thread pool are not instrumented, so an intra-op kernel forking a team would
// hand data across threads unseen and be reported. With one intra-op thread no kernel forks, while the
// inter-op teams (their fork and join annotated in backends/interp/interop_scheduler.cpp) and the
// std::threads still run at once. Worker threads never use doctest's macros: they record what they saw
// and the test checks it after join().
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include "../support.h"
#include "../two_towers.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;
using kiln::test::check_bit_identical;
using kiln::test::check_close;
using kiln::test::check_error;
using kiln::test::kTwoTowers;
using kiln::test::tower_function;
using kiln::test::tower_inputs;
using IntraThreads = kiln::test::NumThreads;
using InteropThreads = kiln::test::NumInteropThreads;
using kiln::test::same_bits;

namespace {

// Refuses to run with more than one intra-op thread, before any test (see the comment at the top).
const bool g_env_checked = [] {
  for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"}) {
    const char* v = std::getenv(var);
    if (!v || std::strcmp(v, "1") != 0) {
      std::fprintf(stderr,
                   "kiln_tsan_tests: run with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 (%s is %s): libgomp and "
                   "OpenBLAS hand data between their threads out of ThreadSanitizer's sight (docs/threads.md)\n",
                   var, v ? v : "unset");
      std::exit(2);
    }
  }
  return true;
}();


// Runs fn(t) on n std::threads that start together (each waits until all exist, so their calls overlap).
// Returns what each thread threw ("" when nothing). Also records an error for a thread whose OpenMP
// count is not 1 (a new thread takes OMP_NUM_THREADS, not the caller's set_num_threads).
std::vector<std::string> run_threads(int n, const std::function<void(int)>& fn) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::atomic<int> arrived{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      arrived.fetch_add(1);
      while (arrived.load() < n) std::this_thread::yield();
      try {
        if (get_num_threads() != 1) throw std::runtime_error("this thread has " + std::to_string(get_num_threads()) + " OpenMP threads");
        fn(t);
      } catch (const std::exception& e) {
        errors[size_t(t)] = e.what();
      }
    });
  for (std::thread& th : threads) th.join();
  return errors;
}

void check_no_errors(const std::vector<std::string>& errors) {
  for (size_t t = 0; t < errors.size(); ++t) CHECK_MESSAGE(errors[t].empty(), "thread " << t << ": " << errors[t]);
}



// Holds the first node of each of two kinds until one of the other kind has started: both finish only
// if they ran at the same time, on two threads (bounded, so a broken pool fails instead of hanging).
class Rendezvous final : public interp::NodeRunner {
 public:
  Rendezvous(OpId a, OpId b) : a_(a), b_(b) {}
  bool run(const ir::Node& n, const std::vector<IValue>&, std::vector<IValue>&) override {
    if (!n.is_op() || (n.op() != a_ && n.op() != b_)) return false;
    std::unique_lock<std::mutex> lock(mu_);
    threads_.insert(std::this_thread::get_id());
    ++(n.op() == a_ ? seen_a_ : seen_b_);
    const int& other = n.op() == a_ ? seen_b_ : seen_a_;
    cv_.notify_all();
    if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return other > 0; })) timed_out_ = true;
    return false;
  }
  bool met() {
    std::lock_guard<std::mutex> lock(mu_);
    return !timed_out_ && threads_.size() == 2;
  }

 private:
  OpId a_, b_;
  std::mutex mu_;
  std::condition_variable cv_;
  int seen_a_ = 0, seen_b_ = 0;
  bool timed_out_ = false;
  std::set<std::thread::id> threads_;
};

}  // namespace

TEST_CASE("tsan (a): the inter-op pool runs two branches at once, interpreted and compiled, as a sequential run does") {
  IntraThreads intra(1);
  std::vector<IValue> ins = tower_inputs();
  Function f = tower_function();
  Function c = compile(f);
  Tensor seq_interp, seq_compiled;
  {
    InteropThreads one(1);
    seq_interp = f.call(ins)[0].to_tensor();
    seq_compiled = c.call(ins)[0].to_tensor();
  }
  InteropThreads two(2);
  for (int rep = 0; rep < 5; ++rep) {
    CAPTURE(rep);
    check_bit_identical(f.call(ins)[0].to_tensor(), seq_interp);
    check_bit_identical(c.call(ins)[0].to_tensor(), seq_compiled);
  }
  CHECK(compile_stats(c).gemm_kernels > 0);
  // The two towers' last ops met on two threads: TSan saw the branches run concurrently, not merely
  // on a team that happened to take turns.
  auto g = ir::parse_ir(kTwoTowers);
  Rendezvous meet(OpId::Tanh, OpId::Sigmoid);
  check_bit_identical(interp::run(*g, ins, &meet)[0].to_tensor(), seq_interp);
  CHECK(meet.met());
  CHECK(get_num_threads() == 1);
}

TEST_CASE("tsan (a): an error raised in one branch on the inter-op pool reaches the caller, interpreted and compiled") {
  IntraThreads intra(1);
  // The right branch picks rows of w by index: an index out of range raises on whichever team thread
  // runs it, while the left branch runs on the other.
  Function f = trace(
      [](const Tensors& in) {
        Tensor left = sigmoid(tanh(in[0]) * 2.0);
        Tensor right = relu(index_select(in[1], 0, in[2]) + 1.0);
        return Tensors{left, right};
      },
      {randn({4, 3}), randn({5, 3}), tensor(std::vector<int64_t>{0, 4})});
  Function c = compile(f);
  Tensor x = randn({4, 3}), w = randn({5, 3});
  Tensor good = tensor(std::vector<int64_t>{1, 3}), bad = tensor(std::vector<int64_t>{1, 7});
  std::vector<Tensor> seq;
  {
    InteropThreads one(1);
    seq = f({x, w, good});
    check_error([&] { f({x, w, bad}); }, "index_select: index 7 is out of bounds for dimension 0 with size 5");
  }
  InteropThreads two(2);
  for (int rep = 0; rep < 5; ++rep) {
    CAPTURE(rep);
    for (const Function* fn : {&f, &c}) {
      check_error([&] { (*fn)({x, w, bad}); }, "index_select: index 7 is out of bounds for dimension 0 with size 5");
      // The pool is usable after the error, and the results are the sequential ones.
      std::vector<Tensor> r = (*fn)({x, w, good});
      REQUIRE(r.size() == 2);
      check_close(r[0], seq[0]);
      check_close(r[1], seq[1]);
    }
  }
}

TEST_CASE("tsan (b): one compiled Function called from 4 threads at once, at 1 and 2 inter-op threads") {
  IntraThreads intra(1);
  for (int interop : {1, 2}) {
    CAPTURE(interop);
    InteropThreads pool(interop);
    std::vector<IValue> ins = tower_inputs();
    Function f = tower_function();
    Tensor expected;
    {
      InteropThreads one(1);
      expected = compile(f).call(ins)[0].to_tensor();
    }
    // Not called before the threads: their first calls race to compile its one cache entry.
    Function c = compile(f);
    constexpr int kThreads = 4, kCalls = 6;
    std::vector<int> good(kThreads, 0);
    check_no_errors(run_threads(kThreads, [&](int t) {
      for (int k = 0; k < kCalls; ++k)
        if (same_bits(c.call(ins)[0].to_tensor(), expected)) ++good[size_t(t)];
    }));
    for (int t = 0; t < kThreads; ++t) CHECK_MESSAGE(good[size_t(t)] == kCalls, "thread " << t);
    jit::CacheStats s = compile_stats(c);
    CHECK(s.misses == 1);
    CHECK(s.hits + s.misses == kThreads * kCalls);
  }
}

TEST_CASE("tsan (c): the compile cache filled from 4 threads with different shapes; compile() on separate threads") {
  IntraThreads intra(1);
  InteropThreads one(1);
  // 12 batch sizes, each thread taking them in another order: entries are compiled and inserted while
  // other threads look them up, and the batch dim turns symbolic after recompile_limit (8) misses.
  constexpr int kThreads = 4, kSizes = 12;
  Function f = tower_function();
  std::vector<std::vector<IValue>> ins;
  std::vector<Tensor> expected;
  for (int b = 1; b <= kSizes; ++b) {
    ins.push_back(tower_inputs(b, uint64_t(b)));
    expected.push_back(f.call(ins.back())[0].to_tensor());
  }
  Function c = compile(f);
  std::vector<std::map<int, Tensor>> got(kThreads);
  check_no_errors(run_threads(kThreads, [&](int t) {
    for (int k = 0; k < kSizes; ++k) {
      int b = (t * 5 + k) % kSizes;
      got[size_t(t)][b] = c.call(ins[size_t(b)])[0].to_tensor();
    }
  }));
  for (int t = 0; t < kThreads; ++t) {
    REQUIRE(got[size_t(t)].size() == size_t(kSizes));
    for (auto& [b, r] : got[size_t(t)]) {
      CAPTURE(t);
      CAPTURE(b);
      check_close(r, expected[size_t(b)], 1e-5, 1e-5);
    }
  }
  jit::CacheStats s = compile_stats(c);
  CHECK(s.symbolic_dims == 1);
  CHECK(s.misses == 9);  // 8 shapes, then the 9th makes the dim symbolic and compiles the entry serving the rest
  CHECK(s.hits + s.misses <= kThreads * kSizes);

  // compile() itself on separate threads, each for a function of its own (passes, the x86 code
  // generator, oneDNN's primitive cache for the gemm groups), then each called from its thread.
  std::vector<Tensor> results(kThreads);
  check_no_errors(run_threads(kThreads, [&](int t) {
    Function mine = compile(tower_function());
    results[size_t(t)] = mine.call(ins[size_t(t)])[0].to_tensor();
  }));
  for (int t = 0; t < kThreads; ++t) check_close(results[size_t(t)], expected[size_t(t)], 1e-5, 1e-5);
}

TEST_CASE("tsan (d): autocast's weight cache on 4 threads, each in its own AutocastGuard, one shared model") {
  IntraThreads intra(1);
  constexpr int kThreads = 4, kReps = 3;
  manual_seed(3);
  // Fresh parameters (leaves requiring grad, never used yet): the casts are what every thread caches.
  auto model = std::make_shared<nn::Sequential>();
  model->add(std::make_shared<nn::Linear>(32, 48)).add(std::make_shared<nn::ReLU>()).add(std::make_shared<nn::Linear>(48, 8));
  std::vector<Tensor> xs;
  for (int t = 0; t < kThreads; ++t) xs.push_back(randn({4, 32}));
  // Each thread: forward passes under its own guard (the weight cache fills on the first and is read by
  // the others), the gradient with respect to its own input through the cached casts, and the cache
  // count, inside and after the scope.
  struct Seen {
    std::vector<Tensor> outs, grads;
    size_t cached_first = 0, cached_last = 0, cached_after = 1;
    bool enabled_inside = false, enabled_after = true;
  };
  auto run = [&](int t, Seen& s) {
    {
      AutocastGuard autocast;
      s.enabled_inside = autocast_enabled();
      for (int k = 0; k < kReps; ++k) {
        // x is not a leaf, so only the parameters are cached; the gradient flows through x into `leaf`.
        Tensor leaf = xs[size_t(t)].detach().requires_grad_();
        Tensor x = leaf * 1.0;
        Tensor y = (*model)(x);
        s.outs.push_back(y.detach());
        // The cached casts' autograd nodes are shared by the reps of one scope; they save no values, so
        // each rep's backward runs through them again (as torch's do).
        s.grads.push_back(kiln::grad({y.to(DType::Float32).sum()}, {leaf})[0]);
        (k == 0 ? s.cached_first : s.cached_last) = autocast_cached_casts();
      }
    }
    s.cached_after = autocast_cached_casts();
    s.enabled_after = autocast_enabled();
  };
  std::vector<Seen> seen(kThreads);
  check_no_errors(run_threads(kThreads, [&](int t) { run(t, seen[size_t(t)]); }));
  for (int t = 0; t < kThreads; ++t) {
    CAPTURE(t);
    Seen ref;
    run(t, ref);  // the same on this thread alone
    const Seen& s = seen[size_t(t)];
    CHECK(s.enabled_inside);
    CHECK_FALSE(s.enabled_after);
    CHECK(s.cached_first == 4);  // both weights and both biases, cast once
    CHECK(s.cached_last == 4);
    CHECK(s.cached_after == 0);  // the outermost guard emptied this thread's cache
    REQUIRE(s.outs.size() == size_t(kReps));
    for (int k = 0; k < kReps; ++k) {
      CHECK(s.outs[size_t(k)].dtype() == DType::BFloat16);
      check_bit_identical(s.outs[size_t(k)], ref.outs[size_t(k)]);
      check_bit_identical(s.grads[size_t(k)], ref.grads[size_t(k)]);
    }
  }
  for (auto& p : model->parameters()) CHECK_FALSE(p.grad().defined());  // grad() left .grad alone
}

TEST_CASE("tsan (d): threads recording autograd on the same fresh leaves at once (the parameters' first use)") {
  // What the autocast case does to its shared parameters, many times over: the first op recorded on a
  // leaf creates its gradient accumulator, which every later op on any thread shares.
  IntraThreads intra(1);
  constexpr int kThreads = 4, kLeaves = 200;
  std::vector<Tensor> leaves;
  for (int i = 0; i < kLeaves; ++i) leaves.push_back(full({2}, double(i)).requires_grad_());
  std::vector<std::vector<Tensor>> outs(kThreads);
  check_no_errors(run_threads(kThreads, [&](int t) {
    for (const Tensor& w : leaves) outs[size_t(t)].push_back(w * 2.0);
  }));
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kLeaves; i += 37) {
      CAPTURE(t);
      CAPTURE(i);
      Tensor g = kiln::grad({outs[size_t(t)][size_t(i)].sum()}, {leaves[size_t(i)]})[0];
      check_close(g, full({2}, 2.0, DType::Float32));
    }
}
