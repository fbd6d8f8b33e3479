#include "jit/pass_manager.h"

#include "core/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/ir/verifier.h"
#include "jit/passes/passes.h"

namespace kiln::jit {

const std::vector<Pass>& all_passes() {
  static const std::vector<Pass> passes = {
      {"shape_prop", "dtypes and shapes from the inputs, symbolic dims kept", propagate_shapes},
      {"fold_shapes", "a script's shape arithmetic on known dims: constants, typed views, asserts dropped", fold_shapes},
      {"constant_fold", "evaluates nodes whose inputs are all constants", fold_constants},
      {"simplify", "x+0, x*1, x/1, neg(neg x), x-x and x*0 for integers, view chains", simplify_algebra},
      {"pool_before_relu", "max_pool2d(relu(x)) -> relu(max_pool2d(x)): relu on the pooled size", pool_before_relu},
      {"fuse_attention", "softmax(masked_fill(q @ k^T * s, mask, -inf)) @ v written out -> one flash_attention",
       fuse_attention},
      {"join_slice_backward", "slice_backwards summed over pieces that tile a dim -> one cat", join_slice_backward},
      {"gather_first", "gather(a - row, i) -> gather(a, i) - row: a loss's log-probabilities gathered, not all written",
       gather_first},
      {"cse", "merges equal pure nodes", eliminate_common_subexpressions},
      {"licm", "hoists loop-invariant nodes out of prim::Loop bodies", hoist_loop_invariants},
      {"dce", "removes pure nodes whose results are unused", eliminate_dead_code},
      {"fuse_gemm_epilogue", "float32 matmul by a matrix + bias/relu/gelu/residual epilogue into one GEMM call",
       fuse_gemm_epilogue},
      {"fuse_conv_backward", "conv2d's input, weight and bias gradients of one gradient into one pass over it",
       fuse_conv_backward},
      {"fuse_scatter_zeros", "scatter_add into a zero constant writes its result once, no copy of the zeros",
       fuse_scatter_zeros},
      {"fuse_vertical", "elementwise chains (and a trailing reduction) into fusion groups",
       [](ir::Graph& g) { return fuse_vertical(g); },
       [](ir::Graph& g, const PipelineOptions& o) { return fuse_vertical(g, o.backend); }},
      {"fuse_horizontal", "independent groups over one iteration space into one kernel",
       [](ir::Graph& g) { return fuse_horizontal(g); },
       [](ir::Graph& g, const PipelineOptions& o) { return fuse_horizontal(g, o.backend); }},
      {"gelu_shares_erf", "gelu(x) in a group that saves its derivative reuses the derivative's erf", gelu_shares_erf},
      {"memory_report", "reports the peak with liveness-based buffer reuse (the executor frees dead values)", report_memory},
  };
  return passes;
}

const Pass& find_pass(const std::string& name) {
  std::string known;
  for (const Pass& p : all_passes()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  fail("jit: unknown pass '{}' (passes: {})", name, known);
}

std::vector<PassStats> run_pipeline(ir::Graph& g, const PipelineOptions& o) {
  std::string dump = o.dump_after;
  if (dump.empty())
    if (const char* env = std::getenv("KILN_DUMP_AFTER")) dump = env;
  if (!dump.empty() && dump != "all") find_pass(dump);
  if (!o.stop_after.empty()) find_pass(o.stop_after);
  for (const std::string& d : o.disable) find_pass(d);
  std::vector<PassStats> stats;
  for (const Pass& p : all_passes()) {
    bool skip = std::find(o.disable.begin(), o.disable.end(), p.name) != o.disable.end();
    bool is_fusion = std::string_view(p.name).rfind("fuse_", 0) == 0;
    if (!skip && !(is_fusion && !o.fuse)) {
      auto t0 = std::chrono::steady_clock::now();
      PassResult r = p.run_with_options ? p.run_with_options(g, o) : p.run(g);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      try {
        ir::verify(g);
      } catch (const Error& e) {
        fail("jit: the graph is broken after pass {}: {}\n{}", p.name, e.what(), g.str());
      }
      stats.push_back({p.name, r.changes, ms, r.note});
      kiln::logger().debug("jit pass {}: {} changes in {:.3f} ms{}", p.name, r.changes, ms, r.note.empty() ? "" : "; " + r.note);
      if (dump == p.name || dump == "all") std::fprintf(stderr, "# after %s\n%s", p.name, g.str().c_str());
    }
    if (o.stop_after == p.name) break;
  }
  return stats;
}

}  // namespace kiln::jit
