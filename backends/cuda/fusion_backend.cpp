#include "backends/cuda/fusion_backend.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>

#include "backends/cuda/driver_api.h"
#include "backends/cuda/fusion_compiler.h"
#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch_params.h"
#include "backends/cuda/runtime.h"
#include "core/error.h"

namespace kiln::cuda {
namespace {

// The host side of the rendered <name>_params struct (fusion_compiler.cpp): every field 8-byte
// aligned, so a byte buffer filled in order has the device layout.
std::vector<char> pack_params(int ndim, int64_t n, int64_t nout, int64_t nred, const int64_t* sizes,
                              const std::vector<char*>& ptrs, const std::vector<std::array<int64_t, kMaxDims>>& strides,
                              int nptr_slots, int noff_slots) {
  std::vector<char> buf;
  auto put = [&](const void* p, size_t n) { buf.insert(buf.end(), (const char*)p, (const char*)p + n); };
  int32_t hdr[2] = {ndim, 0};
  put(hdr, sizeof hdr);
  int64_t counts[3] = {n, nout, nred};
  put(counts, sizeof counts);
  put(sizes, sizeof(int64_t) * kMaxDims);
  for (int k = 0; k < nptr_slots; ++k) {
    char* p = size_t(k) < ptrs.size() ? ptrs[size_t(k)] : nullptr;
    put(&p, sizeof p);
  }
  for (int k = 0; k < noff_slots; ++k) {
    std::array<int64_t, kMaxDims> s{};
    if (size_t(k) < strides.size()) s = strides[size_t(k)];
    put(s.data(), sizeof(int64_t) * kMaxDims);
  }
  return buf;
}

class CudaFusedKernel final : public backends::FusedKernel {
 public:
  explicit CudaFusedKernel(FusedKernelSource k) : k_(std::move(k)) {}
  const std::string& name() const override { return k_.name; }

