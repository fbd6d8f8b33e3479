// oneDNN's matmul primitive with post-ops for the JIT's gemm groups. Creating a primitive costs
// milliseconds (oneDNN generates its kernels then), running one microseconds, so primitives are
// cached by everything they were specialised for: shapes, strides (a transposed weight is another
// primitive, not a copy), the post-op list with each addend's layout, and the thread count, which
// oneDNN's brgemm matmul fixes its work split by when the primitive is made.
#include "eager/cpu/gemm_epilogue.h"

#include <omp.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "kiln_config.h"
#if KILN_HAVE_DNNL
#include "core/log.h"

#include <dnnl.hpp>

#include "eager/cpu/onednn_scratchpad.h"
#endif

#include "core/error.h"
#include "eager/cpu/matmul_bf16.h"
#include "eager/cpu/primitive_cache.h"

namespace kiln::cpu {

namespace {

std::atomic<int64_t> g_runs{0}, g_created{0};

}  // namespace

GemmEpilogueStats gemm_epilogue_stats() {
  return {g_runs.load(std::memory_order_relaxed), g_created.load(std::memory_order_relaxed)};
}

#if !KILN_HAVE_DNNL

std::optional<Tensor> gemm_epilogue(const Tensor&, const Tensor&, const std::vector<GemmPostOp>&, const Tensors&) {
  return std::nullopt;
}

#else

namespace {

using dims = dnnl::memory::dims;

// The strides BLAS and oneDNN take for a [r,c] matrix: row-major or column-major with a leading
// dimension at least the row (column) length. The stride of a dim of size 1 is never read, so it is
// set to what the layout wants. Nothing when neither dim has unit stride.
std::optional<std::array<int64_t, 2>> plain_strides(const Tensor& m) {
  int64_t r = m.sizes()[0], c = m.sizes()[1], s0 = m.strides()[0], s1 = m.strides()[1];
  int64_t row_s0 = r == 1 ? c : s0, row_s1 = c == 1 ? 1 : s1;
  if (row_s1 == 1 && row_s0 >= c) return std::array<int64_t, 2>{row_s0, 1};
  int64_t col_s0 = r == 1 ? 1 : s0, col_s1 = c == 1 ? r : s1;
  if (col_s0 == 1 && col_s1 >= r) return std::array<int64_t, 2>{1, col_s1};
  return std::nullopt;
}

// A [M,K]/[K,N] operand with the strides it is read by, copied when it has no plain layout.
struct Operand {
  Tensor t;
  std::array<int64_t, 2> strides;
};

Operand operand(const Tensor& m) {
  if (auto s = plain_strides(m)) return {m, *s};
  Tensor c = m.contiguous();
  return {c, {c.sizes()[1], 1}};
}

// An addend as a [rows,N] row-major matrix, rows 1 (a bias) or M (a residual); nothing for a shape
// that is neither.
std::optional<Operand> addend(const Tensor& x, int64_t M, int64_t N) {
  Tensor m;
  if (x.dim() == 1 && x.sizes()[0] == N) m = x.unsqueeze(0);
  else if (x.dim() == 2 && x.sizes()[1] == N && (x.sizes()[0] == 1 || x.sizes()[0] == M)) m = x;
  else return std::nullopt;
  auto s = plain_strides(m);
  if (!s || (*s)[1] != 1) {
    m = m.contiguous();
    s = std::array<int64_t, 2>{N, 1};
  }
  return Operand{m, *s};
}

constexpr size_t kKeyLen = 11 + 4 * kMaxGemmPostOps;

struct Key {
  std::array<int64_t, kKeyLen> v{};
  bool operator==(const Key&) const = default;
};

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
    for (int64_t x : k.v) h = (h ^ uint64_t(x)) * 1099511628211ull;
    return size_t(h);
  }
};

struct Primitive {
  dnnl::matmul prim;
  dnnl::memory::desc a, b, out, scratchpad;
  std::vector<dnnl::memory::desc> addends;  // one per Add or Mul, in order
};

// The engine and the primitives made on it. Never destroyed: primitives must not outlive their engine,
// and at exit neither needs to go (a pointer in static storage keeps LeakSanitizer content).
struct State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  cpu::PrimitiveCache<std::unordered_map<Key, std::shared_ptr<const Primitive>, KeyHash>> cache{4096};
};

State& state() {
  static State* s = new State;
  return *s;
}

dnnl::memory::desc matrix_desc(int64_t r, int64_t c, const std::array<int64_t, 2>& s, DType dt) {
  return dnnl::memory::desc(dims{r, c}, dt == DType::BFloat16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32,
                            dims{s[0], s[1]});
}

