#pragma once
// The pass manager: named passes run in order with the verifier between them, a dump of the graph
// after any pass (KILN_DUMP_AFTER=cse, or `kiln ir FILE FUNC --after cse`), and per-pass statistics.
#include <functional>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "jit/group_kernel.h"

namespace kiln::jit {

struct PipelineOptions;

struct PassResult {
  int64_t changes = 0;  // nodes removed, replaced, moved or fused
  std::string note;     // e.g. the memory plan's figures
};

struct Pass {
  const char* name;
  const char* summary;
  std::function<PassResult(ir::Graph&)> run;
  // For passes that depend on the options (the fusion passes ask options.backend what it can fuse);
  // run_pipeline prefers it to `run`.
  std::function<PassResult(ir::Graph&, const PipelineOptions&)> run_with_options = {};
};

struct PassStats {
  std::string name;
  int64_t changes;
  double ms;
  std::string note;
};

// Every pass, in pipeline order.
const std::vector<Pass>& all_passes();
const Pass& find_pass(const std::string& name);  // raises naming the known passes

struct PipelineOptions {
  // Stop after this pass (empty: run all); `kiln ir --after`.
  std::string stop_after;
  // Skip these passes. gather_first is off unless asked for: after it a cross-entropy's row max is read outside
  // its row group as well, and fuse_vertical then leaves it a kernel of its own (tests/test_row_kernels.cpp).
  std::vector<std::string> disable = {"gather_first"};
  // Print the graph after this pass to stderr; default from KILN_DUMP_AFTER.
  std::string dump_after;
  bool fuse = true;
  // The backend the fusion groups are built for (its can_fuse); null: backends::default_fusion_rules().
  const Backend* backend = nullptr;
};

std::vector<PassStats> run_pipeline(ir::Graph& g, const PipelineOptions& options = {});

}  // namespace kiln::jit
