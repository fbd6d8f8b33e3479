#include "backends/interp/interop_scheduler.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory_category.h"
#include "core/tsan_annotations.h"
#include "eager/autograd/graph.h"

namespace kiln {
namespace interp {
namespace {

// A thread that runs out of work spins this long for more before it sleeps on a condition variable.
// On the 2-core VM the benchmarks run on, a futex wake-up costs the waker 5-20 us of system time and
// the sleeper as much again to be scheduled back in, while a small step lasts 2-30 us: blocking
// between steps made two threads slower than one (bench/RESULTS.md, "Inter-op scheduling"). The
// bound keeps a thread with nothing to do from holding a core long.
constexpr std::chrono::microseconds kSpin{100};

// Polls ready() until it holds (true) or kSpin passed (false).
template <class Ready>
bool spin_until(Ready ready) {
  auto start = std::chrono::steady_clock::now();
  for (unsigned k = 1;; ++k) {
    if (ready()) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if (k % 64 == 0 && std::chrono::steady_clock::now() - start > kSpin) return false;
  }
}

// > 0 while this thread runs a small step next to others: a graph it runs goes sequentially.
thread_local int t_small_step = 0;

int default_threads() {
  if (const char* env = std::getenv("KILN_NUM_INTEROP_THREADS"); env && *env) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (*end != '\0' || n < 1 || n > 1024)
      fail("KILN_NUM_INTEROP_THREADS: expected a positive integer, got '{}'", env);
    return int(n);
  }
  // Off unless asked for: concurrent steps raise the peak memory (a compiled training step's would pass
  // eager's) and a K-split GEMM on one thread rounds differently, so the default stays sequential.
  return 1;
}

std::mutex g_mu;
std::atomic<int> g_threads{0};  // 0: not read from the environment yet; read unlocked once set

// Every graph run asks: no lock once the count is known.
int threads() {
  if (int n = g_threads.load(std::memory_order_relaxed)) return n;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_threads == 0) g_threads = default_threads();
  return g_threads;
}

// The state one run_steps call shares with the threads of its OpenMP team.
struct Run {
  const StepGraph& g;
  const std::function<bool(int)>& small_step;
  const std::function<void(int)>& run;
  bool grad;
  MemoryCategory category;

  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> deps;
  // Ready steps, taken lowest index first: program order is the order the memory planner chose, and
  // keeping close to it keeps the peak of live values close to a sequential run's.
  std::set<int> small;  // run by any thread of the team
  std::set<int> alone;  // run by the caller, outside the team, with nothing else in flight
  int in_flight = 0;
  size_t left = 0;
  std::exception_ptr error;
  // Bumped, under mu, by every change a waiting thread may be waiting for; read while spinning.
  std::atomic<unsigned> changes{0};
  int sleeping = 0;  // threads blocked on cv
  // More threads than cores: a spinning thread would hold a core a thread with a step needs.
  bool spin = true;

  Run(const StepGraph& g_, const std::function<bool(int)>& sm, const std::function<void(int)>& r)
      : g(g_), small_step(sm), run(r), grad(GradMode::enabled()), category(current_memory_category()),
        deps(g_.num_deps), left(g_.num_deps.size()) {}

  bool is_alone(int i) {
    if (g.exclusive[size_t(i)]) return true;
    try {
      return !small_step(i);
    } catch (...) {
      return true;  // the step raises when it runs, in order
    }
  }

