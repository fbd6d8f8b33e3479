// The CUDA kernels behind dispatch: elementwise rows, where and copies through rendered elementwise
// kernels, the reductions through rendered reduce kernels, matmul through cuBLAS, views as the CPU's
// (pure metadata), and a clear error for the rows with no CUDA kernel yet.
#include "backends/cuda/kernels.h"


#include <algorithm>
#include <array>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "backends/cuda/attention.h"
#include "backends/cuda/driver_api.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/launch_params.h"
#include "backends/cuda/runtime.h"
#include "core/device_runtime.h"
#include "core/type_promotion.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/reduce_dims.h"
#include "eager/cpu/strided_loop.h"
#include "eager/cpu/views.h"
#include "eager/dispatch.h"
#include "eager/kernels.h"
#include "eager/ops.h"

namespace kiln::cuda {
namespace {

static_assert(kMaxOperands == cpu::kMaxOperands && kMaxDims == cpu::kMaxDims);

constexpr int kThreads = 256;

bool is_half(DType t) { return t == DType::BFloat16 || t == DType::Float16; }

// Loaded functions per thread by (device, kernel name, variant): a kernel's name fixes its source, so
// the launch path renders, hashes and allocates nothing after the first call.
enum Variant { kPlain, kVector, kStrided };  // "<name>", "<name>_v", "<name>_s"
CUfunction function(int device, const std::string& name, Variant variant, const std::function<std::string()>& render) {
  thread_local std::vector<std::unordered_map<std::string, std::array<CUfunction, 3>>> tables;
  if (size_t(device) >= tables.size()) tables.resize(size_t(device) + 1);
  CUfunction& fn = tables[size_t(device)][name][variant];
  if (!fn) fn = function_for(device, render(), name + (variant == kVector ? "_v" : variant == kStrided ? "_s" : ""));
  return fn;
}

// Specs by (op, operand dtypes): building one formats its name, and every eager launch needs one.
template <class Make>
const ElementwiseSpec& cached_spec(uint64_t key, Make make) {
  thread_local std::unordered_map<uint64_t, ElementwiseSpec> specs;
  auto it = specs.find(key);
  if (it == specs.end()) it = specs.emplace(key, make()).first;
  return it->second;
}
uint64_t spec_key(OpId op, DType a, DType b = DType::Bool, DType c = DType::Bool) {
  return uint64_t(op) << 24 | uint64_t(a) << 16 | uint64_t(b) << 8 | uint64_t(c);
}

void launch(int device, CUfunction fn, void* params, int64_t work, int threads) {
  DeviceState& s = device_state(device);
  int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((work + threads - 1) / threads, int64_t(s.sm_count) * 32));
  void* args[] = {params};
  KILN_CU(cuLaunchKernel, fn, unsigned(blocks), 1, 1, unsigned(threads), 1, 1, 0, s.stream, args, nullptr);
}

Device device_of(const Tensors& in) {
  for (const Tensor& t : in)
    if (!t.device().is_cpu()) return t.device();
  return in.at(0).device();
}

// ---- elementwise rows ----

// The CPU kernels' dtype rules (core/type_promotion.h): the kernel computes in the row's compute type
// (float32 for the half types) and stores the row's result type.
ElementwiseSpec unary_spec_for(OpId op, DType in) {
  DType t = unary_compute_dtype(op, in);
  if (t == DType::Bool && op == OpId::Neg) fail("neg: negation of a bool tensor is not supported, use logical_not");
  return unary_spec(op, in, is_half(t) ? DType::Float32 : t, elementwise_out_dtype(op, t));
}

// `promoted`: torch.result_type of the operands.
ElementwiseSpec binary_spec_for(OpId op, DType a, DType b, DType promoted) {
  ResultTypeState st;
  st.add(promoted, false, false);
  DType t = binary_compute_dtype(op, st);
  if (op == OpId::Sub && (a == DType::Bool || b == DType::Bool))
    fail("sub: subtraction with a bool tensor is not supported, use logical_not to invert a mask");
  return binary_spec(op, a, b, is_half(t) ? DType::Float32 : t, elementwise_out_dtype(op, t));
}

Tensors unary(OpId op, const Tensors& in, const Attrs&) {
  const Tensor& x = in.at(0);
  const ElementwiseSpec& spec = cached_spec(spec_key(op, x.dtype()), [&] { return unary_spec_for(op, x.dtype()); });
  Tensor out = Tensor::empty(x.sizes(), spec.out, x.device());
  run_elementwise(spec, out, {&x});
  return {out};
}

Tensors binary(OpId op, const Tensors& in, const Attrs&) {
  Device dev = device_of(in);
  Shape shape = broadcast_shapes(op_name(op), in.at(0).sizes(), in.at(1).sizes());
  DType promoted = result_type(in[0], in[1]);
  const ElementwiseSpec& spec = cached_spec(spec_key(op, in[0].dtype(), in[1].dtype(), promoted),
                                            [&] { return binary_spec_for(op, in[0].dtype(), in[1].dtype(), promoted); });
  Tensor a = on_device(in[0], dev), b = on_device(in[1], dev);
  Tensor out = Tensor::empty(shape, spec.out, dev);
  run_elementwise(spec, out, {&a, &b});
  return {out};
}

Tensors where(OpId, const Tensors& in, const Attrs&) {
  Device dev = device_of(in);
  const Tensor& c0 = in.at(0);
  if (c0.dtype() != DType::Bool) fail("where: condition must be a bool tensor, got {}", dtype_name(c0.dtype()));
  Shape shape = broadcast_shapes("where", broadcast_shapes("where", c0.sizes(), in.at(1).sizes()), in.at(2).sizes());
  DType t = result_type(in[1], in[2]);
  Tensor c = on_device(c0, dev);
  Tensor a = on_device(in[1], dev), b = on_device(in[2], dev);
  if (a.dtype() != t) a = a.to(t);
  if (b.dtype() != t) b = b.to(t);
  Tensor out = Tensor::empty(shape, t, dev);
  run_elementwise(where_spec(t), out, {&c, &a, &b});
  return {out};
}

// ---- copies ----

Tensor copy_of(const Tensor& x, DType dtype) {
  Tensor out = Tensor::empty(x.sizes(), dtype, x.device());
  cuda::copy_into(out, x);
  return out;
}

Tensors contiguous(OpId, const Tensors& in, const Attrs&) {
  const Tensor& x = in.at(0);
  return {x.is_contiguous() ? x : copy_of(x, x.dtype())};
}
Tensors clone(OpId, const Tensors& in, const Attrs&) { return {copy_of(in.at(0), in.at(0).dtype())}; }
Tensors cast(OpId, const Tensors& in, const Attrs& attrs) {
  DType d = attrs.dtype("dtype");
  return {in.at(0).dtype() == d ? in.at(0) : copy_of(in.at(0), d)};
}

Tensors reshape(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x = in.at(0);
  Shape shape = cpu::infer_shape("reshape", attrs.ints("shape"), x.numel());
  if (auto st = cpu::view_strides(x, shape)) return {cpu::make_view(x, shape, *st, x.storage_offset())};
  Tensor c = copy_of(x, x.dtype());
  return {cpu::make_view(c, shape, contiguous_strides(shape), 0)};
}

// ---- reductions ----

using cpu::reduce_mask;
using cpu::reduced_shape;
using cpu::require_nonempty;

// Folds x over the masked dims into out (contiguous, kept dims in x's order).
void run_reduce(const ReduceSpec& spec, const Tensor& x, const std::vector<bool>& mask, const Tensor& out) {
  ReduceParams p{};
  p.nout = 1;
  p.nred = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    int64_t s = x.sizes()[size_t(d)], st = x.strides()[size_t(d)];
    if (mask[size_t(d)]) {
      p.rsizes[p.ndr] = s;
      p.rstrides[p.ndr++] = st;
      p.nred *= s;
    } else {
      p.ksizes[p.ndk] = s;
      p.kstrides[p.ndk++] = st;
      p.nout *= s;
    }
  }
  if (p.nout == 0) return;
  // Threads per output: enough to split long rows. When a kept dim is innermost in memory (a sum over
  // the batch dim), one thread per output instead makes neighbouring threads read neighbouring
  // addresses, and there are enough outputs to fill the GPU.
  int64_t min_red_stride = std::numeric_limits<int64_t>::max();
  for (int d = 0; d < p.ndr; ++d)
    if (p.rsizes[d] > 1) min_red_stride = std::min(min_red_stride, std::abs(p.rstrides[d]));
  bool columns = p.ndk > 0 && p.ksizes[p.ndk - 1] > 1 && std::abs(p.kstrides[p.ndk - 1]) < min_red_stride;
  int tpo = 1;
  if (!(columns && p.nout >= 4096))
    while (tpo < kThreads && tpo < p.nred) tpo *= 2;
  p.tpo = tpo;
  p.in = static_cast<char*>(x.raw_data());
  p.out = static_cast<char*>(out.raw_data());
  int dev = x.device().index;
  CUfunction fn = function(dev, spec.name, kPlain, [&] { return render_module({}, {spec}); });
  launch(dev, fn, &p, p.nout * tpo, kThreads);
}

