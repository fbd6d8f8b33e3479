#pragma once
// kiln::Error: the one exception type; messages are lowercase, name the op and carry the facts.
#include <stdexcept>
#include <string>
#include <fmt/format.h>

namespace kiln {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kiln

#define KILN_CHECK(cond, ...)                   \
  do {                                          \
    if (!(cond)) ::kiln::fail(__VA_ARGS__);     \
  } while (0)
