// The Kernel runtime object: lowers and compiles a group, then drives the generated function over
// tensors. The generated code handles one run of n elements along the innermost dimension where every
// input has inner stride 1 or 0; the driver here collapses the other dims and iterates them. An input
// whose inner stride (after collapsing) is neither 0 nor 1 (a transposed view, a sliced step) is first
// made contiguous in the iteration shape (expand + contiguous): one extra pass over that input, chosen
// over AVX2/AVX-512 gathers, which are slower than the copy on every CPU we measured and would double
// the number of variants.
#include "backends/x86/kernel.h"
#include "backends/x86/row_chunks.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "backends/x86/kernel_emitter.h"
#include "backends/x86/program.h"
#include "core/error.h"
#include "core/ir/graph.h"
#include "core/scalar_math.h"

namespace kiln::x86 {
using detail::Program;
using detail::PValue;

namespace {

constexpr int kMaxDims = 16;
constexpr int64_t kShortRow = 64;  // innermost rows shorter than this are worth widening (below)
constexpr int64_t kGrain = 32768;
constexpr int64_t kStreamBytes = int64_t(16) << 20;

Shape broadcast_shape(const std::vector<const Shape*>& shapes) {
  Shape out;
  for (const Shape* s : shapes) out = broadcast_shapes("x86 kernel", out, *s);
  return out;
}

// Element strides of t in the iteration shape (0 where broadcast).
std::vector<int64_t> strides_in(const Tensor& t, const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 0);
  size_t off = shape.size() - size_t(t.dim());
  for (size_t d = 0; d < size_t(t.dim()); ++d)
    st[off + d] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  return st;
}

struct Loop {
  int nd = 0;                 // dims, 0 innermost
  int64_t size[kMaxDims];
  std::vector<std::array<int64_t, kMaxDims>> stride;  // per operand, in bytes
  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < nd; ++d) n *= size[d];
    return n;
  }
};

// Builds the loop over `shape` (dims [0, end) of it, row-major) for operands with element strides st
// and sizes esz; merges dims that are contiguous for every operand, drops size-1 dims.
Loop make_loop(const Shape& shape, size_t end, const std::vector<std::vector<int64_t>>& st,
               const std::vector<int64_t>& esz) {
  Loop L;
  L.stride.resize(st.size());
  for (size_t dd = end; dd-- > 0;) {
    int64_t n = shape[dd];
    if (n == 1) continue;
    if (L.nd > 0) {
      bool merge = true;
      for (size_t k = 0; k < st.size(); ++k)
        if (st[k][dd] * esz[k] != L.stride[k][size_t(L.nd - 1)] * L.size[L.nd - 1]) merge = false;
      if (merge) {
        L.size[L.nd - 1] *= n;
        continue;
      }
    }
    if (L.nd == kMaxDims) fail("x86 kernel: more than {} dims", kMaxDims);
    L.size[L.nd] = n;
    for (size_t k = 0; k < st.size(); ++k) L.stride[k][size_t(L.nd)] = st[k][dd] * esz[k];
    ++L.nd;
  }
  return L;
}

// Calls fn over linear elements [begin, end) of L, one call per (partial) innermost row.
void run_range(detail::KernelFn fn, const Loop& L, char* const* base, int64_t begin, int64_t end, void* acc) {
  const size_t nops = L.stride.size();
  char* p[64];
  if (L.nd == 0) {
    for (size_t k = 0; k < nops; ++k) p[k] = base[k];
    if (end > begin) fn(p, 1, acc);
    return;
  }
  int64_t idx[kMaxDims];
  int64_t rem = begin;
  for (size_t k = 0; k < nops; ++k) p[k] = base[k];
  for (int d = 0; d < L.nd; ++d) {
    idx[d] = rem % L.size[d];
    rem /= L.size[d];
    for (size_t k = 0; k < nops; ++k) p[k] += idx[d] * L.stride[k][size_t(d)];
  }
  const int64_t inner = L.size[0];
  for (int64_t pos = begin; pos < end;) {
    int64_t n = std::min(inner - idx[0], end - pos);
    fn(p, n, acc);
    pos += n;
    idx[0] += n;
    for (size_t k = 0; k < nops; ++k) p[k] += n * L.stride[k][0];
    if (idx[0] < inner) continue;
    idx[0] = 0;
    for (size_t k = 0; k < nops; ++k) p[k] -= inner * L.stride[k][0];
    for (int d = 1; d < L.nd; ++d) {
      for (size_t k = 0; k < nops; ++k) p[k] += L.stride[k][size_t(d)];
      if (++idx[d] < L.size[d]) break;
      idx[d] = 0;
      for (size_t k = 0; k < nops; ++k) p[k] -= L.size[d] * L.stride[k][size_t(d)];
    }
  }
}