// The reduction kernel for an input dtype, with the CPU kernels' types (eager/cpu/reduce.cpp): sums
// and products of bool and ints in int64; float32 and the half types sum in float64 and multiply in
// float32; max, min and the arg folds compare in the input type (float32 for the half types).
ReduceSpec reduce_spec_for(Fold fold, DType in) {
  bool fl = is_floating(in);
  switch (fold) {
    case Fold::Sum:
    case Fold::Prod: {
      DType acc = !fl ? DType::Int64 : in == DType::Float64 || fold == Fold::Sum ? DType::Float64 : DType::Float32;
      return reduce_spec(fold, in, acc, fl ? in : DType::Int64);
    }
    case Fold::Max:
    case Fold::Min: return reduce_spec(fold, in, is_half(in) ? DType::Float32 : in, in);
    case Fold::ArgMax:
    case Fold::ArgMin: return reduce_spec(fold, in, is_half(in) ? DType::Float32 : in, DType::Int64);
  }
  return reduce_spec(fold, in, in, in);
}

Tensor sum_like(OpId op, Fold fold, const Tensor& x, const Attrs& attrs) {
  auto mask = reduce_mask(op_name(op), x, attrs.has("dims") ? attrs.ints("dims") : Shape{});
  ReduceSpec spec = reduce_spec_for(fold, x.dtype());
  Tensor out = Tensor::empty(reduced_shape(x, mask, attrs.b_or("keepdim", false)), spec.out, x.device());
  if (x.numel() == 0) {
    cuda::copy_into(out, Tensor::wrap_scalar(fold == Fold::Sum ? 0 : 1));
    return out;
  }
  run_reduce(spec, x, mask, out);
  return out;
}

