#pragma once
// A run's inputs whose memory an owner fills on demand (eager/on_demand.h): the owners are asked to
// acquire each before every top-level step reading it (input_reads.h) and told after each such step, the
// last one marked, so a graph holds such memory only between its first and last read, and a nested run
// that handed it back early costs the outer run a second acquire, not a read of released memory.
#include <cstddef>
#include <utility>
#include <vector>

#include "backends/interp/interpreter.h"
#include "eager/on_demand.h"

namespace kiln::interp {

class DemandSchedule {
 public:
  // Empty (no look-ups) unless some storage is registered. Results from `caller_results` on go only to
  // other graph runs, which acquire what they read: memory they alone share with the caller is handed back.
  DemandSchedule(const Plan& plan, const std::vector<IValue>& inputs, size_t caller_results);
  bool empty() const { return owners_.empty(); }
  void before(size_t step);
  void after(size_t step, const std::vector<Tensor>& outputs);

 private:
  std::vector<OnDemand> owners_;  // one per (owner, key) read by the run
  std::vector<std::vector<std::pair<size_t, bool>>> used_;  // per step: owners_ it reads, and whether last
};

}  // namespace kiln::interp
