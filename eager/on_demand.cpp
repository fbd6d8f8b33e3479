#include "eager/on_demand.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace kiln {

namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<const Storage*, std::pair<std::weak_ptr<OnDemandOwner>, size_t>> owners;
  std::atomic<size_t> size{0};
};

Registry& registry() {
  static Registry* r = new Registry;  // outlives static owners destroyed at exit
  return *r;
}

}  // namespace

void set_on_demand(const Storage* s, const std::weak_ptr<OnDemandOwner>& owner, size_t key) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (owner.expired()) r.owners.erase(s);
  else r.owners[s] = {owner, key};
  r.size.store(r.owners.size(), std::memory_order_release);
}

std::optional<OnDemand> on_demand(const Storage* s) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.owners.find(s);
  if (it == r.owners.end()) return std::nullopt;
  auto owner = it->second.first.lock();
  if (!owner) return std::nullopt;
  return OnDemand{std::move(owner), it->second.second};
}

bool any_on_demand() { return registry().size.load(std::memory_order_acquire) != 0; }

}  // namespace kiln