Tensor extreme(OpId op, Fold fold, const Tensor& x, const Attrs& attrs) {
  auto mask = reduce_mask(op_name(op), x, attrs.has("dims") ? attrs.ints("dims") : Shape{});
  require_nonempty(op_name(op), x, mask);
  Tensor out = Tensor::empty(reduced_shape(x, mask, attrs.b_or("keepdim", false)), x.dtype(), x.device());
  run_reduce(reduce_spec_for(fold, x.dtype()), x, mask, out);
  return out;
}

Tensor arg_extreme(OpId op, Fold fold, const Tensor& x, const Attrs& attrs) {
  std::string_view name = op_name(op);
  const bool keepdim = attrs.b_or("keepdim", false);
  std::vector<bool> mask;
  Shape out_shape;
  if (attrs.has("dim")) {
    int64_t d = wrap_dim(name, attrs.i("dim"), x.dim());
    mask.assign(size_t(std::max<int64_t>(x.dim(), 1)), false);
    mask[size_t(d)] = true;
    require_nonempty(name, x, mask);
    out_shape = reduced_shape(x, mask, keepdim);
  } else {
    if (x.numel() == 0)
      fail("{}: expected reduction dim to be specified for an input with no elements, got shape {}", name,
           shape_str(x.sizes()));
    // Every dim reduced in row-major order: the reduced index is the flattened one.
    mask.assign(size_t(std::max<int64_t>(x.dim(), 1)), true);
    out_shape = keepdim ? Shape(size_t(x.dim()), 1) : Shape{};
  }
  Tensor out = Tensor::empty(out_shape, DType::Int64, x.device());
  run_reduce(reduce_spec_for(fold, x.dtype()), x, mask, out);
  return out;
}

