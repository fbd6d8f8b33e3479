#include "backends/interp/demand_schedule.h"

#include <algorithm>

#include "backends/interp/input_reads.h"
#include "backends/interp/interpreter_plan.h"

namespace kiln::interp {

DemandSchedule::DemandSchedule(const Plan& plan, const std::vector<IValue>& inputs, size_t caller_results) {
  if (!any_on_demand()) return;
  std::vector<std::vector<size_t>> inputs_of;  // per owner: the graph inputs on its storages
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].is_tensor() || !inputs[i].to_tensor().defined()) continue;
    std::optional<OnDemand> d = on_demand(inputs[i].to_tensor().storage().get());
    if (!d) continue;
    size_t k = 0;
    while (k < owners_.size() && !(owners_[k].owner == d->owner && owners_[k].key == d->key)) ++k;
    if (k == owners_.size()) {
      owners_.push_back(std::move(*d));
      inputs_of.emplace_back();
    }
    inputs_of[k].push_back(i);
  }
  if (owners_.empty()) return;
  const std::vector<InputReads>& reads = plan.input_reads();
  size_t steps = plan.block_plan(*plan.graph().block()).steps.size();
  used_.resize(steps);
  for (size_t k = 0; k < owners_.size(); ++k) {
    std::vector<size_t> at;
    bool returned = false;
    for (size_t i : inputs_of[k]) {
      at.insert(at.end(), reads[i].steps.begin(), reads[i].steps.end());
      for (size_t r : reads[i].results) returned = returned || r < caller_results;
    }
    if (at.empty()) continue;
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    for (size_t s : at) used_[s].emplace_back(k, s == at.back() && !returned);
  }
}

// Before every step reading it, not only the first: a run nested in this one (a step that runs another graph
// over the same memory) hands it back after its own last read, and acquiring what is held costs nothing.
void DemandSchedule::before(size_t step) {
  for (const auto& read : used_[step]) owners_[read.first].owner->acquire(owners_[read.first].key);
}

void DemandSchedule::after(size_t step, const std::vector<Tensor>& outputs) {
  for (auto [k, last] : used_[step]) owners_[k].owner->used(owners_[k].key, outputs, last);
}

}  // namespace kiln::interp
