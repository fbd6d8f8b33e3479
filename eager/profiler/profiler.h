#pragma once
// kiln::Profiler: what ran on this thread while it recorded, how often, how long and how many FLOPs,
// per op and per scope (nn::Module forwards, backward, optimizer steps); and what host memory was for
// at the allocator's peak. Recording starts at construction and ends at stop() or destruction:
//
//   kiln::Profiler prof;
//   loss = cross_entropy((*model)(x), y); loss.backward(); opt.step();
//   prof.stop();
//   std::cout << prof.table();
//   prof.save_chrome_trace("step.json");   // chrome://tracing or ui.perfetto.dev
//
// Starting a profiler resets the allocator's peak (reset_peak_memory_stats), so the peak is this run's.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/memory_category.h"

namespace kiln {

struct OpProfile {
  std::string name;       // the op table's name ("matmul"), or a compiled kernel's ("fused_sub_exp_sum")
  bool kernel = false;    // a compiled kernel of a JIT-compiled function rather than an op of the table
  int64_t count = 0;
  int64_t flops = 0;
  int64_t total_ns = 0;   // kernel and autograd recording; host time (GPU launches are asynchronous)
};

// A scope by its path: "Sequential", "Sequential.0 (Linear)", "backward", "Adam.step".
struct ScopeProfile {
  std::string path;
  int64_t count = 0;
  int64_t flops = 0;      // of every op run inside, nested scopes included
  int64_t total_ns = 0;   // wall time inside
};

// Host (CPU allocator) memory by category. Each split sums exactly to its total.
struct MemoryProfile {
  int64_t peak_bytes = 0;
  std::array<int64_t, kNumMemoryCategories> at_peak{};
  int64_t current_bytes = 0;  // when recording stopped
  std::array<int64_t, kNumMemoryCategories> current{};
};

// One op or scope in time, for the Chrome trace.
struct ProfileEvent {
  std::string name;
  int64_t start_ns = 0, dur_ns = 0;  // from the profiler's start
  int64_t flops = 0;
  std::string shapes;   // ops: the input shapes, "[64,64] [64,128]"
  std::string scope;    // ops: the innermost scope's path
  bool is_scope = false;
  bool is_kernel = false;  // a compiled kernel (OpProfile::kernel)
  std::array<int64_t, kNumMemoryCategories> memory{};  // ops: live bytes by category after the op
};

class Profiler {
 public:
  Profiler();  // records ops on this thread from now on; a profiler started inside another takes over until it stops
  ~Profiler();
  Profiler(Profiler&&) noexcept;
  Profiler& operator=(Profiler&&) noexcept;

  void stop();  // idempotent; results stay readable
  bool recording() const;

  std::vector<OpProfile> ops() const;        // ops and compiled kernels by total time, longest first
  std::vector<ScopeProfile> scopes() const;  // in order of first entry
  MemoryProfile memory() const;              // live figures while recording
  int64_t total_flops() const;
  const std::vector<ProfileEvent>& events() const;

  std::string table() const;  // ops, scopes and memory as fixed-width text
  // Chrome trace JSON (complete "X" events in microseconds; args carry flops, shapes and the scope),
  // with memory by category as counter tracks.
  void save_chrome_trace(const std::string& path) const;
  std::string chrome_trace() const;

  struct State;

 private:
  std::unique_ptr<State> s_;
};

// Runs fn under a profiler and returns it stopped.
Profiler profile(const std::function<void()>& fn);

}  // namespace kiln