Tensors sum(OpId op, const Tensors& in, const Attrs& a) { return {sum_like(op, Fold::Sum, in.at(0), a)}; }
Tensors prod(OpId op, const Tensors& in, const Attrs& a) { return {sum_like(op, Fold::Prod, in.at(0), a)}; }
Tensors amax(OpId op, const Tensors& in, const Attrs& a) { return {extreme(op, Fold::Max, in.at(0), a)}; }
Tensors amin(OpId op, const Tensors& in, const Attrs& a) { return {extreme(op, Fold::Min, in.at(0), a)}; }
Tensors argmax(OpId op, const Tensors& in, const Attrs& a) { return {arg_extreme(op, Fold::ArgMax, in.at(0), a)}; }
Tensors argmin(OpId op, const Tensors& in, const Attrs& a) { return {arg_extreme(op, Fold::ArgMin, in.at(0), a)}; }

// ---- linear algebra, joining, indexing ----

Tensors matmul(OpId, const Tensors& in, const Attrs&) { return {cublas_matmul(in.at(0), in.at(1))}; }

Tensors cat(OpId, const Tensors& in, const Attrs& attrs) {
  if (in.empty()) fail("cat: expected a non-empty list of tensors");
  DType dtype = in[0].dtype();
  for (const Tensor& t : in) dtype = promote_types(dtype, t.dtype());
  auto skipped = [](const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; };
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i].dim() == 0) fail("cat: zero-dimensional tensor (at position {}) cannot be concatenated", i);
    if (!ref && !skipped(in[i])) ref = &in[i];
  }
  if (!ref) return {Tensor::empty({0}, dtype, in[0].device())};
  int64_t dim = wrap_dim("cat", attrs.i("dim"), ref->dim());
  Shape out_shape = ref->sizes();
  out_shape[size_t(dim)] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor& t = in[i];
    if (skipped(t)) continue;
    if (t.dim() != ref->dim())
      fail("cat: tensors must have the same number of dimensions, got shapes {} and {} (tensor {})",
           shape_str(ref->sizes()), shape_str(t.sizes()), i);
    for (int64_t d = 0; d < ref->dim(); ++d)
      if (d != dim && t.sizes()[size_t(d)] != ref->sizes()[size_t(d)])
        fail("cat: shapes {} and {} (tensor {}) must match except in dimension {}", shape_str(ref->sizes()),
             shape_str(t.sizes()), i, dim);
    out_shape[size_t(dim)] += t.sizes()[size_t(dim)];
  }
  Tensor out = Tensor::empty(out_shape, dtype, ref->device());
  int64_t at = 0;
  for (const Tensor& t : in) {
    if (skipped(t)) continue;
    int64_t len = t.sizes()[size_t(dim)];
    Tensor dst = cpu::kernel_slice(OpId::Slice, {out}, Attrs().set("dim", dim).set("start", at).set("end", at + len))[0];
    cuda::copy_into(dst, t);
    at += len;
  }
  return {out};
}