  // Called without the lock: runs step i, then makes its successors ready.
  void execute(int i) {
    std::exception_ptr ep;
    try {
      run(i);
    } catch (...) {
      ep = std::current_exception();
    }
    std::vector<int> ready;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (ep && !error) error = ep;
      if (!ep && !error)
        for (int s : g.succs[size_t(i)])
          if (--deps[size_t(s)] == 0) ready.push_back(s);
    }
    // Classifying reads the successors' inputs, written by now; in_flight still counts i, so no
    // thread thinks the phase finished meanwhile.
    std::vector<bool> alone_flags;
    for (int s : ready) alone_flags.push_back(is_alone(s));
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (size_t k = 0; k < ready.size(); ++k) (alone_flags[k] ? alone : small).insert(ready[k]);
      --in_flight;
      if (!ep) --left;
      changes.fetch_add(1, std::memory_order_release);
      wake = sleeping > 0;  // a spinning thread sees `changes` without the syscall
    }
    if (wake) cv.notify_all();
  }

  // With mu held by lock: returns once something changed, or spuriously; the caller checks again.
  void wait(std::unique_lock<std::mutex>& lock) {
    unsigned seen = changes.load(std::memory_order_relaxed);
    if (spin) {
      lock.unlock();
      bool moved = spin_until([&] { return changes.load(std::memory_order_acquire) != seen; });
      lock.lock();
      if (moved) return;
    }
    ++sleeping;
    cv.wait(lock, [&] { return changes.load(std::memory_order_relaxed) != seen; });
    --sleeping;
  }

  // One thread's part of a phase: small steps while there are any. It ends, for every thread of the
  // team, once none is ready or running: the run is over, or a large step waits for every core.
  KILN_TSAN_NOINLINE void phase() {
    omp_set_num_threads(1);  // this task's count: what dnnl_sgemm and the kernels read
    const bool saved_grad = GradMode::enabled();  // a team thread outlives the run
    GradMode::set(grad);
    MemoryCategoryScope scope(category);
    ++t_small_step;
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (!error && alone.empty() && !small.empty()) {
        int i = *small.begin();
        small.erase(small.begin());
        ++in_flight;
        lock.unlock();
        execute(i);
        lock.lock();
        continue;
      }
      if (in_flight == 0) break;
      wait(lock);
    }
    lock.unlock();
    --t_small_step;
    GradMode::set(saved_grad);
  }
};

// One phase on this thread's OpenMP team of n. The region's fork and join carry r, and what the steps
// before it wrote, to the team and back; libgomp does that out of ThreadSanitizer's sight, so a TSan
// build is told here (core/tsan_annotations.h). This function's own code, the region's argument passing
// included, is not instrumented: its one shared value, &r, is libgomp's to hand over, and is read before
// the acquire can name it. Run::phase, which is instrumented, must stay a call of its own.
KILN_TSAN_NOT_INSTRUMENTED void run_phase_on_team(Run& r, int n) {
  KILN_TSAN_RELEASE(&r);  // the fork
#pragma omp parallel num_threads(n)
  {
    KILN_TSAN_ACQUIRE(&r);
    r.phase();
    KILN_TSAN_RELEASE(&r);
  }
  KILN_TSAN_ACQUIRE(&r);  // the join
}

}  // namespace

bool in_interop_worker() { return t_small_step > 0; }

void run_steps(const StepGraph& g, const std::function<bool(int)>& small, const std::function<void(int)>& run) {
  const int n = in_interop_worker() ? 1 : threads();
  if (n <= 1) {
    for (size_t i = 0; i < g.num_deps.size(); ++i) run(int(i));  // program order is a topological order
    return;
  }
  Run r(g, small, run);
  r.spin = n <= omp_get_num_procs();
  for (size_t i = 0; i < g.num_deps.size(); ++i)
    if (g.num_deps[i] == 0) (r.is_alone(int(i)) ? r.alone : r.small).insert(int(i));

  std::unique_lock<std::mutex> lock(r.mu);
  for (;;) {
    // Between phases nothing is in flight.
    if (r.error || r.left == 0) break;
    if (!r.alone.empty()) {
      int i = *r.alone.begin();
      r.alone.erase(r.alone.begin());
      ++r.in_flight;
      lock.unlock();
      r.execute(i);
      lock.lock();
      continue;
    }
    if (r.small.empty()) fail("interop: no step is ready and {} are left (a cycle in the step graph)", r.left);
    lock.unlock();
    // The small steps run on this thread's OpenMP team rather than on threads of their own: the team's
    // idle threads spin for a while after each region (GOMP_SPINCOUNT), so a thread of ours would share
    // its core with one of them whenever a step with every OpenMP thread ran shortly before; the team
    // thread itself takes the work instead, and a parallel region is how it is handed over.
    run_phase_on_team(r, n);
    lock.lock();
  }
  std::exception_ptr error = r.error;
  lock.unlock();
  if (error) std::rethrow_exception(error);
}

}  // namespace interp

void set_num_interop_threads(int n) {
  if (n < 1) fail("set_num_interop_threads: expected a positive count, got {}", n);
  std::lock_guard<std::mutex> lock(interp::g_mu);
  interp::g_threads = n;
}

int get_num_interop_threads() { return interp::threads(); }

}  // namespace kiln
