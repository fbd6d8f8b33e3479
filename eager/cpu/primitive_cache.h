#pragma once
// oneDNN primitives cached by everything they were specialised for (shapes, layouts, thread count):
// creating one costs milliseconds (oneDNN generates its kernels then), running one microseconds.
// Shapes that keep changing (a symbolic batch dim) would grow a cache without bound, so a full one
// starts over, which costs one creation per live layout.
#include <cstddef>
#include <memory>
#include <mutex>

namespace kiln::cpu {

template <class Map>  // key -> std::shared_ptr<const Primitive>
class PrimitiveCache {
 public:
  using Key = typename Map::key_type;
  using Ptr = typename Map::mapped_type;
  explicit PrimitiveCache(size_t max) : max_(max) {}

  // The cached primitive for k, else create()'s, cached; what create() throws (oneDNN declining the
  // layout) reaches the caller and nothing is cached.
  template <class Create>
  Ptr get(const Key& k, Create&& create) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = map_.find(k); it != map_.end()) return it->second;
    }
    Ptr p = create();
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= max_) map_.clear();
    map_.emplace(k, p);
    return p;
  }

 private:
  std::mutex mu_;
  Map map_;
  size_t max_;
};

}  // namespace kiln::cpu