Tensors slice_backward(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& g = in.at(0);
  Tensor out = Tensor::empty(attrs.ints("shape"), g.dtype(), g.device());
  cuda::copy_into(out, Tensor::wrap_scalar(0));
  Tensor view = cpu::kernel_slice(OpId::Slice, {out}, attrs)[0];
  if (view.sizes() != g.sizes())
    fail("slice_backward: grad of shape {} does not match the slice's shape {}", shape_str(g.sizes()),
         shape_str(view.sizes()));
  cuda::copy_into(view, g);
  return {out};
}

void check_index(std::string_view op, const Tensor& x, const Tensor& index, int64_t d) {
  if (index.dtype() != DType::Int64) fail("{}: index must be int64, got {}", op, dtype_name(index.dtype()));
  if (index.dim() != x.dim())
    fail("{}: index tensor must have the same number of dimensions as input, got {} and {}", op, index.dim(), x.dim());
  for (int64_t k = 0; k < x.dim(); ++k)
    if (k != d && index.sizes()[size_t(k)] > x.sizes()[size_t(k)])
      fail("{}: size of index {} exceeds the input's {} in dimension {}", op, shape_str(index.sizes()),
           shape_str(x.sizes()), k);
  if (is_half(x.dtype()) || x.dtype() == DType::Bool) fail("{}: dtype {} has no cuda kernel", op, dtype_name(x.dtype()));
}

// x seen over index's shape with the indexed dim's stride zeroed: the kernel adds index * stride.
Tensor indexed_view(const Tensor& x, const Tensor& index, int64_t d) {
  Shape st = x.strides();
  st[size_t(d)] = 0;
  return cpu::make_view(x, index.sizes(), st, x.storage_offset());
}

Tensors gather(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor &x = in.at(0), &index = in.at(1);
  int64_t d = wrap_dim("gather", attrs.i("dim"), x.dim());
  check_index("gather", x, index, d);
  Tensor out = Tensor::empty(index.sizes(), x.dtype(), x.device());
  Tensor xv = indexed_view(x, index, d);
  run_elementwise(gather_spec(x.dtype()), out, {&index, &xv}, x.strides()[size_t(d)] * int64_t(x.element_size()),
                  x.sizes()[size_t(d)]);
  return {out};
}

Tensors scatter_add(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor &self = in.at(0), &index = in.at(1), &src = in.at(2);
  int64_t d = wrap_dim("scatter_add", attrs.i("dim"), self.dim());
  check_index("scatter_add", self, index, d);
  if (src.dtype() != self.dtype())
    fail("scatter_add: expected self and src of one dtype, got {} and {}", dtype_name(self.dtype()), dtype_name(src.dtype()));
  Tensor out = copy_of(self, self.dtype());
  Tensor ov = indexed_view(out, index, d);
  Tensor sv = cpu::make_view(src, index.sizes(), src.strides(), src.storage_offset());
  // operand 0 is where results land: the kernel reads index and src and adds atomically into out
  run_elementwise(scatter_add_spec(self.dtype()), ov, {&index, &sv}, out.strides()[size_t(d)] * int64_t(out.element_size()),
                  out.sizes()[size_t(d)]);
  return {out};
}

// The index of index_select / index_add checked on the host, as the CPU kernels check it (the device
// kernels trap on a bad index, which would end the context), with negative entries wrapped; int64 on dev.
Tensor checked_index(std::string_view op, const Tensor& index, int64_t size, int64_t d, bool negative_ok, Device dev) {
  if (index.dtype() != DType::Int64 && index.dtype() != DType::Int32)
    fail("{}: index must be int32 or int64, got {}", op, dtype_name(index.dtype()));
  if (index.dim() > 1) fail("{}: index must be 1-D or 0-d, got shape {}", op, shape_str(index.sizes()));
  // raw reads and writes, no ops: a kernel running under a tracer must record nothing of its own
  Tensor given = index.host_contiguous();
  Tensor host = Tensor::empty({given.numel()}, DType::Int64);
  int64_t* v = host.data_ptr<int64_t>();
  for (int64_t i = 0; i < host.numel(); ++i) {
    v[i] = given.dtype() == DType::Int64 ? given.data_ptr<int64_t>()[i] : given.data_ptr<int32_t>()[i];
    if (v[i] >= size || v[i] < (negative_ok ? -size : 0))
      fail("{}index {} is out of bounds for dimension {} with size {}", op.empty() ? "" : std::string(op) + ": ", v[i], d, size);
    if (v[i] < 0) v[i] += size;
  }
  return on_device(host, dev);
}

