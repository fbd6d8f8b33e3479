#include "backends/cuda/source_render.h"

#include <fmt/format.h>

#include "backends/cuda/launch_params.h"
#include "backends/cuda/scalar_math_source.h"
#include "core/error.h"

namespace kiln::cuda {
namespace {

// The device side of launch_params.h, and the half types (core/scalar_math.h follows, embedded).
constexpr const char* kPrelude = R"(// rendered by kiln backends/cuda/source_render.cpp
#define KILN_MAX_OPERANDS @MAXOPS@
#define KILN_MAX_DIMS @MAXDIMS@
struct LoopParams {
  int ndim;
  long long n;
  char* ptr[KILN_MAX_OPERANDS];
  long long sizes[KILN_MAX_DIMS];
  long long strides[KILN_MAX_OPERANDS][KILN_MAX_DIMS];
  long long extra[2];
};
struct ReduceParams {
  long long nout, nred;
  char* in;
  char* out;
  int ndk, ndr, tpo, pad;
  long long ksizes[KILN_MAX_DIMS], kstrides[KILN_MAX_DIMS], rsizes[KILN_MAX_DIMS], rstrides[KILN_MAX_DIMS];
};

// bfloat16 and float16 are storage: arithmetic happens in float, as on the CPU (core/dtype.h).
struct kbf16 {
  unsigned short b;
  __device__ kbf16() {}
  __device__ kbf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) { b = 0x7fc0; return; }
    u += 0x7fffu + ((u >> 16) & 1u);
    b = (unsigned short)(u >> 16);
  }
  __device__ operator float() const { return __uint_as_float(((unsigned int)b) << 16); }
};
struct kf16 {
  unsigned short b;
  __device__ kf16() {}
  __device__ kf16(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(b) : "f"(f)); }
  __device__ operator float() const { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b)); return f; }
};

// Byte offsets of element i in each operand (dim 0 innermost). Below 2^31 elements the index splits
// with 32-bit division, several times faster than 64-bit division on every GPU. P: LoopParams, or the
// JIT's fused-kernel parameters (the same n, ndim, sizes and strides fields).
template <int N, class P>
__device__ __forceinline__ void kiln_offsets(const P& p, long long i, long long* off) {
#pragma unroll
  for (int k = 0; k < N; ++k) off[k] = 0;
  if (p.n <= 2147483647LL) {
    unsigned int u = (unsigned int)i;
    for (int d = 0; d < p.ndim; ++d) {
      unsigned int s = (unsigned int)p.sizes[d], q = u / s, id = u - q * s;
      u = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += (long long)id * p.strides[k][d];
    }
    return;
  }
  for (int d = 0; d < p.ndim; ++d) {
    long long s = p.sizes[d], q = i / s, id = i - q * s;
    i = q;
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] += id * p.strides[k][d];
  }
}
template <class E> struct alignas(4 * sizeof(E)) kvec4 { E v[4]; };
__device__ __forceinline__ long long kiln_tid() { return blockIdx.x * (long long)blockDim.x + threadIdx.x; }
__device__ __forceinline__ long long kiln_nthreads() { return (long long)gridDim.x * blockDim.x; }
__device__ __forceinline__ void katomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void katomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void katomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void katomic_add(long long* p, long long v) {
  atomicAdd((unsigned long long*)p, (unsigned long long)v);  // two's complement: the same bits
}
)";

constexpr const char* kStrided = R"(
extern "C" __global__ void @NAME@_s(const LoopParams p) {
  typedef @T@ T;
  typedef @O@ O;
  for (long long i = kiln_tid(); i < p.n; i += kiln_nthreads()) {
    long long off[@NOPS@];
    kiln_offsets<@NOPS@>(p, i, off);
@LOADS@    @STORE@
  }
}
)";

