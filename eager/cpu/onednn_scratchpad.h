#pragma once
// oneDNN's own scratchpad (its "library" mode, as Debian builds it: DNNL_ENABLE_CONCURRENT_EXEC off) is one
// buffer shared by every primitive, and a primitive may then run only on the thread that created it. kiln's
// cached primitives run on whichever thread calls them — the inter-op scheduler runs two branches' GEMMs of
// one shape at once — so they are made with a user scratchpad and each execution brings its thread's own.
// Include only where KILN_HAVE_DNNL.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include <dnnl.hpp>

namespace kiln::cpu {

inline dnnl::primitive_attr user_scratchpad(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Adds this thread's scratchpad for one execution of a primitive whose scratchpad is `desc`. The buffer is
// kept between calls (fresh memory costs a page fault per 4 KiB) and grows when a primitive needs more.
inline void add_scratchpad(std::unordered_map<int, dnnl::memory>& args, const dnnl::memory::desc& desc, const dnnl::engine& eng) {
  size_t n = desc.get_size();
  if (n == 0) return;
  thread_local std::unique_ptr<void, decltype(&std::free)> buf(nullptr, &std::free);
  thread_local size_t have = 0;
  if (have < n) {
    have = (n + 63) / 64 * 64;
    buf.reset(std::aligned_alloc(64, have));
    if (!buf) throw std::bad_alloc();
  }
  args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(desc, eng, buf.get()));
}

}  // namespace kiln::cpu
