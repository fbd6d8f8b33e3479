#pragma once
// The libraries kiln opens at run time (the CUDA driver, NVRTC, cuBLAS, NCCL) load on first use, once:
// `load` runs a single time, and a failure is kept and raised again, with the same text, on every later
// use instead of retrying dlopen on each call. One cache per call site (each passes its own lambda).
#include <mutex>
#include <string>

#include "core/error.h"

namespace kiln {

template <class Api, class Load>
const Api& load_once(Load load) {
  static std::once_flag once;
  static Api api;
  static std::string error;
  std::call_once(once, [&] {
    try {
      api = load();
    } catch (const Error& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw Error(error);
  return api;
}

}  // namespace kiln