std::shared_ptr<const Primitive> create(int64_t M, int64_t K, int64_t N, const Operand& a, const Operand& b,
                                        const std::vector<GemmPostOp>& ops, const std::vector<Operand>& adds, DType dt,
                                        DType out_dt) {
  auto p = std::make_shared<Primitive>();
  p->a = matrix_desc(M, K, a.strides, dt);
  p->b = matrix_desc(K, N, b.strides, dt);
  p->out = matrix_desc(M, N, {N, 1}, out_dt);
  dnnl::post_ops po;
  size_t k = 0;
  for (GemmPostOp op : ops) switch (op) {
      case GemmPostOp::Add:
      case GemmPostOp::Mul: {
        const Operand& x = adds[k++];
        p->addends.push_back(matrix_desc(x.t.sizes()[0], N, x.strides, out_dt));
        po.append_binary(op == GemmPostOp::Add ? dnnl::algorithm::binary_add : dnnl::algorithm::binary_mul,
                         p->addends.back());
        break;
      }
      case GemmPostOp::Relu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f); break;
      case GemmPostOp::Gelu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f); break;
    }
  dnnl::primitive_attr attr = cpu::user_scratchpad();
  attr.set_post_ops(po);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p->a, p->b, p->out), attr, state().engine);
  p->prim = dnnl::matmul(pd);
  p->scratchpad = pd.scratchpad_desc();
  g_created.fetch_add(1, std::memory_order_relaxed);
  kiln::logger().debug("gemm epilogue: onednn matmul [{},{}]x[{},{}] with {} post-ops: {}", M, K, K, N, ops.size(),
                pd.impl_info_str());
  return p;
}

}  // namespace

std::optional<Tensor> gemm_epilogue(const Tensor& a, const Tensor& b, const std::vector<GemmPostOp>& ops,
                                    const Tensors& addends) {
  if (!cpu::onednn_gemm_enabled() || ops.size() > kMaxGemmPostOps) return std::nullopt;
  // bf16 only where oneDNN has a fast bf16 kernel: its reference one is slower than the matmul and the
  // epilogue apart
  const DType dt = a.dtype();
  if (a.dim() != 2 || b.dim() != 2 || b.dtype() != dt) return std::nullopt;
  if (dt != DType::Float32 && !(dt == DType::BFloat16 && cpu::bf16_gemm_available())) return std::nullopt;
  if (!a.device().is_cpu() || !b.device().is_cpu()) return std::nullopt;
  int64_t M = a.sizes()[0], K = a.sizes()[1], N = b.sizes()[1];
  if (b.sizes()[0] != K || M == 0 || K == 0 || N == 0) return std::nullopt;
  size_t num_adds = 0;
  for (GemmPostOp op : ops) num_adds += reads_operand(op);
  if (addends.size() != num_adds) fail("gemm epilogue: {} operands for {} add and mul steps", addends.size(), num_adds);
  // float32 addends to a bf16 product (autocast's Linear plus the float32 residual stream) give a float32
  // result, as promotion does; the product is not rounded to bf16 first
  const DType out_dt = addends.empty() ? dt : addends[0].dtype();
  if (out_dt != dt && out_dt != DType::Float32) return std::nullopt;
  std::vector<Operand> adds;
  adds.reserve(num_adds);
  for (const Tensor& x : addends) {
    if (x.dtype() != out_dt || !x.device().is_cpu()) return std::nullopt;
    std::optional<Operand> o = addend(x, M, N);
    if (!o) return std::nullopt;
    adds.push_back(std::move(*o));
  }
  Operand A = operand(a), B = operand(b);

  Key key;
  size_t w = 0;
  for (int64_t x : {M, K, N, A.strides[0], A.strides[1], B.strides[0], B.strides[1], int64_t(omp_get_max_threads()),
                    int64_t(ops.size()), int64_t(dt), int64_t(out_dt)})
    key.v[w++] = x;
  size_t k = 0;
  for (GemmPostOp op : ops) {
    key.v[w++] = int64_t(op) + 1;
    if (reads_operand(op)) {
      const Operand& x = adds[k++];
      key.v[w++] = x.t.sizes()[0];
      key.v[w++] = x.strides[0];
      key.v[w++] = x.strides[1];
    } else {
      w += 3;
    }
  }

  State& st = state();
  std::shared_ptr<const Primitive> p;
  try {
    p = st.cache.get(key, [&] { return create(M, K, N, A, B, ops, adds, dt, out_dt); });
  } catch (const dnnl::error& e) {
    // Not an error of the program: this oneDNN has no implementation for the layout; the caller's
    // fallback computes the same thing.
    kiln::logger().debug("gemm epilogue: onednn declined [{},{}]x[{},{}]: {}", M, K, K, N, e.what());
    return std::nullopt;
  }

  Tensor out = Tensor::empty({M, N}, out_dt);
  const dnnl::engine& eng = st.engine;
  std::unordered_map<int, dnnl::memory> args;
  args.emplace(DNNL_ARG_SRC, dnnl::memory(p->a, eng, A.t.raw_data()));
  args.emplace(DNNL_ARG_WEIGHTS, dnnl::memory(p->b, eng, B.t.raw_data()));
  args.emplace(DNNL_ARG_DST, dnnl::memory(p->out, eng, out.raw_data()));
  k = 0;
  for (size_t i = 0; i < ops.size(); ++i)
    if (reads_operand(ops[i])) {
      args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(i)) | DNNL_ARG_SRC_1,
                   dnnl::memory(p->addends[k], eng, adds[k].t.raw_data()));
      ++k;
    }
  cpu::add_scratchpad(args, p->scratchpad, eng);
  try {
    // One stream per thread: streams are cheap, but not to be shared between concurrent callers.
    thread_local dnnl::stream stream(eng);
    p->prim.execute(stream, args);
    stream.wait();
  } catch (const dnnl::error& e) {
    fail("gemm epilogue: onednn matmul [{},{}]x[{},{}] failed: {}", M, K, K, N, e.what());
  }
  g_runs.fetch_add(1, std::memory_order_relaxed);
  return out;
}

#endif  // KILN_HAVE_DNNL

}  // namespace kiln::cpu
