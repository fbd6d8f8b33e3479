#include "backends/interp/interop_scheduler.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/memory_category.h"
#include "eager/autograd/graph.h"

namespace kiln {
namespace interp {
namespace {

// A thread that runs out of work spins this long for more before it sleeps on a condition variable.
// On the 2-core VM the benchmarks run on, a futex wake-up costs the waker 5-20 us of system time and
// the sleeper as much again to be scheduled back in, while a small step lasts 2-30 us: blocking
// between steps made two threads slower than one (bench/RESULTS.md, "Inter-op scheduling"). The
// bound keeps a thread with nothing to do from holding a core long, since the caller may next run a
// large step on every core.
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

thread_local bool t_worker = false;
// > 0 while this thread runs a small step next to others: a graph it runs goes sequentially.
thread_local int t_small_step = 0;

// Threads that take jobs in order. Each runs its OpenMP regions on one thread: the cores are
// already shared out between the steps running at once.
class Pool {
 public:
  explicit Pool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      jobs_.clear();  // helpers are optional: the caller finishes its steps alone
    }
    cv_.notify_all();
    threads_.clear();  // joins
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int workers() const { return int(threads_.size()); }
  void post(std::function<void()> job) {
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
      queued_.fetch_add(1, std::memory_order_release);
      wake = sleeping_ > 0;  // a spinning worker sees queued_ without the syscall
    }
    if (wake) cv_.notify_one();
  }

 private:
  void loop() {
    t_worker = true;
    omp_set_num_threads(1);  // also what dnnl_sgemm (OpenMP runtime) reads on this thread
    for (;;) {
      spin_until([&] { return queued_.load(std::memory_order_acquire) > 0 || stop_.load(std::memory_order_relaxed); });
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (!stop_ && jobs_.empty()) {
          ++sleeping_;
          cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
          --sleeping_;
        }
        if (stop_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
      }
      job();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::atomic<int> queued_{0};   // jobs_.size(), read while spinning
  int sleeping_ = 0;             // workers blocked on cv_
  std::atomic<bool> stop_{false};
  std::vector<std::jthread> threads_;  // last: joined before the members above go
};

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

std::atomic<bool> g_shut_down{false};  // trivially destructible: safe to read after Settings died

struct Settings {
  std::mutex mu;
  std::atomic<int> threads{0};  // 0: not read from the environment yet; read unlocked once set
  std::shared_ptr<Pool> pool;
  ~Settings() {
    g_shut_down = true;
    std::shared_ptr<Pool> p;
    {
      std::lock_guard<std::mutex> lock(mu);
      p = std::move(pool);
    }
  }
};

Settings& settings() {
  static Settings s;
  return s;
}

int threads_locked(Settings& s) {
  if (s.threads == 0) s.threads = default_threads();
  return s.threads;
}

// Every graph run asks: no lock once the count is known.
int threads(Settings& s) {
  if (int n = s.threads.load(std::memory_order_relaxed)) return n;
  std::lock_guard<std::mutex> lock(s.mu);
  return threads_locked(s);
}

// The pool for a scheduled run, or null when inter-op threads are off.
std::shared_ptr<Pool> pool() {
  if (g_shut_down) return nullptr;
  Settings& s = settings();
  std::lock_guard<std::mutex> lock(s.mu);
  int n = threads_locked(s);
  if (n <= 1) return nullptr;
  if (!s.pool || s.pool->workers() != n - 1) s.pool = std::make_shared<Pool>(n - 1);
  return s.pool;
}

// The state one run_steps call shares with the helpers it posted. Helpers hold it by shared_ptr and
// may start after the call returned: they then see `done` and leave without touching g, small_step or
// run.
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
  std::set<int> small;  // run by anyone
  std::set<int> alone;  // run by the caller with nothing else in flight
  int in_flight = 0;
  size_t left = 0;
  std::exception_ptr error;
  bool done = false;
  // Bumped, under mu, by every change a waiting thread may be waiting for; read while spinning.
  std::atomic<unsigned> changes{0};
  int sleeping = 0;  // threads blocked on cv

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
    // Classifying reads the successors' inputs, written by now; in_flight still counts i, so the
    // caller does not think the run finished meanwhile.
    std::vector<bool> alone_flags;
    for (int s : ready) alone_flags.push_back(is_alone(s));
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (size_t k = 0; k < ready.size(); ++k) (alone_flags[k] ? alone : small).insert(ready[k]);
      --in_flight;
      if (!ep) --left;
      wake = changed();
    }
    if (wake) cv.notify_all();
  }