// index seen over `shape`: stride 0 in every dim but d
Tensor spread_index(const Tensor& index, const Shape& shape, int64_t d) {
  Shape st(shape.size(), 0);
  st[size_t(d)] = 1;
  return cpu::make_view(index, shape, st, 0);
}

// index_select as a gather whose index is the 1-D index spread over the output's shape
Tensors index_select(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor& x0 = in.at(0);
  Tensor x = x0.dim() == 0 ? cpu::make_view(x0, {1}, {1}, x0.storage_offset()) : x0;
  int64_t d = wrap_dim("index_select", attrs.i("dim"), x.dim());
  if (is_half(x.dtype()) || x.dtype() == DType::Bool)
    fail("index_select: dtype {} has no cuda kernel", dtype_name(x.dtype()));
  // "indexing": an advanced index's pick (x[idx]), negative entries allowed and errors worded as torch's
  const bool indexing = attrs.has("indexing");
  Tensor idx = checked_index(indexing ? "" : "index_select", in.at(1), x.sizes()[size_t(d)], indexing ? attrs.i("indexing") : d,
                             indexing, x.device());
  if (x0.dim() == 0 && idx.numel() != 1)
    fail("index_select: index of a 0-d input must have one element, got shape {}", shape_str(in.at(1).sizes()));
  Shape shape = x.sizes();
  shape[size_t(d)] = idx.numel();
  Tensor out = Tensor::empty(shape, x.dtype(), x.device());
  if (out.numel() > 0) {
    Tensor iv = spread_index(idx, shape, d), xv = indexed_view(x, iv, d);
    run_elementwise(gather_spec(x.dtype()), out, {&iv, &xv}, x.strides()[size_t(d)] * int64_t(x.element_size()),
                    x.sizes()[size_t(d)]);
  }
  return {x0.dim() == 0 ? cpu::make_view(out, {}, {}, 0) : out};
}

// index_add as a scatter_add whose index is the 1-D index spread over the source's shape
Tensors index_add(OpId, const Tensors& in, const Attrs& attrs) {
  const Tensor &self = in.at(0), &src = in.at(2);
  if (self.dim() == 0) fail("index_add: a 0-d self has no cuda kernel");
  int64_t d = wrap_dim("index_add", attrs.i("dim"), self.dim());
  if (src.dtype() != self.dtype())
    fail("index_add: expected self and source of one dtype, got {} and {}", dtype_name(self.dtype()), dtype_name(src.dtype()));
  if (is_half(self.dtype()) || self.dtype() == DType::Bool)
    fail("index_add: dtype {} has no cuda kernel", dtype_name(self.dtype()));
  Tensor idx = checked_index("index_add", in.at(1), self.sizes()[size_t(d)], d, true, self.device());
  Shape expect = self.sizes();
  expect[size_t(d)] = idx.numel();
  if (src.sizes() != expect)
    fail("index_add: source of shape {} does not match self {} with {} indices along dim {}", shape_str(src.sizes()),
         shape_str(self.sizes()), idx.numel(), d);
  Tensor out = copy_of(self, self.dtype());
  if (src.numel() > 0) {
    Tensor iv = spread_index(idx, expect, d), ov = indexed_view(out, iv, d), sv = on_device(src, self.device());
    run_elementwise(scatter_add_spec(self.dtype()), ov, {&iv, &sv}, out.strides()[size_t(d)] * int64_t(out.element_size()),
                    out.sizes()[size_t(d)]);
  }
  return {out};
}

