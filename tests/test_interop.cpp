// Inter-op scheduling: independent steps of a graph run at once on the caller's OpenMP team; results,
// random streams and errors are those of a sequential run.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "support.h"
#include "two_towers.h"

using namespace kiln;
using kiln::test::check_bit_identical;
using kiln::test::check_error;
using kiln::test::kTwoTowers;
using kiln::test::tower_function;
using kiln::test::tower_inputs;

namespace {

using InteropThreads = kiln::test::NumInteropThreads;
using IntraThreads = kiln::test::NumThreads;

// Parks the first node it sees of each of two kinds until a node of the other kind has started, so
// the two can only both finish if they run at once. The wait is bounded only so that a broken
// scheduler fails the test instead of hanging the suite.
// After they met, the node of kind a is held for hold_a more, so that the other thread runs out of work
// while it waits.
class Rendezvous final : public interp::NodeRunner {
 public:
  Rendezvous(OpId a, OpId b, std::chrono::milliseconds hold_a = std::chrono::milliseconds(0))
      : a_(a), b_(b), hold_a_(hold_a) {}
  bool run(const ir::Node& n, const std::vector<IValue>&, std::vector<IValue>&) override {
    if (!n.is_op() || (n.op() != a_ && n.op() != b_)) return false;
    std::unique_lock<std::mutex> lock(mu_);
    threads_.insert(std::this_thread::get_id());
    int& mine = n.op() == a_ ? seen_a_ : seen_b_;
    const int& other = n.op() == a_ ? seen_b_ : seen_a_;
    ++mine;
    cv_.notify_all();
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return other > 0; })) timed_out_ = true;
    lock.unlock();
    if (n.op() == a_) std::this_thread::sleep_for(hold_a_);
    return false;
  }
  bool timed_out() const { return timed_out_; }
  size_t threads() const { return threads_.size(); }

 private:
  OpId a_, b_;
  std::chrono::milliseconds hold_a_;
  std::mutex mu_;
  std::condition_variable cv_;
  int seen_a_ = 0, seen_b_ = 0;
  bool timed_out_ = false;
  std::set<std::thread::id> threads_;
};

// Records on which threads nodes ran.
class ThreadLog final : public interp::NodeRunner {
 public:
  bool run(const ir::Node&, const std::vector<IValue>&, std::vector<IValue>&) override {
    std::lock_guard<std::mutex> lock(mu_);
    threads_.insert(std::this_thread::get_id());
    return false;
  }
  std::set<std::thread::id> threads() const { return threads_; }

 private:
  std::mutex mu_;
  std::set<std::thread::id> threads_;
};

// Records the intra-op thread count each node ran with (what the kernels and dnnl_sgemm read).
class StepThreadCounts final : public interp::NodeRunner {
 public:
  bool run(const ir::Node&, const std::vector<IValue>&, std::vector<IValue>&) override {
    std::lock_guard<std::mutex> lock(mu_);
    counts_.insert(get_num_threads());
    return false;
  }
  std::multiset<int> counts() const { return counts_; }

 private:
  std::mutex mu_;
  std::multiset<int> counts_;
};

const char* kTwoBranches = R"(graph(%x : f32[8], %y : f32[8]):
  %a : f32[8] = tanh(%x)
  %b : f32[8] = sigmoid(%y)
  %c : f32[8] = add(%a, %b)
  return (%c)
)";

}  // namespace