// A reduction's start value and step, from its row of core/ops.def.
template <class A>
A identity(OpId op) {
  using namespace scalar_math;
  switch (op) {
#define KILN_REDUCE(Id, name, init, fold) \
  case OpId::Id:                          \
    return init;
#define KILN_OTHER(Id) \
  case OpId::Id:       \
    break;
#include "core/ops.def"
  }
  fail("x86: {} is not a reduction", op_name(op));
}
template <class A>
A combine(OpId op, A acc, A x) {
  switch (op) {
#define KILN_REDUCE(Id, name, init, fold) \
  case OpId::Id:                          \
    return fold;
#define KILN_OTHER(Id) \
  case OpId::Id:       \
    break;
#include "core/ops.def"
  }
  fail("x86: {} is not a reduction", op_name(op));
}

std::string default_name(const Program& p) {
  std::string s = "kiln_fused_";
  s.append(std::to_string(p.num_ops + (p.red_val >= 0)));
  int shown = 0;
  for (const auto& v : p.vals) {
    if (v.kind != PValue::Node) continue;
    if (shown++ == 4) {
      s += "_etc";
      break;
    }
    s.push_back('_');
    s.append(op_name(v.op));
  }
  if (p.red_val >= 0) {
    s.push_back('_');
    s.append(op_name(p.red_op));
  }
  return s;
}

}  // namespace

namespace detail {

// KILN_X86_PERF_MAP=1: generated code named in /tmp/perf-PID.map, so `perf report` shows kernels by group
void perf_map(const void* code, size_t size, const std::string& name) {
  static const bool on = std::getenv("KILN_X86_PERF_MAP") != nullptr;
  if (!on) return;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  if (FILE* f = std::fopen(path.c_str(), "a")) {
    std::fprintf(f, "%lx %zx %s\n", reinterpret_cast<unsigned long>(code), size, name.c_str());
    std::fclose(f);
  }
}

}  // namespace detail

// Compiling is the check: lowering raises on what the emitter lacks, and emitting the default variant
// on a group that needs more registers than the ISA has.
bool supported(const ir::Graph& group, std::string* why_not) {
  try {
    compile(group);
    return true;
  } catch (const Error& e) {
    if (why_not) *why_not = e.what();
    return false;
  }
}

Kernel::~Kernel() = default;

std::shared_ptr<Kernel> compile(const ir::Graph& group, const std::string& name) {
  std::shared_ptr<Kernel> k(new Kernel());
  k->prog_ = std::make_unique<Program>(detail::lower(group));
  if (k->prog_->input_dtypes.size() > 62 || k->prog_->input_dtypes.size() + k->prog_->outputs.size() > 64)
    fail("x86: more than 62 inputs or 64 inputs and outputs");
  k->isa_ = best_isa();
  if (k->isa_ == Isa::None) fail("x86: this CPU has neither AVX2 nor AVX-512");
  k->name_ = name.empty() ? default_name(*k->prog_) : name;
  k->default_ = &k->variant(0, false);
  return k;
}

const detail::Code& Kernel::variant(uint64_t bcast, bool nt) const {
  uint64_t key = bcast | (nt ? uint64_t(1) << 63 : 0);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = variants_.find(key);
  if (it != variants_.end()) return *it->second;
  auto code = detail::emit(*prog_, isa_, {bcast, nt});
  detail::perf_map(code->bytes(), code->size(), name_);
  const detail::Code& ref = *code;
  variants_.emplace(key, std::move(code));
  return ref;
}

