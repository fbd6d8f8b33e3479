#pragma once
// The tracer's view of the runtime. While a trace runs on this thread, the dispatcher reports each
// op to the hooks, in-place methods report what they overwrote, and Tensor reports reads of a
// value into C++ (item(), data pointers, sizes used as numbers): the reads that make a trace
// specialise to its sample inputs. Null (one thread-local load) when nobody traces.
#include <cstdint>
#include <vector>

namespace kiln {

class Tensor;
class Attrs;
struct TensorImpl;
enum class OpId : uint16_t;

enum class TraceRead : uint8_t { Item, Data, Size };

struct TraceHooks {
  // > 0 while kernels and library-internal checks run: their reads do not leak into user code.
  int quiet = 0;
  virtual ~TraceHooks() = default;
  virtual void on_op(OpId op, const std::vector<Tensor>& inputs, const Attrs& attrs, std::vector<Tensor>& outputs) = 0;
  // `self` was overwritten in place with the value of `result` (an op output the hooks have seen).
  virtual void on_inplace(const char* method, const Tensor& self, const Tensor& result) = 0;
  virtual void on_read(const TensorImpl* impl, TraceRead what) = 0;
  // `alias` was made from `base` outside the dispatcher (detach): the same graph value.
  virtual void on_alias(const Tensor& base, const Tensor& alias) = 0;
  // `result` holds fresh random numbers drawn by a factory: rand_like(*like) when like is given (a
  // graph's prim::rand_like, drawn again at each call), else a factory with a fixed shape (rand, randn,
  // randint), whose numbers a trace can only keep as a constant.
  virtual void on_random(const char* factory, const Tensor* like, const Tensor& result) = 0;
};

namespace detail {
// initial-exec: libkiln is linked, not dlopen'd, so the load is one fs-relative move on the hot path.
extern thread_local TraceHooks* t_trace_hooks __attribute__((tls_model("initial-exec")));
}  // namespace detail

inline TraceHooks* trace_hooks() { return detail::t_trace_hooks; }
// Installs hooks for this thread; returns the previous ones (traces nest by restoring them).
TraceHooks* set_trace_hooks(TraceHooks* hooks);

inline void note_trace_read(const TensorImpl* impl, TraceRead what) {
  if (TraceHooks* h = detail::t_trace_hooks; h && h->quiet == 0) h->on_read(impl, what);
}

// Marks reads that are the library's own business (kernels, argument checks), not user control flow.
class QuietTraceReads {
 public:
  QuietTraceReads() : h_(detail::t_trace_hooks) { if (h_) ++h_->quiet; }
  ~QuietTraceReads() { if (h_) --h_->quiet; }
  QuietTraceReads(const QuietTraceReads&) = delete;
  QuietTraceReads& operator=(const QuietTraceReads&) = delete;

 private:
  TraceHooks* h_;
};

}  // namespace kiln
