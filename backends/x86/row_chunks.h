#pragma once
// Rows split into one contiguous chunk per thread, as the x86 kernels split reductions and row kernels:
// parallel only when the caller says the work is worth it and there is more than one row.
#include <algorithm>
#include <cstdint>

namespace kiln::x86 {

template <class F>
void for_row_chunks(int threads, bool worth_it, int64_t rows, F&& do_rows) {
  if (threads > 1 && worth_it && rows > 1) {
    int chunks = int(std::min<int64_t>(threads, rows));
#pragma omp parallel for num_threads(chunks) schedule(static)
    for (int c = 0; c < chunks; ++c) do_rows(rows * c / chunks, rows * (c + 1) / chunks);
  } else {
    do_rows(0, rows);
  }
}

}  // namespace kiln::x86
