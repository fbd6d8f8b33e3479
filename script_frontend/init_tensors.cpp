// Tensor arithmetic in __init__ on eager tensors (see init_tensors.h): the values torch computes, in the
// same dtypes (torch.arange(n) * 27.89 is float32 arithmetic, as regnet's widths need to round alike).
#include "script_frontend/init_tensors.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "core/error.h"
#include "eager/ops.h"
#include "script_frontend/torch_devices.h"

namespace kiln::script {

using Kind = Static::Kind;

namespace {

Static of(Tensor t) { return Static::of_tensor(std::move(t), false); }

std::optional<Scalar> scalar_of(const Static& v) {
  if (v.kind == Kind::Int) return Scalar(static_cast<long long>(v.i));
  if (v.kind == Kind::Bool) return Scalar(v.i != 0);
  if (v.kind == Kind::Float) return Scalar(v.f);
  return std::nullopt;
}

// A number as a 0-d tensor that does not widen the other operand's dtype (torch's wrapped numbers).
Tensor operand(const Static& v, std::string_view what) {
  if (v.kind == Kind::Tensor) return v.tensor;
  if (auto s = scalar_of(v)) return Tensor::wrap_scalar(*s);
  fail("unsupported operand type for {}: {}", what, v.type_name());
}

int64_t int_of(const Static& v, const char* what) {
  if (v.kind != Kind::Int) fail("{} must be an int, got {}", what, v.type_name());
  return v.i;
}

Shape ints_of(const std::vector<Static>& a, size_t from, const char* what) {
  if (a.size() == from + 1 && (a[from].kind == Kind::Tuple || a[from].kind == Kind::List)) return ints_of(a[from].elems, 0, what);
  Shape s;
  for (size_t i = from; i < a.size(); ++i) s.push_back(int_of(a[i], what));
  return s;
}

// Elementwise through double on the host: exact for float32 and for ints below 2^53.
Tensor map_values(const Tensor& t, double (*f)(double)) {
  Tensor d = t.contiguous().to(DType::Float64).clone();
  double* p = d.data_ptr<double>();
  for (int64_t i = 0; i < d.numel(); ++i) p[i] = f(p[i]);
  return d.to(t.dtype());
}

// torch's elementwise math, through double on the host (torch promotes ints to float32): correctly rounded, as
// torch's float32 kernels give it (eager's fast exp and log may differ by an ulp, which word_language_model's
// positions multiply into visible differences), and what eager/ops.h lacks
using HostFn = double (*)(double);
const std::map<std::string, HostFn>& host_math() {
  static const std::map<std::string, HostFn> fns = {
      {"log", [](double x) { return std::log(x); }},       {"exp", [](double x) { return std::exp(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"sin", [](double x) { return std::sin(x); }},       {"cos", [](double x) { return std::cos(x); }},
      {"tan", [](double x) { return std::tan(x); }},       {"asin", [](double x) { return std::asin(x); }},
      {"acos", [](double x) { return std::acos(x); }},     {"atan", [](double x) { return std::atan(x); }},
      {"sinh", [](double x) { return std::sinh(x); }},     {"cosh", [](double x) { return std::cosh(x); }},
      {"asinh", [](double x) { return std::asinh(x); }},   {"acosh", [](double x) { return std::acosh(x); }},
      {"atanh", [](double x) { return std::atanh(x); }},   {"log2", [](double x) { return std::log2(x); }},
      {"log10", [](double x) { return std::log10(x); }},   {"log1p", [](double x) { return std::log1p(x); }},
      {"expm1", [](double x) { return std::expm1(x); }},   {"exp2", [](double x) { return std::exp2(x); }},
      {"erf", [](double x) { return std::erf(x); }},       {"erfc", [](double x) { return std::erfc(x); }},
      {"rsqrt", [](double x) { return 1.0 / std::sqrt(x); }}, {"reciprocal", [](double x) { return 1.0 / x; }},
  };
  return fns;
}

// ceil, trunc, sign and square keep an integer tensor's dtype in torch; the rest make it float32
const std::map<std::string, HostFn>& host_math_keeping_dtype() {
  static const std::map<std::string, HostFn> fns = {
      {"ceil", [](double x) { return std::ceil(x); }},
      {"trunc", [](double x) { return std::trunc(x); }},
      {"sign", [](double x) { return double((x > 0) - (x < 0)); }},
      {"square", [](double x) { return x * x; }},
  };
  return fns;
}

Tensor floating(const Tensor& t) { return is_floating(t.dtype()) ? t : t.to(DType::Float32); }

int64_t int_at(const std::vector<Static>& a, const std::map<std::string, Static>& kw, size_t pos, const char* name, int64_t def) {
  if (kw.count(name)) return int_of(kw.at(name), name);
  return a.size() > pos ? int_of(a[pos], name) : def;
}

// torch.round: halves to even, as std::nearbyint in the default rounding mode.
Tensor round_half_even(const Tensor& t) { return map_values(t, [](double x) { return std::nearbyint(x); }); }

Tensor tensor_of_list(const Static& v) {
  Shape shape;
  std::vector<double> flat;
  bool floats = false, bools = true;
  std::function<void(const Static&, size_t)> walk = [&](const Static& x, size_t depth) {
    if (x.kind == Kind::List || x.kind == Kind::Tuple) {
      if (shape.size() == depth) shape.push_back(int64_t(x.elems.size()));
      else if (shape[depth] != int64_t(x.elems.size())) fail("torch.tensor(): the nested lists have different lengths");
      for (const Static& e : x.elems) walk(e, depth + 1);
      return;
    }
    if (!x.is_number()) fail("torch.tensor() takes numbers, got {}", x.type_name());
    floats = floats || x.kind == Kind::Float;
    bools = bools && x.kind == Kind::Bool;
    flat.push_back(x.as_double());
  };
  walk(v, 0);
  if (flat.empty() && shape.empty()) shape.push_back(0);
  return tensor(flat, shape, DType::Float64).to(floats ? DType::Float32 : bools && !flat.empty() ? DType::Bool : DType::Int64);
}

Static to_list(const Tensor& t) {
  if (t.dim() == 0) {
    if (is_floating(t.dtype())) return Static::number(t.item<double>());
    if (t.dtype() == DType::Bool) return Static::boolean(t.item<bool>());
    return Static::integer(t.item<int64_t>());
  }
  std::vector<Static> es;
  for (int64_t i = 0; i < t.size(0); ++i) es.push_back(to_list(t.select(0, i)));
  return Static::seq(Kind::List, std::move(es));
}

std::vector<Tensor> tensors_of(const std::vector<Static>& a, const char* what) {
  const std::vector<Static>& xs = a.size() == 1 && (a[0].kind == Kind::List || a[0].kind == Kind::Tuple) ? a[0].elems : a;
  std::vector<Tensor> ts;
  for (const Static& x : xs) {
    if (x.kind != Kind::Tensor) fail("torch.{}() takes Tensors, got {}", what, x.type_name());
    ts.push_back(x.tensor);
  }
  return ts;
}

Static tuple_of(std::vector<Tensor> ts) {
  std::vector<Static> es;
  for (Tensor& t : ts) es.push_back(of(std::move(t)));
  return Static::seq(Kind::Tuple, std::move(es));
}

int64_t dim_arg(const std::vector<Static>& a, const std::map<std::string, Static>& kw, size_t pos, int64_t def) {
  if (kw.count("dim")) return int_of(kw.at("dim"), "dim");
  return a.size() > pos ? int_of(a[pos], "dim") : def;
}

}  // namespace

std::optional<Static> init_tensor_binary(PyOp op, const Static& a, const Static& b) {
  if (a.kind != Kind::Tensor && b.kind != Kind::Tensor) return std::nullopt;
  // torch converts a Python float to the result's dtype before the arithmetic: float32 unless a tensor is wider
  auto narrowed = [](const Static& v, const Static& other) {
    if (v.kind != Kind::Float || other.kind != Kind::Tensor || other.tensor.dtype() == DType::Float64) return v;
    return Static::number(double(float(v.f)));
  };
  Tensor x = operand(narrowed(a, b), spelling(op)), y = operand(narrowed(b, a), spelling(op));
  switch (op) {
    case PyOp::Add: return of(add(x, y));
    case PyOp::Sub: return of(sub(x, y));
    case PyOp::Mul: return of(mul(x, y));
    case PyOp::Div: return of(div(x, y));
    case PyOp::FloorDiv: return of(floor_divide(x, y));
    case PyOp::Mod: return of(remainder(x, y));
    case PyOp::Pow: return of(pow(x, y));
    case PyOp::Eq: return of(eq(x, y));
    case PyOp::Ne: return of(ne(x, y));
    case PyOp::Lt: return of(lt(x, y));
    case PyOp::Le: return of(le(x, y));
    case PyOp::Gt: return of(gt(x, y));
    case PyOp::Ge: return of(ge(x, y));
    case PyOp::MatMul: case PyOp::LShift: case PyOp::RShift: case PyOp::BitAnd: case PyOp::BitOr: case PyOp::BitXor:
    case PyOp::Pos: case PyOp::Neg: case PyOp::Not: case PyOp::Invert: case PyOp::And: case PyOp::Or: case PyOp::Is:
    case PyOp::IsNot: case PyOp::In: case PyOp::NotIn: break;
  }
  return std::nullopt;
}

std::optional<Static> init_tensor_unary(PyOp op, const Static& a) {
  if (a.kind != Kind::Tensor) return std::nullopt;
  switch (op) {
    case PyOp::Neg: return of(neg(a.tensor));
    case PyOp::Pos: return a;
    case PyOp::Add: case PyOp::Sub: case PyOp::Mul: case PyOp::Div: case PyOp::FloorDiv: case PyOp::Mod: case PyOp::Pow:
    case PyOp::MatMul: case PyOp::LShift: case PyOp::RShift: case PyOp::BitAnd: case PyOp::BitOr: case PyOp::BitXor:
    case PyOp::Not: case PyOp::Invert: case PyOp::And: case PyOp::Or: case PyOp::Lt: case PyOp::Le: case PyOp::Gt:
    case PyOp::Ge: case PyOp::Eq: case PyOp::Ne: case PyOp::Is: case PyOp::IsNot: case PyOp::In: case PyOp::NotIn:
      break;
  }
  return std::nullopt;
}

std::optional<Static> init_torch_function(const std::string& name, const std::vector<Static>& a,
                                          const std::map<std::string, Static>& kw) {
  auto one = [&]() -> Tensor {
    if (a.size() != 1 || a[0].kind != Kind::Tensor) fail("torch.{}() takes one Tensor in __init__", name);
    return a[0].tensor;
  };
  if (name == "abs") return of(abs(one()));
  if (name == "floor") return of(floor(one()));
  if (name == "round") return of(round_half_even(one()));
  if (name == "neg" || name == "negative") return of(neg(one()));
  if (name == "tanh") return of(floating(one()).tanh());
  if (name == "sigmoid") return of(floating(one()).sigmoid());
  if (auto it = host_math().find(name); it != host_math().end()) return of(map_values(floating(one()), it->second));
  if (auto it = host_math_keeping_dtype().find(name); it != host_math_keeping_dtype().end())
    return of(map_values(one(), it->second));
  auto tensor_first = [&]() -> const Tensor& {
    if (a.empty() || a[0].kind != Kind::Tensor) fail("torch.{}() takes a Tensor first", name);
    return a[0].tensor;
  };
  if (name == "transpose" || name == "swapaxes" || name == "swapdims") {
    const Tensor& t = tensor_first();
    if (a.size() != 3) fail("torch.{}() takes a Tensor and two dims", name);
    return of(t.transpose(int_of(a[1], "dim0"), int_of(a[2], "dim1")));
  }
  if (name == "t") {
    const Tensor& t = tensor_first();
    if (t.dim() > 2) fail("t() expects a tensor with <= 2 dimensions, but self is {}D", t.dim());
    return of(t.dim() < 2 ? t : t.transpose(0, 1));
  }
  if (name == "permute") return of(tensor_first().permute(ints_of(a, 1, "a permute dim")));
  if (name == "tril" || name == "triu") {
    const Tensor& t = tensor_first();
    if (t.dim() < 2) fail("{}: input tensor must have at least 2 dimensions", name);
    int64_t diagonal = int_at(a, kw, 1, "diagonal", 0);
    return of(name == "tril" ? tril(t.contiguous(), diagonal) : triu(t.contiguous(), diagonal));
  }
  static const std::map<std::string, PyOp> binaries = {
      {"add", PyOp::Add}, {"sub", PyOp::Sub}, {"subtract", PyOp::Sub}, {"mul", PyOp::Mul}, {"multiply", PyOp::Mul},
      {"div", PyOp::Div}, {"divide", PyOp::Div}, {"true_divide", PyOp::Div}, {"pow", PyOp::Pow},
      {"floor_divide", PyOp::FloorDiv}, {"remainder", PyOp::Mod}};
  if (auto it = binaries.find(name); it != binaries.end()) {
    if (a.size() != 2) fail("torch.{}() takes two operands in __init__", name);
    return init_tensor_binary(it->second, a[0], a[1]);
  }
  if (name == "tensor") {
    if (a.size() != 1) fail("torch.tensor() takes one list in __init__");
    Tensor t = tensor_of_list(a[0]);
    return of(t);
  }
  if (name == "diff") {
    Tensor t = one();
    if (t.dim() != 1) fail("torch.diff() takes a 1-D Tensor in __init__");
    int64_t n = t.size(0);
    if (n == 0) return of(t);
    return of(sub(t.slice(0, 1, n).contiguous(), t.slice(0, 0, n - 1).contiguous()));
  }
  if (name == "stack" || name == "cat") {
    std::vector<Static> pos(a.begin(), a.begin() + std::min<size_t>(a.size(), 1));
    std::vector<Tensor> ts = tensors_of(pos, name.c_str());
    int64_t dim = dim_arg(a, kw, 1, 0);
    return of(name == "stack" ? stack(ts, dim) : cat(ts, dim));
  }
  if (name == "meshgrid") {
    // indexing="ij" (torch 1.13 warns without it and means "ij"); "xy" is "ij" on the first two inputs
    // swapped, the first two outputs swapped back
    std::string indexing = "ij";
    if (kw.count("indexing")) {
      if (kw.at("indexing").kind != Kind::Str) fail("torch.meshgrid(): indexing is \"ij\" or \"xy\"");
      indexing = kw.at("indexing").s;
    }
    std::vector<Tensor> ts = tensors_of(a, "meshgrid");
    if (indexing == "xy" && ts.size() >= 2) std::swap(ts[0], ts[1]);
    Shape shape;
    for (const Tensor& t : ts) {
      if (t.dim() > 1) fail("torch.meshgrid() takes 0-D or 1-D Tensors");
      shape.push_back(t.numel());
    }
    std::vector<Tensor> out;
    for (size_t i = 0; i < ts.size(); ++i) {
      Shape view(ts.size(), 1);
      view[i] = shape[i];
      out.push_back(ts[i].reshape(view).expand(shape));
    }
    if (indexing == "xy" && out.size() >= 2) std::swap(out[0], out[1]);
    return tuple_of(std::move(out));
  }
  if (name == "flatten") {
    if (a.empty() || a[0].kind != Kind::Tensor) fail("torch.flatten() takes a Tensor");
    int64_t s = kw.count("start_dim") ? int_of(kw.at("start_dim"), "start_dim") : a.size() > 1 ? int_of(a[1], "start_dim") : 0;
    int64_t e = kw.count("end_dim") ? int_of(kw.at("end_dim"), "end_dim") : a.size() > 2 ? int_of(a[2], "end_dim") : -1;
    return of(a[0].tensor.flatten(s, e));
  }
  return std::nullopt;
}

std::optional<DType> torch_dtype_name(const std::string& name) {
  static const std::map<std::string, DType> names = {
      {"float32", DType::Float32}, {"float", DType::Float32}, {"float64", DType::Float64}, {"double", DType::Float64},
      {"int64", DType::Int64},     {"long", DType::Int64},    {"int32", DType::Int32},     {"int", DType::Int32},
      {"bool", DType::Bool},       {"bfloat16", DType::BFloat16}};
  auto it = names.find(name);
  return it == names.end() ? std::nullopt : std::optional<DType>(it->second);
}

std::optional<Static> init_tensor_method(const Tensor& t, const std::string& name, const std::vector<Static>& a,
                                         const std::map<std::string, Static>& kw) {
  if (name == "cpu" && a.empty() && kw.empty()) return of(t);
  if (name == "to" && a.size() == 1 && kw.empty()) {
    // pe.to(device) in __init__ (the module is built on the CPU; moving it is the caller's), t.to(torch.float64), t.to(other)
    if (a[0].kind == Kind::Tensor) return of(t.to(a[0].tensor.dtype()));
    if (a[0].kind == Kind::Str && is_device_string(a[0].s)) return of(t);
    if (a[0].kind == Kind::Str)
      if (std::optional<DType> d = torch_dtype_name(a[0].s)) return of(t.to(*d));
  }
  static const std::map<std::string, DType> casts = {{"int", DType::Int32},     {"long", DType::Int64},
                                                     {"float", DType::Float32}, {"double", DType::Float64},
                                                     {"bool", DType::Bool}};
  if (auto it = casts.find(name); it != casts.end() && a.empty()) return of(t.to(it->second));
  if (name == "tolist" && a.empty()) return to_list(t.contiguous());
  if (name == "item" && a.empty()) {
    if (t.numel() != 1) fail("a Tensor with {} elements cannot be converted to a Python number", t.numel());
    return to_list(t.reshape({}));
  }
  if (name == "permute") return of(t.permute(ints_of(a, 0, "a permute dim")));
  if (name == "view" || name == "reshape") return of(t.reshape(ints_of(a, 0, "a size")));
  if (name == "contiguous") return of(t.contiguous());
  if (name == "clone") return of(t.clone());
  if (name == "unsqueeze") return of(t.unsqueeze(dim_arg(a, kw, 0, 0)));
  if (name == "flatten") {
    std::vector<Static> args{of(t)};
    args.insert(args.end(), a.begin(), a.end());
    return init_torch_function("flatten", args, kw);
  }
  if (name == "sum") {
    if (a.empty() && !kw.count("dim")) return of(sum(t));
    bool keepdim = kw.count("keepdim") && kw.at("keepdim").i != 0;
    Shape dims = kw.count("dim") ? ints_of({kw.at("dim")}, 0, "dim") : ints_of(a, 0, "dim");
    return of(sum(t, dims, keepdim));
  }
  if (name == "transpose" || name == "swapaxes" || name == "swapdims") {
    if (a.size() != 2) fail("transpose() takes two dims");
    return of(t.transpose(int_of(a[0], "dim0"), int_of(a[1], "dim1")));
  }
  if (name == "pow") {
    if (a.size() != 1) fail("pow() takes one exponent");
    return init_tensor_binary(PyOp::Pow, of(t), a[0]);
  }
  // the rest are torch.NAME(t, ...) as methods
  static const std::set<std::string> as_functions = {"round", "log", "exp", "sqrt", "abs", "floor", "neg", "negative",
                                                     "tanh", "sigmoid", "t", "tril", "triu"};
  if (as_functions.count(name) || host_math().count(name) || host_math_keeping_dtype().count(name)) {
    std::vector<Static> args{of(t)};
    args.insert(args.end(), a.begin(), a.end());
    return init_torch_function(name, args, kw);
  }
  return std::nullopt;
}

Tensor init_tensor_index(const Tensor& t, const std::vector<TensorIndex>& index) {
  using K = TensorIndex::Kind;
  size_t explicit_dims = 0;
  for (const TensorIndex& ix : index) explicit_dims += ix.kind == K::Int || ix.kind == K::Slice;
  if (int64_t(explicit_dims) > t.dim()) fail("too many indices for tensor of dimension {}", t.dim());
  Tensor r = t;
  int64_t d = 0, remaining = int64_t(explicit_dims);  // ints and slices not yet applied
  for (const TensorIndex& ix : index) {
    if (ix.kind == K::Int || ix.kind == K::Slice) --remaining;
    switch (ix.kind) {
      case K::Int: {
        int64_t n = r.size(d), i = ix.i < 0 ? ix.i + n : ix.i;
        if (i < 0 || i >= n) fail("index {} is out of bounds for dimension {} with size {}", ix.i, d, n);
        r = r.select(d, i);
        break;
      }
      case K::Slice:
        if (ix.step <= 0) fail("slice step must be positive");
        r = r.slice(d, ix.start, ix.stop, ix.step);
        ++d;
        break;
      case K::None: r = r.unsqueeze(d++); break;
      case K::Ellipsis: d = r.dim() - remaining; break;
    }
  }
  return r;
}

}  // namespace kiln::script