  Tensors run(const Tensors& in_raw) const override {
    if (in_raw.size() != k_.inputs.size())
      fail("{}: expected {} inputs, got {}", k_.name, k_.inputs.size(), in_raw.size());
    Device dev = Device::cpu();
    for (const Tensor& t : in_raw)
      if (!t.device().is_cpu()) dev = t.device();
    if (dev.is_cpu()) fail("{}: a cuda fused kernel got no cuda tensor", k_.name);
    Tensors in;
    Shape shape;
    for (size_t i = 0; i < in_raw.size(); ++i) {
      if (in_raw[i].dtype() != k_.inputs[i])
        fail("{}: input {} has dtype {}, the kernel was compiled for {}", k_.name, i, dtype_name(in_raw[i].dtype()),
             dtype_name(k_.inputs[i]));
      in.push_back(on_device(in_raw[i], dev));
      if (!(in.back().device() == dev))
        fail("{}: expected all tensors on one device, got {} and {}", k_.name, dev.str(), in.back().device().str());
      shape = i == 0 ? in.back().sizes() : broadcast_shapes(k_.name, shape, in.back().sizes());
    }
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    Tensors ew;
    Shape per_row = shape;  // a row kernel's outputs of one number per row
    if (k_.rows) {
      if (shape.empty()) fail("{}: a row kernel over a 0-d tensor", k_.name);
      per_row.back() = 1;
    }
    for (size_t j = 0; j < k_.ew_outputs.size(); ++j)
      ew.push_back(Tensor::empty(k_.rows && k_.row_outputs[j] ? per_row : shape, k_.ew_outputs[j], dev));
    Tensor red;
    int64_t nred = 1, nout = n;
    if (k_.rows) {
      nred = shape.back();
      nout = 1;
      for (size_t d = 0; d + 1 < shape.size(); ++d) nout *= shape[d];
      // torch's reductions of empty rows (a sum of nothing is 0, amax raises): rare enough to refuse
      if (nred == 0 && nout > 0) fail("{}: a row kernel over rows of length 0 (shape {})", k_.name, shape_str(shape));
    } else if (k_.reduces) {
      Shape out_shape;
      if (k_.reduce_all) {
        nred = n;
        nout = 1;
        if (k_.keepdim) out_shape.assign(shape.size(), 1);
      } else {
        if (shape.empty()) fail("{}: a reduction over the last dim of a 0-d tensor", k_.name);
        nred = shape.back();
        out_shape = shape;
        if (k_.keepdim) out_shape.back() = 1;
        else out_shape.pop_back();
        nout = 1;
        for (size_t d = 0; d + 1 < shape.size(); ++d) nout *= shape[d];
      }
      red = Tensor::empty(out_shape, k_.red_dtype, dev);
    }
    Tensors outs;
    for (int slot : k_.out_slot) outs.push_back(slot < 0 ? red : ew[size_t(slot)]);
    if (k_.reduces || k_.rows ? nout == 0 : n == 0) return outs;

    // Operands: inputs then elementwise outputs, byte strides in the iteration shape (0 where
    // broadcast); dims contiguous for every operand merge, size-1 dims go, dim 0 innermost.
    std::vector<const Tensor*> ops;
    for (const Tensor& t : in) ops.push_back(&t);
    for (const Tensor& t : ew) ops.push_back(&t);
    std::vector<std::vector<int64_t>> st(ops.size(), std::vector<int64_t>(shape.size(), 0));
    for (size_t k = 0; k < ops.size(); ++k) {
      const Tensor& t = *ops[k];
      size_t off = shape.size() - size_t(t.dim());
      for (size_t d = 0; d < size_t(t.dim()); ++d)
        st[k][off + d] = t.sizes()[d] == 1 ? 0 : t.strides()[d] * int64_t(t.element_size());
    }
    int nd = 0;
    int64_t sizes[kMaxDims] = {};
    std::vector<std::array<int64_t, kMaxDims>> strides(ops.size());
    for (size_t dd = shape.size(); dd-- > 0;) {
      if (shape[dd] == 1) continue;
      if (nd > 0) {
        bool merge = true;
        for (size_t k = 0; k < ops.size(); ++k)
          merge &= st[k][dd] == strides[k][size_t(nd - 1)] * sizes[nd - 1];
        if (merge) {
          sizes[nd - 1] *= shape[dd];
          continue;
        }
      }
      if (nd == kMaxDims) fail("{}: more than {} dims after merging", k_.name, kMaxDims);
      sizes[nd] = shape[dd];
      for (size_t k = 0; k < ops.size(); ++k) strides[k][size_t(nd)] = st[k][dd];
      ++nd;
    }
    std::vector<char*> ptrs;
    for (const Tensor* t : ops) ptrs.push_back(static_cast<char*>(t->raw_data()));
    if (k_.reduces) ptrs.push_back(static_cast<char*>(red.raw_data()));
    int nptr = std::max<int>(1, int(ptrs.size()));
    int noff = std::max<int>(1, int(ops.size()));
    std::vector<char> params = pack_params(nd, n, nout, nred, sizes, ptrs, strides, nptr, noff);

    // The vector variant: one dim, every operand contiguous and aligned to four elements, or (inputs
    // only) a broadcast scalar.
    bool vec = !k_.reduces && !k_.rows && nd == 1 && n >= 4;
    for (size_t k = 0; k < ops.size() && vec; ++k)
      vec = vector_operand(strides[k][0], int64_t(ops[k]->element_size()), ptrs[k], k < in.size());
    DeviceState& s = device_state(dev.index);
    CUfunction fn = function(dev.index, vec);
    const bool per_block = k_.reduces || k_.rows;  // a block per output element, or per row
    int threads = per_block ? kFusedReduceThreads : 256;
    int64_t work = per_block ? nout : ((vec ? n / 4 : n) + threads - 1) / threads;
    int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(work, int64_t(s.sm_count) * 32));
    void* args[] = {params.data()};
    KILN_CU(cuLaunchKernel, fn, unsigned(blocks), 1, 1, unsigned(threads), 1, 1, 0, s.stream, args, nullptr);
    return outs;
  }

 private:
  // Loaded once per device and variant: function_for hashes the whole source, too slow for every launch.
  CUfunction function(int device, bool vec) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (size_t(device) >= fns_.size()) fns_.resize(size_t(device) + 1);
    CUfunction& fn = fns_[size_t(device)][vec];
    if (!fn) fn = function_for(device, k_.source, vec ? k_.name + "_v" : k_.name);
    return fn;
  }

  FusedKernelSource k_;
  mutable std::mutex mu_;
  mutable std::vector<std::array<CUfunction, 2>> fns_;
};

class CudaBackend final : public backends::FusionBackend {
 public:
  std::string_view name() const override { return "cuda"; }
  Device::Type device_type() const override { return Device::Type::CUDA; }
  bool can_fuse(const ir::Node& n, bool reduction) const override { return cuda::can_fuse(n, reduction); }
  bool row_groups() const override { return true; }
  std::shared_ptr<backends::FusedKernel> compile(const ir::Graph& group, const std::string& name,
                                                 std::string* why_not) const override {
    try {
      return std::make_shared<CudaFusedKernel>(render_fusion(group, name));
    } catch (const Error& e) {
      if (why_not) *why_not = e.what();
      return nullptr;
    }
  }
};

}  // namespace

const backends::FusionBackend* fusion_backend() {
  static const CudaBackend backend;
  return &backend;
}

}  // namespace kiln::cuda
