#pragma once
// The side-by-side benches' clock: the median of repeated runs, in wall time or, with cpu_time() set
// (their --cpu-time), this thread's CPU time, which a loaded machine inflates far less than wall time
// (valid at 1 thread, where every kernel runs on the calling thread).
#include <time.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace kiln::bench {

inline bool& cpu_time() {
  static bool on = false;
  return on;
}

inline double now_ms() {
  timespec ts;
  clock_gettime(cpu_time() ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

// The median of `reps` runs of fn, in milliseconds, after `warmup` runs.
inline double median_ms(int warmup, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    double t0 = now_ms();
    fn();
    ms.push_back(now_ms() - t0);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// An eager training step's median: the loss, zero_grad, backward and the optimizer's step.
template <class Loss, class Optimizer>
double eager_step_ms(int reps, Loss&& loss, Optimizer& opt) {
  return median_ms(2, reps, [&] {
    auto l = loss();
    opt.zero_grad();
    l.backward();
    opt.step();
  });
}

}  // namespace kiln::bench