Tensors no_kernel(OpId op, const Tensors&, const Attrs&) { fail("{}: no cuda kernel", op_name(op)); }

// ---- registration ----

Kernel cpu_view(OpId op) { return cpu::kernel_for(op); }

const DeviceKernels kKernels{&kernel_for, &copy_into};
[[maybe_unused]] const bool kRegistered = (register_device_kernels(Device::Type::CUDA, &kKernels), true);

}  // namespace

std::vector<ElementwiseSpec> every_elementwise_spec() {
  constexpr DType all[] = {DType::Bool, DType::Int32, DType::Int64, DType::BFloat16, DType::Float16, DType::Float32,
                           DType::Float64};
  std::vector<ElementwiseSpec> specs;
  for (int i = 0; i < kNumOps; ++i) {
    OpId op = OpId(i);
    OpKind kind = op_info(op).kind;
    for (DType t : all) {
      if (kind == OpKind::Unary && !(op == OpId::Neg && t == DType::Bool)) specs.push_back(unary_spec_for(op, t));
      if (kind == OpKind::Binary && !(op == OpId::Sub && t == DType::Bool)) specs.push_back(binary_spec_for(op, t, t, t));
    }
    // a mixed pair, as an int tensor meets a float one: inputs converted inside the kernel
    if (kind == OpKind::Binary) specs.push_back(binary_spec_for(op, DType::Int64, DType::Float32, DType::Float32));
  }
  for (DType t : all) {
    specs.push_back(where_spec(t));
    for (DType u : all) specs.push_back(cast_spec(t, u));
    if (!is_half(t) && t != DType::Bool) {
      specs.push_back(gather_spec(t));
      specs.push_back(scatter_add_spec(t));
    }
  }
  return specs;
}

std::vector<ReduceSpec> every_reduce_spec() {
  std::vector<ReduceSpec> specs;
  for (Fold f : {Fold::Sum, Fold::Prod, Fold::Max, Fold::Min, Fold::ArgMax, Fold::ArgMin})
    for (DType t : {DType::Bool, DType::Int32, DType::Int64, DType::BFloat16, DType::Float16, DType::Float32,
                    DType::Float64})
      specs.push_back(reduce_spec_for(f, t));
  return specs;
}

// Rows whose work is a sequential pass along a dim (sorts and scans) run on the host: correct, and for
// the sizes sampling uses (one row of vocabulary logits) a copy costs less than a launch would save.
Tensors on_host(OpId op, const Tensors& in, const Attrs& attrs) {
  Tensors host;
  for (const Tensor& t : in) host.push_back(t.host_contiguous());
  Device dev = device_of(in);
  Tensors out = cpu::kernel_for(op)(op, host, attrs);
  for (Tensor& t : out) t = on_device(t, dev);
  return out;
}

Tensor on_device(const Tensor& t, Device device) {
  if (t.device() == device) return t;
  if (!t.device().is_cpu()) fail("cuda: expected a cpu tensor to move to {}, got one on {}", device.str(), t.device().str());
  // The bytes directly (not kiln::copy_into, which sends 0-d CPU sources here).
  Tensor host = t.is_contiguous() ? t : t.contiguous();
  Tensor out = Tensor::empty(t.sizes(), t.dtype(), device);
  device_runtime(device).copy_bytes(out.raw_data(), device, host.raw_data(), Device::cpu(),
                                    size_t(t.numel()) * t.element_size());
  return out;
}

