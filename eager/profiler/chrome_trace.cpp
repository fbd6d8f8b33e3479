// Profiler::chrome_trace: the Trace Event Format that chrome://tracing and Perfetto open. Ops and
// scopes are complete events ("ph":"X", ts and dur in microseconds) on one thread, so scopes nest
// around their ops; host memory by category is a counter track ("ph":"C") sampled after each op.
#include <fstream>

#include <fmt/format.h>

#include "core/error.h"
#include "eager/profiler/profiler.h"

namespace kiln {
namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", int(c));
    else out += c;
  }
  return out + "\"";
}

double us(int64_t ns) { return double(ns) / 1e3; }

}  // namespace

std::string Profiler::chrome_trace() const {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out += R"({"name":"process_name","ph":"M","pid":1,"tid":1,"args":{"name":"kiln"}})";
  for (const ProfileEvent& e : events()) {
    out += fmt::format(",\n{{\"name\":{},\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{:.3f},\"dur\":{:.3f},\"pid\":1,\"tid\":1",
                       json_string(e.name), e.is_scope ? "scope" : e.is_kernel ? "kernel" : "op", us(e.start_ns), us(e.dur_ns));
    if (e.is_scope) {
      out += "}";
      continue;
    }
    out += fmt::format(",\"args\":{{\"flops\":{},\"shapes\":{},\"scope\":{}}}}}", e.flops, json_string(e.shapes),
                       json_string(e.scope));
    out += fmt::format(",\n{{\"name\":\"host memory\",\"ph\":\"C\",\"ts\":{:.3f},\"pid\":1,\"args\":{{",
                       us(e.start_ns + e.dur_ns));
    for (int c = 0; c < kNumMemoryCategories; ++c)
      out += fmt::format("{}{}:{}", c ? "," : "", json_string(memory_category_name(MemoryCategory(c))), e.memory[size_t(c)]);
    out += "}}";
  }
  out += "\n]}\n";
  return out;
}

void Profiler::save_chrome_trace(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("save_chrome_trace: cannot open {} for writing", path);
  f << chrome_trace();
  if (!f) fail("save_chrome_trace: writing {} failed", path);
}

}  // namespace kiln
