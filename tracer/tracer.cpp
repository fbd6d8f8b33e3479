// The trace context: a TraceHooks implementation that turns the dispatcher's reports into graph
// nodes, keyed by TensorImpl.
#include <spdlog/spdlog.h>

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "core/ir/verifier.h"
#include "eager/autograd/graph.h"
#include "eager/nn/module.h"
#include "eager/ops.h"
#include "tracer/recorder.h"
#include "tracer/trace.h"

namespace kiln {

namespace {

using tracing::Recorder;
using tracing::TraceScope;

std::string close_mismatch(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.dtype() != b.dtype()) return fmt::format("dtype {} vs {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  if (a.sizes() != b.sizes()) return fmt::format("shape {} vs {}", shape_str(a.sizes()), shape_str(b.sizes()));
  Tensor x = a.to(DType::Float64).contiguous(), y = b.to(DType::Float64).contiguous();
  const double* p = x.data_ptr<double>();
  const double* q = y.data_ptr<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool same = p[i] == q[i] || (std::isnan(p[i]) && std::isnan(q[i])) ||
                std::abs(p[i] - q[i]) <= atol + rtol * std::abs(q[i]);
    if (!same) return fmt::format("element {}: traced {} vs eager {}", i, p[i], q[i]);
  }
  return {};
}

void check_trace(const Function& f, const TracedFn& fn, const TraceOptions& o) {
  for (size_t k = 0; k < o.check_inputs.size(); ++k) {
    const auto& ins = o.check_inputs[k];
    std::vector<Tensor> eager = fn(ins);
    std::vector<Tensor> traced = f(ins);
    if (eager.size() != traced.size())
      fail("trace {}: check_inputs[{}]: the trace returns {} outputs, eager code {}", f.name(), k, traced.size(),
           eager.size());
    for (size_t i = 0; i < eager.size(); ++i) {
      std::string diff = close_mismatch(traced[i], eager[i], o.check_rtol, o.check_atol);
      if (!diff.empty())
        fail("trace {}: check_inputs[{}]: output {} differs between the trace and eager execution ({}); the traced "
             "code likely depends on values or shapes the trace baked in",
             f.name(), k, i, diff);
    }
  }
}

Function run_trace(const TracedFn& fn, const std::vector<Tensor>& sample_inputs, const TraceOptions& o,
                   const std::vector<std::pair<std::string, Tensor>>& state) {
  if (!fn) fail("trace: no function given");
  if (!o.input_names.empty() && o.input_names.size() != sample_inputs.size())
    fail("trace: {} input names for {} inputs", o.input_names.size(), sample_inputs.size());
  Recorder tracer(o.name, o.quiet);
  tracer.set_guard_value_reads(o.guard_value_reads);
  for (size_t i = 0; i < sample_inputs.size(); ++i)
    tracer.add_input(sample_inputs[i], o.input_names.empty() ? fmt::format("x{}", i) : o.input_names[i]);
  std::vector<Tensor> bound;
  for (const auto& [name, t] : state) {
    tracer.add_input(t, name);
    bound.push_back(t);
  }
  std::vector<Tensor> outs;
  {
    TraceScope scope(tracer);
    outs = fn(sample_inputs);
  }
  Function f = tracer.finish(outs, std::move(bound));
  check_trace(f, fn, o);
  return f;
}

}  // namespace

Function trace(const TracedFn& fn, const std::vector<Tensor>& sample_inputs, TraceOptions options) {
  return run_trace(fn, sample_inputs, options, {});
}

Function trace_module(nn::Module& m, const TracedFn& fn, const std::vector<Tensor>& sample_inputs,
                      TraceOptions options) {
  std::vector<std::pair<std::string, Tensor>> state = m.named_parameters();
  for (auto& b : m.named_buffers()) state.push_back(b);
  return run_trace(fn, sample_inputs, options, state);
}

}  // namespace kiln
