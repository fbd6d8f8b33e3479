#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <string_view>
#include <utility>

namespace kiln {

spdlog::logger& logger() {
  static const std::shared_ptr<spdlog::logger> kiln_logger = [] {
    if (auto mine = spdlog::get("kiln")) return mine;
    auto l = spdlog::stderr_color_mt("kiln");
    const char* env = std::getenv("KILN_LOG_LEVEL");
    if (!env || !*env) return l;
    // Our own table: spdlog::level::from_str reads an unknown name as "off", which would hide the very
    // warning that the setting is wrong.
    using spdlog::level::level_enum;
    static constexpr std::pair<std::string_view, level_enum> kLevels[] = {
        {"trace", level_enum::trace}, {"debug", level_enum::debug}, {"info", level_enum::info},
        {"warn", level_enum::warn},   {"warning", level_enum::warn}, {"error", level_enum::err},
        {"critical", level_enum::critical}, {"off", level_enum::off}};
    for (const auto& [name, level] : kLevels)
      if (name == env) {
        l->set_level(level);
        return l;
      }
    l->warn("KILN_LOG_LEVEL={} is not a level (trace, debug, info, warn, error, critical, off); logging at info",
            env);
    return l;
  }();
  return *kiln_logger;
}

}  // namespace kiln