constexpr const char* kVector = R"(
extern "C" __global__ void @NAME@_v(const LoopParams p) {
  typedef @T@ T;
  typedef @O@ O;
  const long long nv = p.n / 4;
  for (long long j = kiln_tid(); j < nv; j += kiln_nthreads()) {
@VLOADS@    kvec4<O> vo;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
@VELEM@      vo.v[e] = O(@EXPR@);
    }
    ((kvec4<O>*)p.ptr[0])[j] = vo;
  }
  for (long long i = nv * 4 + kiln_tid(); i < p.n; i += kiln_nthreads()) {
@TLOADS@    ((O*)p.ptr[0])[i] = O(@EXPR@);
  }
}
)";

constexpr const char* kReduce = R"(
extern "C" __global__ void @NAME@(const ReduceParams p) {
  typedef @I@ I;
  typedef @A@ A;
  typedef @O@ O;
  __shared__ A sv[256];
  __shared__ long long si[256];
  const int tpo = p.tpo, lane = threadIdx.x % tpo, group = threadIdx.x / tpo, per_block = blockDim.x / tpo;
  for (long long base = blockIdx.x * (long long)per_block; base < p.nout; base += (long long)gridDim.x * per_block) {
    const long long o = base + group;
    A acc = @IDENT@;
    long long ai = 9223372036854775807LL;
    if (o < p.nout) {
      long long kin = 0, rem = o;
      for (int d = p.ndk - 1; d >= 0; --d) {
        long long s = p.ksizes[d], q = rem / s;
        kin += (rem - q * s) * p.kstrides[d];
        rem = q;
      }
      for (long long r = lane; r < p.nred; r += tpo) {
        long long rin = 0, rr = r;
        if (p.ndr == 1) {
          rin = r * p.rstrides[0];  // one reduced dim, the common case: no division
        } else {
          for (int d = p.ndr - 1; d >= 0; --d) {
            long long s = p.rsizes[d], q = rr / s;
            rin += (rr - q * s) * p.rstrides[d];
            rr = q;
          }
        }
        A x = A(((const I*)p.in)[kin + rin]);
        long long xi = r;
        @FOLD@
      }
    }
    sv[threadIdx.x] = acc;
    si[threadIdx.x] = ai;
    __syncthreads();
    for (int s = tpo / 2; s > 0; s >>= 1) {
      if (lane < s) {
        A x = sv[threadIdx.x + s];
        long long xi = si[threadIdx.x + s];
        acc = sv[threadIdx.x];
        ai = si[threadIdx.x];
        @MERGE@
        sv[threadIdx.x] = acc;
        si[threadIdx.x] = ai;
      }
      __syncthreads();
    }
    if (lane == 0 && o < p.nout) ((O*)p.out)[o] = O(@RESULT@);
    __syncthreads();
  }
}
)";

std::string elementwise_name(std::string_view base, const std::vector<DType>& in, DType compute, DType out) {
  std::string n = fmt::format("kiln_{}", base);
  for (DType t : in) n += fmt::format("_{}", dtype_tag(t));
  return n + fmt::format("_{}_{}", dtype_tag(compute), dtype_tag(out));
}

}  // namespace

std::string cuda_type(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::Int32: return "int";
    case DType::Int64: return "long long";
    case DType::BFloat16: return "kbf16";
    case DType::Float16: return "kf16";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
  }
  return "float";
}

std::string dtype_tag(DType t) {
  switch (t) {
    case DType::Bool: return "b";
    case DType::Int32: return "i32";
    case DType::Int64: return "i64";
    case DType::BFloat16: return "bf16";
    case DType::Float16: return "f16";
    case DType::Float32: return "f32";
    case DType::Float64: return "f64";
  }
  return "f32";
}

ElementwiseSpec unary_spec(OpId op, DType in, DType compute, DType out) {
  const OpInfo& info = op_info(op);
  if (info.kind != OpKind::Unary) fail("cuda: {} is not a unary row of ops.def", info.name);
  return {elementwise_name(info.name, {in}, compute, out), std::string(info.expr), {"x"}, {in}, {false}, compute, out};
}