  // With mu held: records a change; whether a thread sleeps on cv and must be woken.
  bool changed() {
    changes.fetch_add(1, std::memory_order_release);
    return sleeping > 0;
  }

  // With mu held by lock: returns once something changed, or spuriously; the caller checks again.
  // Spins first when `spin` (a helper does not while a large step waits for every core: it would
  // take one from that step).
  void wait(std::unique_lock<std::mutex>& lock, bool spin) {
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

  void help() {
    GradMode::set(grad);
    MemoryCategoryScope scope(category);
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      if (done || error || left == 0) return;
      if (alone.empty() && !small.empty()) {
        int i = *small.begin();
        small.erase(small.begin());
        ++in_flight;
        lock.unlock();
        ++t_small_step;
        execute(i);
        --t_small_step;
        lock.lock();
        continue;
      }
      wait(lock, alone.empty());
    }
  }
};

}  // namespace

bool in_interop_worker() { return t_worker || t_small_step > 0; }

void run_steps(const StepGraph& g, const std::function<bool(int)>& small, const std::function<void(int)>& run) {
  std::shared_ptr<Pool> p = in_interop_worker() ? nullptr : pool();
  if (!p) {
    for (size_t i = 0; i < g.num_deps.size(); ++i) run(int(i));  // program order is a topological order
    return;
  }
  auto r = std::make_shared<Run>(g, small, run);
  for (size_t i = 0; i < g.num_deps.size(); ++i)
    if (g.num_deps[i] == 0) (r->is_alone(int(i)) ? r->alone : r->small).insert(int(i));
  for (int k = 0; k < p->workers(); ++k) p->post([r] { r->help(); });

  const int threads = omp_get_max_threads();
  std::unique_lock<std::mutex> lock(r->mu);
  for (;;) {
    if (r->in_flight == 0 && (r->error || r->left == 0)) break;
    if (!r->error && !r->alone.empty() && r->in_flight == 0) {
      int i = *r->alone.begin();
      r->alone.erase(r->alone.begin());
      ++r->in_flight;
      lock.unlock();
      r->execute(i);
      lock.lock();
      continue;
    }
    if (!r->error && r->alone.empty() && !r->small.empty()) {
      int i = *r->small.begin();
      r->small.erase(r->small.begin());
      ++r->in_flight;
      lock.unlock();
      omp_set_num_threads(1);
      ++t_small_step;
      r->execute(i);
      --t_small_step;
      omp_set_num_threads(threads);
      lock.lock();
      continue;
    }
    r->wait(lock, true);
  }
  r->done = true;
  std::exception_ptr error = r->error;
  bool wake = r->changed();
  lock.unlock();
  if (wake) r->cv.notify_all();
  if (error) std::rethrow_exception(error);
}

}  // namespace interp

void set_num_interop_threads(int n) {
  if (n < 1) fail("set_num_interop_threads: expected a positive count, got {}", n);
  std::shared_ptr<interp::Pool> old;
  interp::Settings& s = interp::settings();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.threads = n;
    if (s.pool && s.pool->workers() != n - 1) old = std::move(s.pool);
  }
  // `old` joins here, outside the lock; a run still holding it keeps it until it returns.
}

int get_num_interop_threads() { return interp::threads(interp::settings()); }

}  // namespace kiln
