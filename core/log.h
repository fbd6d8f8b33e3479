#pragma once
// kiln's log lines (a recompilation, a declined fast path, a missing CPU feature) go through one spdlog
// logger named "kiln" that writes to stderr, so a program's stdout stays its own (spdlog's default
// logger writes to stdout; kiln's lines once corrupted a benchmark's JSON there). Its level comes from
// KILN_LOG_LEVEL: trace, debug, info (the default), warn, error, critical or off. A program that
// registers its own logger named "kiln" (spdlog::register_logger) before kiln first logs gets kiln's
// lines on that logger instead.
#include <spdlog/spdlog.h>

namespace kiln {

spdlog::logger& logger();

}  // namespace kiln