ElementwiseSpec binary_spec(OpId op, DType a, DType b, DType compute, DType out) {
  const OpInfo& info = op_info(op);
  if (info.kind != OpKind::Binary) fail("cuda: {} is not a binary row of ops.def", info.name);
  return {elementwise_name(info.name, {a, b}, compute, out), std::string(info.expr), {"a", "b"}, {a, b},
          {false, false}, compute, out};
}

ElementwiseSpec where_spec(DType t) {
  return {elementwise_name("where", {DType::Bool, t, t}, t, t), "c ? a : b", {"c", "a", "b"},
          {DType::Bool, t, t}, {true, false, false}, t, t};
}

ElementwiseSpec cast_spec(DType in, DType out) {
  // Computed in the output type: one conversion, as a C++ static_cast (float → bool is x != 0).
  return {elementwise_name("copy", {in}, out, out), "x", {"x"}, {in}, {false}, out, out};
}

ElementwiseSpec gather_spec(DType t) {
  return {elementwise_name("gather", {DType::Int64, t}, t, t), "x", {"i", "x"}, {DType::Int64, t}, {true, true},
          t, t, IndexMode::Gather};
}

ElementwiseSpec scatter_add_spec(DType t) {
  return {elementwise_name("scatter_add", {DType::Int64, t}, t, t), "x", {"i", "x"}, {DType::Int64, t},
          {true, true}, t, t, IndexMode::ScatterAdd};
}

ReduceSpec reduce_spec(Fold fold, DType in, DType acc, DType out) {
  static const char* names[] = {"sum", "prod", "amax", "amin", "argmax", "argmin"};
  return {fmt::format("kiln_{}_{}_{}_{}", names[int(fold)], dtype_tag(in), dtype_tag(acc), dtype_tag(out)), fold, in,
          acc, out};
}

std::string subst(std::string text, const std::vector<std::pair<std::string, std::string>>& kv) {
  for (const auto& [k, v] : kv) {
    std::string key = "@" + k + "@";
    for (size_t pos = text.find(key); pos != std::string::npos; pos = text.find(key, pos + v.size()))
      text.replace(pos, key.size(), v);
  }
  return text;
}

std::string render_prelude() {
  // The helpers ops.def expressions call beyond the math library: the CPU's header itself (generated
  // backends/cuda/scalar_math_source.h holds its text), under its namespace, which the kernels open.
  return subst(kPrelude, {{"MAXOPS", std::to_string(kMaxOperands)}, {"MAXDIMS", std::to_string(kMaxDims)}}) +
         kScalarMathSource + "\nusing namespace kiln::scalar_math;\n";
}