size_t Kernel::code_size() const { return default_->size(); }

std::string Kernel::disassembly() const {
  const uint8_t* b = default_->bytes();
  size_t n = default_->size();
  std::string header = name_ + " (" + std::string(isa_name(isa_)) + ", " + std::to_string(n) + " bytes)\n";
  char path[] = "/tmp/kiln_x86_XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) {
    bool ok = write(fd, b, n) == ssize_t(n);
    close(fd);
    if (ok) {
      std::string cmd = "objdump -D -b binary -mi386:x86-64 -M intel " + std::string(path) + " 2>/dev/null";
      if (FILE* f = popen(cmd.c_str(), "r")) {
        std::string out;
        char buf[4096];
        size_t r;
        while ((r = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, r);
        int rc = pclose(f);
        unlink(path);
        if (rc == 0 && !out.empty()) return header + out;
      }
    }
    unlink(path);
  }
  std::string out = header;
  char hex[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", b[i]);
    out += hex;
    out += (i % 32 == 31) ? '\n' : ' ';
  }
  return out + "\n";
}

Tensors Kernel::run(const Tensors& in_given) const {
  const Program& p = *prog_;
  const size_t ni = p.input_dtypes.size();
  if (in_given.size() != ni) fail("x86 kernel {}: expected {} inputs, got {}", name_, ni, in_given.size());
  Tensors in = in_given;
  std::vector<const Shape*> shapes;
  for (size_t k = 0; k < ni; ++k) {
    if (!in[k].defined()) fail("x86 kernel {}: input {} is undefined", name_, k);
    if (in[k].device() != Device::cpu()) fail("x86 kernel {}: input {} is not on the cpu", name_, k);
    if (in[k].dtype() != p.input_dtypes[k])
      fail("x86 kernel {}: input {} has dtype {}, expected {}", name_, k, dtype_name(in[k].dtype()),
           dtype_name(p.input_dtypes[k]));
    shapes.push_back(&in[k].sizes());
  }
  const Shape shape = shapes.empty() ? Shape{} : broadcast_shape(shapes);
  const size_t r = shape.size();
  // Each output must have the iteration shape (an output depending on fewer inputs could be smaller).
  auto dep_shape = [&](uint64_t deps) {
    std::vector<const Shape*> s;
    for (size_t k = 0; k < ni; ++k)
      if ((deps >> std::min<size_t>(k, 63)) & 1) s.push_back(&in[k].sizes());
    return broadcast_shape(s);
  };
  for (int v : p.outputs)
    if (dep_shape(p.vals[size_t(v)].deps) != shape)
      fail("x86 kernel {}: an output has shape {}, not the iteration shape {}", name_,
           shape_str(dep_shape(p.vals[size_t(v)].deps)), shape_str(shape));
  const bool has_red = p.red_val >= 0;
  bool red_all = true;
  if (has_red) {
    if (dep_shape(p.vals[size_t(p.red_val)].deps) != shape)
      fail("x86 kernel {}: the reduction's input does not have the iteration shape", name_);
    if (!p.red_dims.empty()) {
      std::vector<bool> seen(r, false);
      for (int64_t d : p.red_dims) {
        int64_t dd = d < 0 ? d + int64_t(r) : d;
        if (dd < 0 || dd >= int64_t(r)) fail("x86 kernel {}: reduction dim {} out of range", name_, d);
        seen[size_t(dd)] = true;
      }
      size_t cnt = std::count(seen.begin(), seen.end(), true);
      if (cnt != r) {
        if (!(cnt == 1 && seen[r - 1])) fail("x86 kernel {}: reduction over dims other than all or the last", name_);
        red_all = false;
      }
    }
  }
  const DType cd = p.compute();
  const int64_t cs = int64_t(itemsize(cd));
  // outputs
  std::vector<Tensor> ew(p.outputs.size());
  for (size_t j = 0; j < p.outputs.size(); ++j) ew[j] = Tensor::empty(shape, p.output_dtypes[j]);
  Tensor red;
  if (has_red) {
    Shape rs;
    if (red_all) rs = p.red_keepdim ? Shape(r, 1) : Shape{};
    else {
      rs = shape;
      if (p.red_keepdim) rs[r - 1] = 1;
      else rs.pop_back();
    }
    red = Tensor::empty(rs, cd);
  }
  // A bf16 reduction result is folded in f32 and rounded once, at the end (a few values per row).
  auto red_out = [&] { return p.red_dtype == cd ? red : red.to(p.red_dtype); };
  auto result = [&] {
    Tensors outs;
    Tensor r = has_red ? red_out() : Tensor();
    for (int s : p.out_slot) outs.push_back(s < 0 ? r : ew[size_t(s)]);
    return outs;
  };
  const int64_t numel = numel_of(shape);
  if (numel == 0) {
    if (has_red) {
      visit_dtype(cd, [&](auto v) {
        using T = decltype(v);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          T* o = red.data_ptr<T>();
          for (int64_t i = 0; i < red.numel(); ++i) o[i] = identity<T>(p.red_op);
        }
      });
    }
    return result();
  }

  // Operands: inputs, then elementwise outputs. Strides in elements in the iteration shape.
  const size_t nops = ni + ew.size();
  std::vector<std::vector<int64_t>> st(nops);
  std::vector<int64_t> esz(nops);
  auto contiguous_strides = [&](std::vector<int64_t>& s) {
    s.assign(r, 0);
    int64_t m = 1;
    for (size_t d = r; d-- > 0;) {
      s[d] = shape[d] == 1 ? 0 : m;
      m *= shape[d];
    }
  };
  const size_t end = has_red && !red_all ? r - 1 : r;  // reduce-last: the last dim is its own loop
  Loop L;
  bool widened = false;
  for (int attempt = 0; attempt < 3; ++attempt) {
    for (size_t k = 0; k < ni; ++k) {
      st[k] = strides_in(in[k], shape);
      esz[k] = int64_t(in[k].element_size());
    }
    for (size_t j = 0; j < ew.size(); ++j) {
      contiguous_strides(st[ni + j]);
      esz[ni + j] = int64_t(ew[j].element_size());
    }
    if (has_red && !red_all) {
      // inner = the reduced last dim: every input needs stride 0 or 1 there
      bool redo = false;
      for (size_t k = 0; k < ni; ++k) {
        int64_t s = r ? st[k][r - 1] : 0;
        if (s != 0 && s != 1) {
          in[k] = in[k].expand(shape).contiguous();
          redo = true;
        }
      }
      if (redo) continue;
      L = make_loop(shape, end, st, esz);
      break;
    }
    L = make_loop(shape, end, st, esz);
    bool redo = false;
    if (L.nd > 0)
      for (size_t k = 0; k < ni; ++k) {
        int64_t s = L.stride[k][0];
        if (s != 0 && s != esz[k]) {
          in[k] = in[k].expand(shape).contiguous();
          redo = true;
        }
      }
    // Short rows (a per-channel operand against [N, C, H, W] with small H*W: 4 floats a row at ResNet's
    // layer3) cost a call and a masked tail each: ~100 us for 32K elements, and on two threads no less.
    // Such an operand expanded over the dims from its first varying one is small and lets those dims
    // merge into one long row.
    if (!redo && !widened && L.nd >= 2 && L.size[0] < kShortRow) {
      widened = true;
      for (size_t k = 0; k < ni; ++k) {
        if (L.stride[k][0] != 0) continue;
        size_t first = 0;
        while (first < r && st[k][first] == 0) ++first;
        if (first == r) continue;  // a scalar: a splat already
        Shape ts(r, 1);
        int64_t n = 1;
        for (size_t d = first; d < r; ++d) n *= (ts[d] = shape[d]);
        if (n * 2 > numel) continue;
        in[k] = in[k].expand(ts).contiguous();
        redo = true;
      }
    }
    if (!redo) break;
  }
  // variant
  uint64_t bcast = 0;
  const int64_t inner = has_red && !red_all ? shape[r - 1] : (L.nd ? L.size[0] : 1);
  for (size_t k = 0; k < ni; ++k) {
    int64_t s = has_red && !red_all ? st[k][r - 1] : (L.nd ? L.stride[k][0] : 0);
    if (s == 0 && inner > 1) bcast |= uint64_t(1) << k;
    if (inner == 1) bcast |= uint64_t(1) << k;  // one element per run: a splat is as good
  }
  std::vector<char*> base(nops);
  for (size_t k = 0; k < ni; ++k) base[k] = static_cast<char*>(in[k].raw_data());
  for (size_t j = 0; j < ew.size(); ++j) base[ni + j] = static_cast<char*>(ew[j].raw_data());
  // Non-temporal stores skip the read-for-ownership of the output lines, which pays off only when the
  // group is memory-bound: measured here, they slow the transcendental 8-op chain down (AVX2 by ~1.4x),
  // so only groups of cheap ops stream.
  bool cheap = true;
  for (const auto& v : p.vals)
    if (v.kind == PValue::Node && op_facts(v.op).cost == OpCost::Math) cheap = false;
  bool nt = false;
  if (cheap && !ew.empty() && L.nd == 1 && !(has_red && !red_all)) {
    int64_t bytes = 0;
    nt = true;
    for (size_t j = 0; j < ew.size(); ++j) {
      bytes += numel * esz[ni + j];
      if (reinterpret_cast<uintptr_t>(base[ni + j]) % 64) nt = false;
    }
    nt = nt && bytes >= kStreamBytes;
  }
  const detail::KernelFn fn = variant(bcast, nt).fn();
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int W = 64 / int(cs);
  visit_dtype(cd, [&](auto tv) {
    using T = decltype(tv);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      if (has_red && !red_all) {
        // one row per reduction output element; the loop over the outer dims gives row starts
        const int64_t rows = numel / inner;
        T* out = red.data_ptr<T>();
        Loop O = make_loop(shape, end, st, esz);
        auto do_rows = [&](int64_t b, int64_t e) {
          alignas(64) T lanes[16];
          // iterate rows b..e: each row is a call with n = inner at the row's pointers
          std::vector<char*> p0(nops);
          for (int64_t row = b; row < e; ++row) {
            // pointers for this row
            int64_t rem = row;
            for (size_t k = 0; k < nops; ++k) p0[k] = base[k];
            for (int d = 0; d < O.nd; ++d) {
              int64_t ix = rem % O.size[d];
              rem /= O.size[d];
              for (size_t k = 0; k < nops; ++k) p0[k] += ix * O.stride[k][size_t(d)];
            }
            for (int l = 0; l < W; ++l) lanes[l] = identity<T>(p.red_op);
            fn(p0.data(), inner, lanes);
            T a = lanes[0];
            for (int l = 1; l < W; ++l) a = combine<T>(p.red_op, a, lanes[l]);
            out[row] = a;
          }
        };
        for_row_chunks(threads, numel >= 2 * kGrain, rows, do_rows);
        return;
      }
      int chunks = 1;
      if (threads > 1 && numel >= 2 * kGrain) chunks = int(std::min<int64_t>(threads, numel / kGrain));
      std::vector<std::array<T, 16>> part(static_cast<size_t>(chunks));
      for (auto& a : part) a.fill(identity<T>(p.red_op));
      auto chunk = [&](int c) {
        int64_t b = (numel * c / chunks) & ~int64_t(63);
        int64_t e = c + 1 == chunks ? numel : (numel * (c + 1) / chunks) & ~int64_t(63);
        alignas(64) T lanes[16];
        std::copy(part[size_t(c)].begin(), part[size_t(c)].end(), lanes);
        run_range(fn, L, base.data(), b, e, lanes);
        std::copy(lanes, lanes + 16, part[size_t(c)].begin());
      };
      if (chunks > 1) {
#pragma omp parallel for num_threads(chunks) schedule(static)
        for (int c = 0; c < chunks; ++c) chunk(c);
      } else {
        chunk(0);
      }
      if (has_red) {
        T a = identity<T>(p.red_op);
        for (auto& pa : part)
          for (int l = 0; l < W; ++l) a = combine<T>(p.red_op, a, pa[size_t(l)]);
        *red.data_ptr<T>() = a;
      }
    }
  });
  return result();
}

}  // namespace kiln::x86
