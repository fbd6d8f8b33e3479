#pragma once
// The text of the kiln::Error that fn raises, "" when it raises none: for the tests that check several
// parts of one message, and for the multi-process programs in tests/dist, which run without doctest.
#include <functional>
#include <string>

#include "core/error.h"

namespace kiln::test {

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace kiln::test
