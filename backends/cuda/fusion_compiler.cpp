#include "backends/cuda/fusion_compiler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "backends/cuda/kernel_cache.h"
#include "backends/cuda/source_render.h"
#include "core/error.h"
#include "core/ir/graph.h"
#include "core/type_promotion.h"

namespace kiln::cuda {
namespace {

bool is_half(DType t) { return t == DType::BFloat16 || t == DType::Float16; }
// The half types are storage: they compute in float, as the eager kernels do.
DType compute_of(DType t) { return is_half(t) ? DType::Float32 : t; }

bool is_reduce_op(OpId op) { return op_info(op).kind == OpKind::Reduce; }

std::optional<DType> dtype_of(const ir::Value* v) {
  const ir::Type& t = v->type();
  if (!t.is_tensor() || !t.dtype) return std::nullopt;
  return t.dtype;
}

// Over every dim (true), the last one (false), or neither (nothing).
std::optional<bool> reduces_all(const ir::Node& n) {
  const auto& in = n.input(0)->type().dims;
  if (!in) return std::nullopt;
  if (!n.attrs().has("dims") || n.attrs().ints("dims").empty()) return true;
  const Shape& d = n.attrs().ints("dims");
  int64_t rank = int64_t(in->size());
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t x : d) {
    int64_t dd = x < 0 ? x + rank : x;
    if (dd < 0 || dd >= rank) return std::nullopt;
    seen[size_t(dd)] = true;
  }
  size_t cnt = 0;
  for (bool s : seen) cnt += s;
  if (cnt == size_t(rank)) return true;
  if (cnt == 1 && seen[size_t(rank - 1)]) return false;
  return std::nullopt;
}

// The conversions between kernel types; appended to source_render's
// prelude (the half types, kabs, kpow, klowest, kiln_tid ...).
constexpr const char* kFusedPrelude = R"(
// Conversions between any two kernel types; the half types go through float.
template <class O, class I> __device__ __forceinline__ O kcast(I x) { return O(x); }
template <class O> __device__ __forceinline__ O kcast(kbf16 x) { return O(float(x)); }
template <class O> __device__ __forceinline__ O kcast(kf16 x) { return O(float(x)); }
)";

std::string literal(double v, DType t) {
  switch (t) {
    case DType::Bool: return v != 0 ? "true" : "false";
    case DType::Int32:
    case DType::Int64: {
      auto i = static_cast<long long>(v);
      if (i == (-9223372036854775807LL - 1)) return "(-9223372036854775807LL - 1)";
      return fmt::format("{}LL", i);
    }
    case DType::BFloat16:
    case DType::Float16:
    case DType::Float32:
    case DType::Float64: {
      // The exact bits: no decimal round trip, and inf and NaN need no spelling.
      long long bits;
      std::memcpy(&bits, &v, sizeof bits);
      return fmt::format("__longlong_as_double({}LL)", bits);
    }
  }
  return "0";
}

double constant_value(const ir::Node& n) {
  if (n.tensor().defined()) {
    if (n.tensor().numel() != 1) fail("cuda fusion: a tensor constant of {} elements (one only)", n.tensor().numel());
    return n.tensor().item<double>();
  }
  for (auto& [name, val] : n.attrs().items()) {
    if (name != "value") continue;
    if (auto* d = std::get_if<double>(&val)) return *d;
    if (auto* i = std::get_if<int64_t>(&val)) return double(*i);
    if (auto* b = std::get_if<bool>(&val)) return *b ? 1.0 : 0.0;
  }
  fail("cuda fusion: a constant without a number value");
}

std::string sanitize(const std::string& s) {
  std::string out = "kiln_";
  for (char c : s) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

// The kernel's one argument (the host fills it in this layout: fusion_backend.cpp's pack_params).
std::string params_struct(const std::string& name, int nptr, int noff) {
  return fmt::format(R"(
struct {0}_params {{
  int ndim;
  int pad;
  long long n, nout, nred;
  long long sizes[KILN_MAX_DIMS];
  char* ptr[{1}];
  long long strides[{2}][KILN_MAX_DIMS];
}};
)",
                     name, std::max(1, nptr), noff);
}

// Every line of `text` (each ending in a newline) prefixed by `by`.
std::string indent(const std::string& text, const std::string& by) {
  std::string out;
  for (size_t b = 0; b < text.size();) {
    size_t e = text.find('\n', b);
    out += by + text.substr(b, e - b + 1);
    b = e + 1;
  }
  return out;
}