std::string render(const ElementwiseSpec& s) {
  const int nops = int(s.in.size()) + 1;
  if (nops > kMaxOperands) fail("cuda: kernel {} has {} operands, more than {}", s.name, nops, kMaxOperands);
  auto var_type = [&](size_t k) { return s.keep_type[k] ? cuda_type(s.in[k]) : std::string("T"); };
  std::string loads, vloads, velem, tloads;
  for (size_t k = 0; k < s.in.size(); ++k) {
    std::string it = cuda_type(s.in[k]), vt = var_type(k), v = s.vars[k];
    int op = int(k) + 1;
    loads += fmt::format("    {} {} = {}(*(const {}*)(p.ptr[{}] + off[{}]));\n", vt, v, vt, it, op, op);
    // A contiguous operand loads four elements at once; a broadcast one (stride 0) loads its one element.
    vloads += fmt::format(
        "    kvec4<{0}> v{1};\n"
        "    if (p.strides[{2}][0] != 0) v{1} = ((const kvec4<{0}>*)p.ptr[{2}])[j];\n"
        "    else {{ {0} s = *(const {0}*)p.ptr[{2}]; v{1}.v[0] = s; v{1}.v[1] = s; v{1}.v[2] = s; v{1}.v[3] = s; }}\n",
        it, v, op);
    velem += fmt::format("      {} {} = {}(v{}.v[e]);\n", vt, v, vt, v);
    tloads += fmt::format("    {} {} = {}(*(const {}*)(p.ptr[{}] + i * p.strides[{}][0]));\n", vt, v, vt, it, op, op);
  }
  std::string store;
  switch (s.index) {
    case IndexMode::None: store = fmt::format("*(O*)(p.ptr[0] + off[0]) = O({});", s.expr); break;
    case IndexMode::Gather:
      // operand 2 (x) steps over every dim but the gathered one; extra = {x's byte stride there, size}
      loads = "    long long ix = *(const long long*)(p.ptr[1] + off[1]);\n"
                          "    if (ix < 0 || ix >= p.extra[1]) __trap();\n"
                          "    T x = *(const T*)(p.ptr[2] + off[2] + ix * p.extra[0]);\n";
      store = "*(O*)(p.ptr[0] + off[0]) = x;";
      break;
    case IndexMode::ScatterAdd:
      loads = "    long long ix = *(const long long*)(p.ptr[1] + off[1]);\n"
                          "    if (ix < 0 || ix >= p.extra[1]) __trap();\n"
                          "    T x = *(const T*)(p.ptr[2] + off[2]);\n";
      store = "katomic_add((O*)(p.ptr[0] + off[0] + ix * p.extra[0]), x);";
      break;
  }
  std::vector<std::pair<std::string, std::string>> kv = {
      {"NAME", s.name}, {"T", cuda_type(s.compute)}, {"O", cuda_type(s.out)}, {"NOPS", std::to_string(nops)},
      {"LOADS", loads}, {"STORE", store}, {"EXPR", s.expr}, {"VLOADS", vloads}, {"VELEM", velem}, {"TLOADS", tloads}};
  std::string src = subst(kStrided, kv);
  if (s.index == IndexMode::None) src += subst(kVector, kv);
  return src;
}

std::string render(const ReduceSpec& s) {
  std::string ident, fold, merge, result = "acc";
  switch (s.fold) {
    case Fold::Sum: ident = "A(0)"; fold = merge = "acc = acc + x;"; break;
    case Fold::Prod: ident = "A(1)"; fold = merge = "acc = acc * x;"; break;
    // NaN wins, as on the CPU: once acc is NaN no comparison replaces it.
    case Fold::Max: ident = "klowest<A>()"; fold = merge = "if ((x > acc) | (x != x)) acc = x;"; break;
    case Fold::Min: ident = "khighest<A>()"; fold = merge = "if ((x < acc) | (x != x)) acc = x;"; break;
    case Fold::ArgMax:
    case Fold::ArgMin: {
      const char* better = s.fold == Fold::ArgMax ? "x > acc" : "x < acc";
      ident = s.fold == Fold::ArgMax ? "klowest<A>()" : "khighest<A>()";
      // The first index of the extreme (NaN counting as the extreme), whatever order partials merge in.
      merge = fold = fmt::format(
          "{{ bool xn = x != x, an = acc != acc;\n"
          "          bool take = ({}) | (xn & !an);\n"
          "          bool tie = (x == acc) | (xn & an);\n"
          "          if (take | (tie & (xi < ai))) {{ acc = x; ai = xi; }} }}",
          better);
      result = "ai";
      break;
    }
  }
  return subst(kReduce, {{"NAME", s.name}, {"I", cuda_type(s.in)}, {"A", cuda_type(s.acc)}, {"O", cuda_type(s.out)},
                         {"IDENT", ident}, {"FOLD", fold}, {"MERGE", merge}, {"RESULT", result}});
}

std::string render_module(const std::vector<ElementwiseSpec>& ew, const std::vector<ReduceSpec>& red) {
  std::string src = render_prelude();
  for (const auto& s : ew) src += render(s);
  for (const auto& s : red) src += render(s);
  return src;
}

}  // namespace kiln::cuda