// The determinism contract (docs/jit.md, "Same results"): a graph's result is bit-identical to a
// sequential run in which every step has the intra-op thread count the scheduler gave it, whatever the
// inter-op schedule. The scheduler gives a small step one thread, and which steps are small depends on the
// graph and the shapes only; every step of the two towers is small. So at 2 inter-op threads the towers
// equal a sequential run at one intra-op thread, bit for bit, at any intra-op count; against a sequential
// run at 2 intra-op threads they agree within rounding only (oneDNN may split a GEMM's K across threads).
TEST_CASE("interop: the two-tower graph is bit-identical to a sequential run at the same per-step thread count") {
  std::vector<IValue> ins = tower_inputs();
  Function f = tower_function();
  Function c = compile(f);
  Tensor seq_interp, seq_compiled, seq_interp_2threads;
  {
    InteropThreads one(1);
    IntraThreads intra_one(1);
    seq_interp = f.call(ins)[0].to_tensor();
    seq_compiled = c.call(ins)[0].to_tensor();
  }
  {
    InteropThreads one(1);
    IntraThreads intra_two(2);
    seq_interp_2threads = f.call(ins)[0].to_tensor();
  }
  InteropThreads two(2);
  for (int intra : {1, 2}) {
    CAPTURE(intra);
    IntraThreads t(intra);
    for (int rep = 0; rep < 20; ++rep) {
      check_bit_identical(f.call(ins)[0].to_tensor(), seq_interp);
      check_bit_identical(c.call(ins)[0].to_tensor(), seq_compiled);
    }
    // Each step's one OpenMP thread was set inside the team: the caller keeps its count.
    CHECK(get_num_threads() == intra);
    // Every step ran with the one thread the reference's steps had.
    StepThreadCounts counts;
    auto g = ir::parse_ir(kTwoTowers);
    check_bit_identical(interp::run(*g, ins, &counts)[0].to_tensor(), seq_interp);
    CHECK(counts.counts() == std::multiset<int>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  }
  kiln::test::check_close(f.call(ins)[0].to_tensor(), seq_interp_2threads, 1e-5, 1e-6);
  // The compiled graph released values after their last reader, whichever branch finished last.
  CHECK(compile_stats(c).gemm_kernels > 0);
  // The same values as eager code at the same thread count.
  IntraThreads intra_one(1);
  Tensor x = ins[0].to_tensor();
  auto t = [&](size_t i) { return ins[i].to_tensor(); };
  Tensor a = tanh(matmul(relu(matmul(x, t(1)) + t(2)), t(3)) + t(4));
  Tensor b = sigmoid(matmul(relu(matmul(x, t(5)) + t(6)), t(7)) + t(8));
  check_bit_identical(seq_interp, cat({a, b}, 1));
}

TEST_CASE("interop: independent small steps run at the same time on two threads") {
  auto g = ir::parse_ir(kTwoBranches);
  Tensor x = arange(8).to(DType::Float32), y = x * 0.5;
  InteropThreads two(2);
  Rendezvous meet(OpId::Tanh, OpId::Sigmoid);
  auto r = interp::run(*g, {x, y}, &meet);
  CHECK_FALSE(meet.timed_out());
  CHECK(meet.threads() == 2);
  check_bit_identical(r[0].to_tensor(), tanh(x) + sigmoid(y));
}

TEST_CASE("interop: a thread that went to sleep between runs or between steps is woken") {
  // A thread out of work spins for a while, then sleeps: the team's other thread between these runs,
  // spaced further apart than that, and the thread that finished its branch while the other is held. A
  // lost wake-up leaves the next run's first step waiting alone (timed_out) or the run unfinished.
  auto g = ir::parse_ir(kTwoBranches);
  Tensor x = arange(8).to(DType::Float32), y = x * 0.5;
  InteropThreads two(2);
  for (int rep = 0; rep < 5; ++rep) {
    CAPTURE(rep);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    Rendezvous meet(OpId::Tanh, OpId::Sigmoid, std::chrono::milliseconds(3));
    auto r = interp::run(*g, {x, y}, &meet);
    CHECK_FALSE(meet.timed_out());
    CHECK(meet.threads() == 2);
    check_bit_identical(r[0].to_tensor(), tanh(x) + sigmoid(y));
  }
}

TEST_CASE("interop: set_num_interop_threads(1) runs every step on the calling thread") {
  auto g = ir::parse_ir(kTwoBranches);
  Tensor x = arange(8).to(DType::Float32), y = x * 0.5;
  InteropThreads one(1);
  CHECK(get_num_interop_threads() == 1);
  ThreadLog log;
  for (int rep = 0; rep < 10; ++rep) interp::run(*g, {x, y}, &log);
  CHECK(log.threads() == std::set<std::thread::id>{std::this_thread::get_id()});
  check_error([] { set_num_interop_threads(0); }, "set_num_interop_threads: expected a positive count, got 0");
}

TEST_CASE("interop: steps run sequentially while autograd records") {
  auto g = ir::parse_ir(kTwoBranches);
  Tensor x = arange(8).to(DType::Float32).requires_grad_(), y = arange(8).to(DType::Float32) * 0.5;
  InteropThreads two(2);
  ThreadLog log;
  Tensor c = interp::run(*g, {x, y}, &log)[0].to_tensor();
  CHECK(log.threads() == std::set<std::thread::id>{std::this_thread::get_id()});
  c.sum().backward();
  kiln::test::check_close(x.grad(), 1.0 - tanh(x.detach()) * tanh(x.detach()));
}

TEST_CASE("interop: an error in one branch reaches the caller as the same kiln::Error") {
  // The right branch multiplies [4,3] by [4,3]: the matmul fails on whichever thread runs it.
  auto g = ir::parse_ir(R"(graph(%x : f32[4,3], %w : f32[4,3]):
  %a : f32[4,3] = tanh(%x)
  %b : f32[4,3] = sigmoid(%a)
  %m : Tensor = matmul(%x, %w)
  %n : Tensor = relu(%m)
  %c : f32[4,3] = add(%b, %n)
  return (%c)
)");
  Tensor x = ones({4, 3}), w = ones({4, 3});
  std::string sequential;
  {
    InteropThreads one(1);
    try {
      interp::run(*g, {x, w});
    } catch (const Error& e) {
      sequential = e.what();
    }
  }
  REQUIRE(sequential.find("matmul") != std::string::npos);
  InteropThreads two(2);
  for (int rep = 0; rep < 20; ++rep) check_error([&] { interp::run(*g, {x, w}); }, sequential);
  // What a runner throws crosses the pool as thrown: kiln::Error named by the interpreter, anything
  // else unchanged.
  struct Boom final : public interp::NodeRunner {
    bool kiln_error = true;
    bool run(const ir::Node& n, const std::vector<IValue>&, std::vector<IValue>&) override {
      if (!n.is_op() || n.op() != OpId::Sigmoid) return false;
      if (kiln_error) fail("boom: sigmoid refused");
      throw std::runtime_error("not a kiln error");
    }
  } boom;
  auto ok = ir::parse_ir(kTwoBranches);
  check_error([&] { interp::run(*ok, {ones({8}), ones({8})}, &boom); }, "interp: line 3 (sigmoid): boom: sigmoid refused");
  boom.kiln_error = false;
  CHECK_THROWS_AS(interp::run(*ok, {ones({8}), ones({8})}, &boom), std::runtime_error);
}

TEST_CASE("interop: random ops keep the sequential RNG order") {
  auto g = ir::parse_ir(R"(graph(%x : f32[64], %y : f32[64]):
  %a : f32[64] = tanh(%x)
  %ra : f32[64] = prim::rand_like(%a)
  %a2 : f32[64] = mul(%a, %ra)
  %b : f32[64] = sigmoid(%y)
  %rb : f32[64] = prim::rand_like(%b)
  %b2 : f32[64] = mul(%b, %rb)
  %c : f32[64] = sub(%a2, %b2)
  return (%c, %ra, %rb)
)");
  Tensor x = randn({64}), y = randn({64});
  std::vector<IValue> seq;
  {
    InteropThreads one(1);
    manual_seed(3);
    seq = interp::run(*g, {x, y});
  }
  InteropThreads two(2);
  for (int rep = 0; rep < 10; ++rep) {
    manual_seed(3);
    std::vector<IValue> par = interp::run(*g, {x, y});
    for (size_t i = 0; i < 3; ++i) check_bit_identical(par[i].to_tensor(), seq[i].to_tensor());
  }
}

TEST_CASE("interop: a Function called from inside a step does not deadlock") {
  Function inner = tower_function();
  std::vector<IValue> ins = tower_inputs();
  Tensor expected;
  {
    InteropThreads one(1);
    expected = inner.call(ins)[0].to_tensor();
  }
  // Both branches of the outer graph call the two-tower function from the step they run in.
  struct Nested final : public interp::NodeRunner {
    const Function& fn;
    const std::vector<IValue>& ins;
    std::mutex mu;
    std::vector<Tensor> results;
    Nested(const Function& f, const std::vector<IValue>& i) : fn(f), ins(i) {}
    bool run(const ir::Node& n, const std::vector<IValue>&, std::vector<IValue>&) override {
      if (!n.is_op() || (n.op() != OpId::Tanh && n.op() != OpId::Sigmoid)) return false;
      Tensor r = fn.call(ins)[0].to_tensor();
      std::lock_guard<std::mutex> lock(mu);
      results.push_back(r);
      return false;
    }
  } nested(inner, ins);
  auto g = ir::parse_ir(kTwoBranches);
  InteropThreads two(2);
  for (int rep = 0; rep < 5; ++rep) interp::run(*g, {ones({8}), ones({8})}, &nested);
  REQUIRE(nested.results.size() == 10);
  for (const Tensor& r : nested.results) check_bit_identical(r, expected);
  // Calls from several user threads at once, each on its own team.
  std::vector<std::thread> users;
  std::vector<Tensor> outs(4);
  for (size_t k = 0; k < outs.size(); ++k) users.emplace_back([&, k] { outs[k] = inner.call(ins)[0].to_tensor(); });
  for (auto& t : users) t.join();
  for (const Tensor& r : outs) check_bit_identical(r, expected);
}

TEST_CASE("interop: control flow runs in order, its blocks may run their own branches at once") {
  auto g = ir::parse_ir(R"(graph(%x : f32[8], %n : int):
  %true : bool = prim::Constant[value=true]()
  %acc : f32[8] = prim::Loop(%n, %true, %x)
    block0(%i : int, %a : f32[8]):
      %p : f32[8] = tanh(%a)
      %q : f32[8] = sigmoid(%a)
      %s : f32[8] = add(%p, %q)
      -> (%true, %s)
  %e : f32[8] = exp(%x)
  %y : f32[8] = mul(%acc, %e)
  return (%y)
)");
  Tensor x = arange(8).to(DType::Float32) * 0.1;
  Tensor expect = x;
  for (int i = 0; i < 4; ++i) expect = tanh(expect) + sigmoid(expect);
  expect = expect * exp(x);
  InteropThreads two(2);
  for (int rep = 0; rep < 10; ++rep) check_bit_identical(interp::run(*g, {x, int64_t(4)})[0].to_tensor(), expect);
}

TEST_CASE("interop: off unless asked for") {
  // The default keeps every program's results and peak memory as a sequential run's (docs/jit.md).
  if (std::getenv("KILN_NUM_INTEROP_THREADS") == nullptr) CHECK(get_num_interop_threads() == 1);
}