struct BodyLine {
  std::string text;
  size_t after;  // how many of the group's reductions (in node order) it reads, directly or not
};

// A row kernel (the x86 backend's row groups, backends/x86/row_kernel.h, for a GPU): reductions over the
// last dim whose results the group's elementwise nodes read (softmax, layer_norm and their gradients).
// A block of threads takes a row: one pass over it per reduction, each recomputing from the inputs what its
// reduction folds (a row is in L1/L2 after the first pass) and reducing through shared memory, then one
// pass storing the outputs; an output of one number per row (a saved mean, a reduction's own result) is
// stored by the row's first element. Every output is an operand with strides, so a row-shaped one (last
// dim 1) is read and written through stride 0 along the row.
FusedKernelSource render_rows(const ir::Graph& g, FusedKernelSource k, const std::vector<const ir::Node*>& reds,
                              const std::vector<BodyLine>& lines, const std::string& loads,
                              const std::unordered_map<const ir::Value*, std::string>& var,
                              const std::unordered_map<const ir::Value*, DType>& type) {
  constexpr size_t kMaxRowReductions = 8;  // a shared array of kFusedReduceThreads each
  if (reds.size() > kMaxRowReductions)
    fail("cuda fusion: a row group of {} reductions, more than the {} a row kernel takes", reds.size(), kMaxRowReductions);
  const ir::Type& space = reds[0]->input(0)->type();
  if (!space.dims || space.dims->empty()) fail("cuda fusion: a row group over a tensor of unknown or no dims");
  ir::Type rowvec = space;
  rowvec.dims->back() = ir::Dim::known(1);
  for (const ir::Node* r : reds)
    if (reduces_all(*r) != std::optional<bool>(false) || !r->attrs().b_or("keepdim", false) || !(r->input(0)->type() == space))
      fail("cuda fusion: a row group's {} must reduce the rows' last dim with keepdim", r->kind_name());
  const bool rows_of_one = space.dims->back() == ir::Dim::known(1);
  const int nin = int(k.inputs.size());
  k.reduces = false;
  k.rows = true;
  std::string stores;
  for (const ir::Value* o : g.outputs()) {
    auto it = var.find(o);
    if (it == var.end()) fail("cuda fusion: a group output is not defined in the group");
    const bool reduced = std::find(reds.begin(), reds.end(), o->node()) != reds.end();
    const bool per_row = !rows_of_one && (reduced || o->type() == rowvec);
    if (!per_row && !(o->type() == space)) fail("cuda fusion: a row group's output has neither the rows' shape nor one number per row");
    const int j = int(k.ew_outputs.size());
    k.out_slot.push_back(j);
    k.ew_outputs.push_back(type.at(o));
    k.row_outputs.push_back(per_row);
    stores += fmt::format("    {}*({}*)(p.ptr[{}] + off[{}]) = {};\n", per_row ? "if (r == 0) " : "",
                          cuda_type(type.at(o)), nin + j, nin + j, it->second);
  }
  if (g.outputs().empty()) fail("cuda fusion: the group has no outputs");
  const int nptr = nin + int(k.ew_outputs.size());
  if (nptr > kMaxFusedOperands)
    fail("cuda fusion: {} inputs and outputs, more than the {} a fused kernel takes", nptr, kMaxFusedOperands);
  const std::string row_loop = fmt::format(
      "    for (long long r = threadIdx.x; r < p.nred; r += blockDim.x) {{\n"
      "      const long long i = row * p.nred + r;\n"
      "      long long off[{0}];\n"
      "      kiln_offsets<{0}>(p, i, off);\n",
      nptr);
  std::string shared, passes;
  for (size_t q = 0; q < reds.size(); ++q) {
    const ir::Node* r = reds[q];
    const DType acc = *dtype_of(r->input(0)) == DType::Float64 ? DType::Float64 : DType::Float32;
    const OpInfo& row = op_info(r->op());
    const std::string fold = fmt::format("acc = {};", row.expr);
    shared += fmt::format("  __shared__ {} sred{}[{}];\n", cuda_type(acc), q, kFusedReduceThreads);
    std::string body = loads;
    for (const BodyLine& l : lines)
      if (l.after <= q) body += l.text;
    passes += fmt::format(
        "    {{\n      typedef {0} A;\n      A acc = {1};\n{2}{3}"
        "        const A x = kcast<A>({4});\n        {5}\n      }}\n"
        "      sred{6}[threadIdx.x] = acc;\n      __syncthreads();\n"
        "      for (int s = blockDim.x / 2; s > 0; s >>= 1) {{\n"
        "        if (threadIdx.x < s) {{\n"
        "          const A x = sred{6}[threadIdx.x + s];\n          acc = sred{6}[threadIdx.x];\n          {5}\n"
        "          sred{6}[threadIdx.x] = acc;\n        }}\n        __syncthreads();\n      }}\n    }}\n"
        "    const {7} {8} = kcast<{7}>(sred{6}[0]);\n",
        cuda_type(acc), row.init, indent(row_loop, "  "), indent(body, "    "), var.at(r->input(0)), fold, q,
        cuda_type(type.at(r->output())), var.at(r->output()));
  }
  std::string body = loads;
  for (const BodyLine& l : lines) body += l.text;
  std::string src = render_prelude() + kFusedPrelude + params_struct(k.name, nptr, nptr);
  src += fmt::format(R"(
extern "C" __global__ void {0}(const {0}_params p) {{
{1}  for (long long row = blockIdx.x; row < p.nout; row += gridDim.x) {{
{2}{3}{4}{5}    }}
    __syncthreads();  // every thread has read this row's sred before the next row's first pass writes it
  }}
}}
)",
                     k.name, shared, passes, row_loop, indent(body, "  "), indent(stores, "  "));
  k.source = std::move(src);
  return k;
}

}  // namespace