void run_elementwise(const ElementwiseSpec& spec, const Tensor& out, const std::vector<const Tensor*>& inputs,
                     int64_t extra0, int64_t extra1) {
  int64_t n = out.numel();
  if (n == 0) return;
  cpu::StridedLoop L = cpu::make_loop(spec.name.c_str(), out, inputs);
  LoopParams p{};
  p.ndim = L.ndim;
  p.n = n;
  for (int k = 0; k < L.nops; ++k) p.ptr[k] = L.ptr[k];
  for (int d = 0; d < L.ndim; ++d) {
    p.sizes[d] = L.sizes[d];
    for (int k = 0; k < L.nops; ++k) p.strides[k][d] = L.strides[k][d];
  }
  p.extra[0] = extra0;
  p.extra[1] = extra1;
  // The vector kernel: one dim, every operand contiguous or a broadcast scalar, contiguous ones aligned
  // to four elements.
  bool vec = spec.index == IndexMode::None && L.ndim == 1 && n >= 4;
  for (int k = 0; k < L.nops && vec; ++k) {
    int64_t item = int64_t(k == 0 ? out.element_size() : inputs[size_t(k - 1)]->element_size());
    vec = vector_operand(L.strides[k][0], item, L.ptr[k], k > 0);
  }
  int dev = out.device().index;
  CUfunction fn = function(dev, spec.name, vec ? kVector : kStrided, [&] { return render_module({spec}, {}); });
  launch(dev, fn, &p, vec ? (n + 3) / 4 : n, kThreads);
}

void copy_into(const Tensor& dst, const Tensor& src_in) {
  Shape b = broadcast_shapes("copy_", dst.sizes(), src_in.sizes());
  if (b != dst.sizes())
    fail("copy_: source of shape {} cannot be broadcast to destination of shape {}", shape_str(src_in.sizes()),
         shape_str(dst.sizes()));
  Tensor src = on_device(src_in, dst.device());
  // A source overlapping the destination is read as it was before the copy.
  if (cpu::partially_overlaps(dst, src)) src = copy_of(src, src.dtype());
  run_elementwise(cast_spec(src.dtype(), dst.dtype()), dst, {&src});
}

// A switch with no default: a new row of ops.def does not compile until it is handled here.
Kernel kernel_for(OpId op) {
  switch (op) {
#define KILN_UNARY(Id, name, rule, expr) \
  case OpId::Id: return &unary;
#define KILN_BINARY(Id, name, rule, expr) \
  case OpId::Id: return &binary;
#include "core/ops.def"
    case OpId::Sum: return &sum;
    case OpId::Prod: return &prod;
    case OpId::Amax: return &amax;
    case OpId::Amin: return &amin;
    case OpId::Where: return &where;
    case OpId::Argmax: return &argmax;
    case OpId::Argmin: return &argmin;
    case OpId::Reshape: return &reshape;
    case OpId::Permute:
    case OpId::Expand:
    case OpId::Slice:
    case OpId::Select:
    case OpId::Squeeze:
    case OpId::Unsqueeze: return cpu_view(op);  // metadata only: the CPU's view kernels serve every device
    case OpId::Contiguous: return &contiguous;
    case OpId::Clone: return &clone;
    case OpId::Cast: return &cast;
    case OpId::Matmul: return &matmul;
    case OpId::Cat: return &cat;
    case OpId::Gather: return &gather;
    case OpId::ScatterAdd: return &scatter_add;
    case OpId::SliceBackward: return &slice_backward;
    case OpId::IndexSelect: return &index_select;
    case OpId::IndexAdd: return &index_add;
    case OpId::Argsort:
    case OpId::Cumsum:
    case OpId::Cumprod: return &on_host;
    case OpId::Conv2d:
    case OpId::MaxPool2d:
    case OpId::AvgPool2d:
    case OpId::AvgPool2dBackward:
    case OpId::Conv2dBackwardInput:
    case OpId::Conv2dBackwardWeight:
    case OpId::RnnLayer:
    case OpId::RnnLayerBackward: return &no_kernel;
    case OpId::FlashAttention: return &flash_attention;
    case OpId::FlashAttentionBackward: return &flash_attention_backward;
  }
  return &no_kernel;
}

}  // namespace kiln::cuda
