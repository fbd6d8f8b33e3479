// libFuzzer target: arbitrary bytes through the script lexer, parser and lowering (names, types, op
// signatures). Every input must end in a graph or a kiln::Error; a crash, hang or leak is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "script_frontend/script.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    kiln::script::check_source(text, "fuzz.py");
  } catch (const kiln::Error&) {
  }
  return 0;
}