bool can_fuse(const ir::Node& n, bool reduction) {
  if (!n.is_op() || n.outputs().size() != 1) return false;
  if (!dtype_of(n.output())) return false;
  for (const ir::Value* v : n.inputs())
    if (!dtype_of(v)) return false;
  const OpInfo& info = op_info(n.op());
  if (reduction) {
    if (!is_reduce_op(n.op()) || n.inputs().size() != 1) return false;
    DType in = *dtype_of(n.input(0));
    if (!is_floating(in) || *dtype_of(n.output()) != in) return false;
    return reduces_all(n).has_value();
  }
  if (n.is_op(OpId::Where)) return n.inputs().size() == 3 && *dtype_of(n.input(0)) == DType::Bool;
  if (n.is_op(OpId::Cast)) return n.inputs().size() == 1;
  return info.kind == OpKind::Unary || info.kind == OpKind::Binary;
}

FusedKernelSource render_fusion(const ir::Graph& g, const std::string& name) {
  FusedKernelSource k;
  k.name = sanitize(name);
  std::unordered_map<const ir::Value*, std::string> var;
  std::unordered_map<const ir::Value*, DType> type;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    auto dt = dtype_of(g.inputs()[i]);
    if (!dt) fail("cuda fusion: group input {} is not a tensor of known dtype", i);
    k.inputs.push_back(*dt);
  }
  int next = 0;
  const int nin = int(k.inputs.size());
  auto val = [&](const ir::Node& n, size_t i) -> const std::string& {
    auto it = var.find(n.input(i));
    if (it == var.end()) fail("cuda fusion: {} reads a value defined outside the group", n.kind_name());
    return it->second;
  };
  auto define = [&](const ir::Value* v, DType t) {
    std::string name = fmt::format("v{}", next++);
    var[v] = name;
    type[v] = t;
    return name;
  };
  // Operands: the inputs first, then the elementwise outputs.
  std::string loads;
  for (int i = 0; i < nin; ++i) {
    std::string t = cuda_type(k.inputs[size_t(i)]);
    std::string v = define(g.inputs()[size_t(i)], k.inputs[size_t(i)]);
    loads += fmt::format("    const {0} {1} = *(const {0}*)(p.ptr[{2}] + off[{2}]);\n", t, v, i);
  }
  // Each node's line, and how many of the group's reductions it reads through its inputs: a row kernel's
  // pass before the q-th reduction holds the lines that read fewer than q+1.
  std::vector<BodyLine> lines;
  std::vector<const ir::Node*> reds;
  std::unordered_map<const ir::Value*, size_t> reads_reductions;
  bool inner = false;  // a node follows a reduction: the group is a row kernel
  for (const ir::Node* n : g.block()->nodes()) {
    size_t after = 0;
    for (const ir::Value* in : n->inputs()) {
      auto it = reads_reductions.find(in);
      if (it != reads_reductions.end()) after = std::max(after, it->second);
    }
    inner |= !reds.empty();
    if (n->prim() == ir::Prim::Constant) {
      auto dt = dtype_of(n->output());
      DType t = dt ? *dt : (n->tensor().defined() ? n->tensor().dtype() : DType::Float64);
      std::string v = define(n->output(), t);
      lines.push_back({fmt::format("    const {0} {1} = kcast<{0}>({2});\n", cuda_type(t), v, literal(constant_value(*n), t)), 0});
      continue;
    }
    if (!n->is_op()) fail("cuda fusion: {} is not supported in a fused kernel", n->kind_name());
    const OpId op = n->op();
    const OpInfo& info = op_info(op);
    if (is_reduce_op(op)) {
      if (!can_fuse(*n, true))
        fail("cuda fusion: {} of {} over dims other than all or the last", info.name,
             n->input(0)->type().dtype ? dtype_name(*n->input(0)->type().dtype) : "unknown dtype");
      val(*n, 0);
      reds.push_back(n);
      define(n->output(), *dtype_of(n->output()));
      reads_reductions[n->output()] = reds.size();
      continue;
    }
    if (!can_fuse(*n, false)) fail("cuda fusion: {} is not supported in a fused kernel", info.name);
    reads_reductions[n->output()] = after;
    DType out = *dtype_of(n->output());
    std::string ot = cuda_type(out);
    std::string v = define(n->output(), out);
    if (op == OpId::Cast) {
      lines.push_back({fmt::format("    const {0} {1} = kcast<{0}>({2});\n", ot, v, val(*n, 0)), after});
      continue;
    }
    if (op == OpId::Where) {
      std::string t = cuda_type(compute_of(out));
      lines.push_back({fmt::format("    const {0} {1} = kcast<{0}>({2} ? kcast<{3}>({4}) : kcast<{3}>({5}));\n", ot, v,
                                   val(*n, 0), t, val(*n, 1), val(*n, 2)),
                       after});
      continue;
    }
    DType compute;
    std::string operands;
    if (info.kind == OpKind::Unary) {
      compute = unary_compute_dtype(op, *dtype_of(n->input(0)));
      operands = fmt::format("const T x = kcast<T>({});", val(*n, 0));
    } else {
      ResultTypeState st;
      for (const ir::Value* in : n->inputs()) {
        const ir::Type& t = in->type();
        bool zero_dim = t.dims && t.dims->empty();
        const ir::Node* src = in->node();
        bool number = src->prim() == ir::Prim::Constant &&
                      (!src->tensor().defined() || src->attrs().b_or("wrapped", false));
        st.add(*t.dtype, zero_dim, number);
      }
      compute = binary_compute_dtype(op, st);
      operands = fmt::format("const T a = kcast<T>({}); const T b = kcast<T>({});", val(*n, 0), val(*n, 1));
    }
    lines.push_back({fmt::format("    {0} {1};\n    {{ typedef {2} T; {3} {1} = kcast<{0}>({4}); }}\n", ot, v,
                                 cuda_type(compute_of(compute)), operands, info.expr),
                     after});
  }
  if (inner || reds.size() > 1) return render_rows(g, std::move(k), reds, lines, loads, var, type);
  const ir::Node* red = reds.empty() ? nullptr : reds[0];
  std::string body;
  for (const BodyLine& l : lines) body += l.text;
  // Outputs: elementwise ones are stored per element; the reduction's result once per row.
  std::vector<const ir::Value*> ew;
  for (const ir::Value* o : g.outputs()) {
    if (red && o == red->output()) {
      k.out_slot.push_back(-1);
      continue;
    }
    auto it = var.find(o);
    if (it == var.end()) fail("cuda fusion: a group output is not defined in the group");
    k.out_slot.push_back(int(ew.size()));
    ew.push_back(o);
    k.ew_outputs.push_back(type.at(o));
  }
  if (g.outputs().empty()) fail("cuda fusion: the group has no outputs");
  const int nout = int(ew.size());
  const int noff = std::max(1, nout + nin);
  const int nptr = nout + nin + (red ? 1 : 0);
  if (nptr > kMaxFusedOperands)
    fail("cuda fusion: {} inputs and outputs, more than the {} a fused kernel takes", nptr, kMaxFusedOperands);
  std::string stores;
  for (int j = 0; j < nout; ++j)
    stores += fmt::format("    *({0}*)(p.ptr[{1}] + off[{1}]) = {2};\n", cuda_type(k.ew_outputs[size_t(j)]), nin + j,
                          var.at(ew[size_t(j)]));
  // inputs are declared before the body reads them
  std::string elem = loads + body + stores;
  // The same body over four elements at a time, for the contiguous launch: 16-byte loads and stores,
  // and no index arithmetic. An input of stride 0 (a broadcast scalar) is read once and splat.
  std::string vloads, lanes, vstores, vsaves;
  for (int i = 0; i < nin; ++i) {
    std::string t = cuda_type(k.inputs[size_t(i)]);
    vloads += fmt::format(
        "    kvec4<{0}> in{1};\n    if (p.strides[{1}][0] == 0) {{ const {0} s = *(const {0}*)p.ptr[{1}]; "
        "in{1}.v[0] = s; in{1}.v[1] = s; in{1}.v[2] = s; in{1}.v[3] = s; }}\n"
        "    else in{1} = ((const kvec4<{0}>*)p.ptr[{1}])[jv];\n",
        t, i);
    lanes += fmt::format("      const {0} {1} = in{2}.v[kiln_l];\n", t, var.at(g.inputs()[size_t(i)]), i);
  }
  for (int j = 0; j < nout; ++j) {
    std::string t = cuda_type(k.ew_outputs[size_t(j)]);
    vloads += fmt::format("    kvec4<{}> out{};\n", t, j);
    vstores += fmt::format("      out{}.v[kiln_l] = {};\n", j, var.at(ew[size_t(j)]));
    vsaves += fmt::format("    ((kvec4<{}>*)p.ptr[{}])[jv] = out{};\n", t, nin + j, j);
  }
  const std::string vbody = indent(body, "  ");

  std::string src = render_prelude() + kFusedPrelude + params_struct(k.name, nptr, noff);
  if (!red) {
    src += fmt::format(R"(
extern "C" __global__ void {0}(const {0}_params p) {{
  for (long long i = kiln_tid(); i < p.n; i += kiln_nthreads()) {{
    long long off[{1}];
    kiln_offsets<{1}>(p, i, off);
{2}  }}
}}

extern "C" __global__ void {0}_v(const {0}_params p) {{
  const long long nv = p.n / 4;
  for (long long jv = kiln_tid(); jv < nv; jv += kiln_nthreads()) {{
{3}#pragma unroll
    for (int kiln_l = 0; kiln_l < 4; ++kiln_l) {{
{4}{5}{6}    }}
{7}  }}
  for (long long i = nv * 4 + kiln_tid(); i < p.n; i += kiln_nthreads()) {{
    long long off[{1}];
#pragma unroll
    for (int k = 0; k < {1}; ++k) off[k] = i * p.strides[k][0];
{2}  }}
}}
)",
                       k.name, noff, elem, vloads, lanes, vbody, vstores, vsaves);
  } else {
    k.reduces = true;
    k.reduce_all = *reduces_all(*red);
    k.keepdim = red->attrs().b_or("keepdim", false);
    k.red_dtype = *dtype_of(red->output());
    DType acc = *dtype_of(red->input(0)) == DType::Float64 ? DType::Float64 : DType::Float32;
    // The start value and step from the reduction's row of core/ops.def (NaN wins a max or min).
    const OpInfo& row = op_info(red->op());
    std::string ident(row.init), fold = fmt::format("acc = {};", row.expr);
    const std::string indented = indent(elem, "    ");
    src += fmt::format(R"(
extern "C" __global__ void {0}(const {0}_params p) {{
  typedef {1} A;
  __shared__ A sred[{2}];
  for (long long o = blockIdx.x; o < p.nout; o += gridDim.x) {{
    A acc = {3};
    for (long long r = threadIdx.x; r < p.nred; r += blockDim.x) {{
      const long long i = o * p.nred + r;
      long long off[{4}];
      kiln_offsets<{4}>(p, i, off);
{5}      const A x = kcast<A>({6});
      {7}
    }}
    sred[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{
      if (threadIdx.x < s) {{
        const A x = sred[threadIdx.x + s];
        acc = sred[threadIdx.x];
        {7}
        sred[threadIdx.x] = acc;
      }}
      __syncthreads();
    }}
    if (threadIdx.x == 0) (({8}*)p.ptr[{9}])[o] = kcast<{8}>(sred[0]);
    __syncthreads();
  }}
}}
)",
                       k.name, cuda_type(acc), kFusedReduceThreads, ident, noff, indented, var.at(red->input(0)),
                       fold, cuda_type(k.red_dtype), nptr - 1);
  }
  k.source = std::move(src);
  return k;
}

std::vector<char> compile_fusion(const FusedKernelSource& k, int arch) { return cubin_for(k.source, arch, k.name); }

}  // namespace kiln::cuda
