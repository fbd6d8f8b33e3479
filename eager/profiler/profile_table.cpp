// Profiler::table: the text report (ops, scopes, memory by category).
#include <algorithm>

#include <fmt/format.h>

#include "eager/profiler/profiler.h"

namespace kiln {
namespace {

// 3 significant digits with an SI prefix: "812", "1.23 M", "45.6 G".
std::string si(int64_t n) {
  static const char* prefix[] = {"", " k", " M", " G", " T", " P"};
  double v = double(n);
  int p = 0;
  while (v >= 1000 && p < 5) v /= 1000, ++p;
  if (p == 0) return fmt::format("{}", n);
  return fmt::format("{:.{}f}{}", v, v < 10 ? 2 : v < 100 ? 1 : 0, prefix[p]);
}

std::string bytes(int64_t n) {
  double v = double(n);
  if (v < 1024) return fmt::format("{} B", n);
  if (v < 1024 * 1024) return fmt::format("{:.1f} KiB", v / 1024);
  if (v < 1024.0 * 1024 * 1024) return fmt::format("{:.2f} MiB", v / (1024 * 1024));
  return fmt::format("{:.2f} GiB", v / (1024.0 * 1024 * 1024));
}

double ms(int64_t ns) { return double(ns) / 1e6; }

}  // namespace

std::string Profiler::table() const {
  std::vector<OpProfile> rows = ops();
  int64_t total_ns = 0, total_count = 0;
  for (const OpProfile& r : rows) total_ns += r.total_ns, total_count += r.count;
  int64_t flops = total_flops();
  auto label = [](const OpProfile& r) { return r.kernel ? r.name + " (jit)" : r.name; };
  size_t w = 28;  // fused kernels' names are long: the column widens to the longest
  for (const OpProfile& r : rows) w = std::max(w, label(r).size() + 2);
  std::string out = fmt::format("{:<{}}{:>8}{:>12}{:>11}{:>8}{:>10}\n", "op", w, "calls", "FLOPs", "time ms", "time %",
                                "GFLOP/s");
  auto gflops = [](int64_t f, int64_t ns) { return ns > 0 ? fmt::format("{:.2f}", double(f) / double(ns)) : "-"; };
  for (const OpProfile& r : rows)
    out += fmt::format("{:<{}}{:>8}{:>12}{:>11.3f}{:>8.1f}{:>10}\n", label(r), w, r.count, si(r.flops), ms(r.total_ns),
                       total_ns > 0 ? 100.0 * double(r.total_ns) / double(total_ns) : 0.0, gflops(r.flops, r.total_ns));
  out += fmt::format("{:<{}}{:>8}{:>12}{:>11.3f}{:>8}{:>10}\n", "total", w, total_count, si(flops), ms(total_ns), "",
                     gflops(flops, total_ns));

  std::vector<ScopeProfile> sc = scopes();
  if (!sc.empty()) {
    out += fmt::format("\n{:<44}{:>8}{:>12}{:>11}\n", "scope", "calls", "FLOPs", "time ms");
    for (const ScopeProfile& s : sc)
      out += fmt::format("{:<44}{:>8}{:>12}{:>11.3f}\n", s.path, s.count, si(s.flops), ms(s.total_ns));
  }

  MemoryProfile m = memory();
  out += fmt::format("\n{:<28}{:>14}{:>8}{:>14}\n", "host memory", "at peak", "%", "at end");
  for (int c = 0; c < kNumMemoryCategories; ++c)
    out += fmt::format("{:<28}{:>14}{:>8.1f}{:>14}\n", memory_category_name(MemoryCategory(c)), bytes(m.at_peak[size_t(c)]),
                       m.peak_bytes > 0 ? 100.0 * double(m.at_peak[size_t(c)]) / double(m.peak_bytes) : 0.0,
                       bytes(m.current[size_t(c)]));
  out += fmt::format("{:<28}{:>14}{:>8}{:>14}\n", "total (allocator)", bytes(m.peak_bytes), "", bytes(m.current_bytes));
  return out;
}

}  // namespace kiln
