#include "op_cases.h"

#include "support.h"

#include <cmath>
#include <limits>
#include <optional>

namespace kiln::test {

namespace {
Tensor idx(std::vector<int64_t> v, Shape shape = {}) { return tensor(v, shape); }

}  // namespace

OpCase case_for(OpId op, uint64_t seed) {
  manual_seed(seed);
  Tensor a = randn({3, 4}), b = randn({4});
  Tensor img = randn({2, 3, 6, 6});
  Attrs conv;
  conv.set("stride", Shape{1, 1}).set("padding", Shape{1, 1}).set("dilation", Shape{1, 1}).set("groups", int64_t(1));
  Attrs pool;
  pool.set("kernel_size", Shape{2, 2}).set("stride", Shape{2, 2}).set("padding", Shape{0, 0});
  switch (op) {
#define KILN_UNARY(Id, name, rule, expr) case OpId::Id:
#include "core/ops.def"
      return {{abs(a) + 0.1}, {}};
#define KILN_BINARY(Id, name, rule, expr) case OpId::Id:
#include "core/ops.def"
      if (op == OpId::Pow) return {{abs(a) + 0.1, b}, {}};
      return {{a, b}, {}};
#define KILN_REDUCE(Id, name, ...) case OpId::Id:
#include "core/ops.def"
      return {{a}, Attrs().set("dims", Shape{1}).set("keepdim", false)};
    case OpId::Where: return {{gt(a, 0.0), a, b}, {}};
    case OpId::Argmax:
    case OpId::Argmin: return {{a}, Attrs().set("dim", int64_t(1)).set("keepdim", true)};
    case OpId::Argsort: return {{a}, Attrs().set("dim", int64_t(1)).set("descending", true)};
    case OpId::Cumsum: return {{a}, Attrs().set("dim", int64_t(1))};
    case OpId::Cumprod: return {{abs(a) + 0.5}, Attrs().set("dim", int64_t(-1))};
    case OpId::Reshape: return {{a}, Attrs().set("shape", Shape{2, -1})};
    case OpId::Permute: return {{a}, Attrs().set("dims", Shape{1, 0})};
    case OpId::Expand: return {{randn({3, 1})}, Attrs().set("shape", Shape{3, 4})};
    case OpId::Slice:
      return {{a}, Attrs().set("dim", int64_t(1)).set("start", int64_t(1)).set("end", int64_t(3)).set("step", int64_t(1))};
    case OpId::Select: return {{a}, Attrs().set("dim", int64_t(0)).set("index", int64_t(-1))};
    case OpId::Squeeze: return {{randn({3, 1, 4})}, Attrs().set("dims", Shape{1})};
    case OpId::Unsqueeze: return {{a}, Attrs().set("dim", int64_t(1))};
    case OpId::Contiguous: return {{a.t()}, {}};
    case OpId::Clone: return {{a}, {}};
    case OpId::Cast: return {{a}, Attrs().set("dtype", DType::Float64)};
    case OpId::Matmul: return {{a, randn({4, 2})}, {}};
    case OpId::Conv2d: return {{img, randn({4, 3, 3, 3}), randn({4})}, conv};
    case OpId::MaxPool2d: return {{img}, Attrs(pool).set("dilation", Shape{1, 1})};
    case OpId::AvgPool2d: return {{img}, pool};
    case OpId::Cat: return {{a, randn({2, 4})}, Attrs().set("dim", int64_t(0))};
    case OpId::IndexSelect: return {{randn({5, 3}), idx({4, 0, 2})}, Attrs().set("dim", int64_t(0))};
    case OpId::Gather: return {{a, idx({0, 3, 1, 1, 2, 0}, {3, 2})}, Attrs().set("dim", int64_t(1))};
    case OpId::IndexAdd: return {{randn({5, 3}), idx({0, 2}), randn({2, 3})}, Attrs().set("dim", int64_t(0))};
    case OpId::ScatterAdd: return {{a, idx({0, 3, 1, 1, 2, 0}, {3, 2}), randn({3, 2})}, Attrs().set("dim", int64_t(1))};
    case OpId::SliceBackward:
      return {{randn({3, 2})}, Attrs()
                                   .set("shape", Shape{3, 4})
                                   .set("dim", int64_t(1))
                                   .set("start", int64_t(1))
                                   .set("end", int64_t(3))
                                   .set("step", int64_t(1))};
    case OpId::RnnLayer:
      return {{randn({3, 2, 9}), randn({9, 3}), randn({9}), randn({1, 2, 3})}, Attrs().set("mode", std::string("gru"))};
    case OpId::RnnLayerBackward:
      // grad, rnn_layer's output and no kept steps (so the forward runs again), then rnn_layer's inputs
      return {{randn({5, 2, 3}), randn({5, 2, 3}), randn({0, 36}), randn({3, 2, 12}), randn({12, 3}), randn({12}), randn({2, 2, 3})},
              Attrs().set("mode", std::string("lstm")).set("reverse", true)};
    case OpId::FlashAttention:  // 7 keys over 5 queries: partial tiles; q's batch dim broadcast
      return {{randn({1, 5, 4}), randn({2, 7, 4}), randn({2, 7, 3}), full({}, 0.5)}, Attrs().set("causal", true)};
    case OpId::FlashAttentionBackward:
      return {{randn({2, 5, 3}), Tensor::empty({0}), randn({2, 5, 3}), randn({2, 5}), randn({2, 5, 4}), randn({2, 7, 4}),
               randn({2, 7, 3}), full({}, 0.5)},
              {}};
    case OpId::AvgPool2dBackward: return {{randn({2, 3, 3, 3})}, Attrs(pool).set("shape", Shape{2, 3, 6, 6})};
    case OpId::Conv2dBackwardInput: return {{randn({2, 4, 6, 6}), randn({4, 3, 3, 3})}, Attrs(conv).set("shape", Shape{2, 3, 6, 6})};
    case OpId::Conv2dBackwardWeight: return {{randn({2, 4, 6, 6}), img}, Attrs(conv).set("shape", Shape{4, 3, 3, 3})};
  }
  return {};
}

// The gather, scatter_add and index_add rows against PyTorch 1.13 (tests/gen_index_rows_values.py printed the
// values): inputs are seq(shape, a, b)[i] = sin(a * i + b) in float64 and fixed indices, repeated ones included.
std::optional<TorchCase> torch_case(OpId op) {
  Tensor rows = idx({0, 3, 1, 1, 2, 0}, {3, 2});
  if (op == OpId::Gather)
    return TorchCase{{seq({3, 4}), rows}, Attrs().set("dim", int64_t(1)), {3, 2},
                     {0.09983341664682815, 0.8414709848078964, 0.9995736030415051, 0.9995736030415051, 0.04158066243329049, 0.5984721441039565},
                     {{0.29552020666133955, 0.0, 0.0, 0.644217687237691, 0.0, 1.88870234666549, 0.0, 0.0, 0.7457052121767203, 0.0, 0.9463000876874145, 0.0}, {}}};
  if (op == OpId::ScatterAdd)
    return TorchCase{{seq({3, 4}), rows, seq({3, 2}, 0.7, 0.2)}, Attrs().set("dim", int64_t(1)), {3, 4},
                     {0.29850274744188937, 0.3894183423086505, 0.644217687237691, 1.6247978944353796, 0.963558185417193, 2.7448524182597307, 0.9463000876874145, 0.8084964038195901, 0.06863600319546315, 0.3349881501559051, 0.1827006704931577, -0.2555411020268312},
                     {{0.29552020666133955, 0.644217687237691, 0.8912073600614354, 0.9974949866040544, 0.9463000876874145, 0.7457052121767203, 0.4273798802338298, 0.04158066243329049, -0.35078322768961984, -0.6877661591839738, -0.9161659367494549, -0.9999232575641008}, {},
                      {0.29552020666133955, 0.9974949866040544, 0.7457052121767203, 0.7457052121767203, -0.9161659367494549, -0.35078322768961984}}};
  if (op == OpId::IndexAdd)
    return TorchCase{{seq({5, 3}), idx({0, 2, 0}, {3}), seq({3, 3}, 0.7, 0.2)}, Attrs().set("dim", int64_t(0)), {5, 3},
                     {-0.6530993264476264, 0.24693056960840143, 1.1791891108654389, 0.8414709848078964, 0.963558185417193, 0.9995736030415051, 1.6920052998641348, 0.9496164118794573, 0.06863600319546315, 0.3349881501559051, 0.04158066243329049, -0.2555411020268312, -0.529836140908493, -0.7568024953079282, -0.9161659367494549},
                     {{0.29552020666133955, 0.644217687237691, 0.8912073600614354, 0.9974949866040544, 0.9463000876874145, 0.7457052121767203, 0.4273798802338298, 0.04158066243329049, -0.35078322768961984, -0.6877661591839738, -0.9161659367494549, -0.9999232575641008, -0.9258146823277321, -0.7055403255703919, -0.373876664830236}, {},
                      {0.29552020666133955, 0.644217687237691, 0.8912073600614354, 0.4273798802338298, 0.04158066243329049, -0.35078322768961984, 0.29552020666133955, 0.644217687237691, 0.8912073600614354}}};
  return std::nullopt;
}

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
ElementwiseCase unary(double (*ref)(double), const char* torch, double lo = -2, double hi = 2) {
  ElementwiseCase c;
  c.ref1 = ref;
  c.torch_unary = torch;
  c.lo = lo;
  c.hi = hi;
  return c;
}
ElementwiseCase binary(double (*ref)(double, double), const char* tt, const char* t0, const char* zt, const char* zz,
                       const char* ts, const char* st, double lo = -2, double hi = 2) {
  ElementwiseCase c;
  c.ref2 = ref;
  c.tt = tt, c.t0 = t0, c.zt = zt, c.zz = zz, c.ts = ts, c.st = st;
  c.lo = lo;
  c.hi = hi;
  return c;
}
// The dtype codes most binary rows share (add's, torch's usual promotion), and the comparisons' (all bool).
const char* const kTT = "bilBhfdiilBhfdlllBhfdBBBBffdhhhfhfdffffffdddddddd";
const char* const kT0 = "bilBhfdiiiBhfdlllBhfdBBBBBBBhhhhhhhfffffffddddddd";
const char* const kZT = "bilBhfdiilBhfdlilBhfdBBBBhfdhhhBhfdfffBhfddddBhfd";
const char* const kTS = "blfiifllfBBBhhhfffddd";
const char* const kB49 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const char* const kB21 = "bbbbbbbbbbbbbbbbbbbbb";
const char* const kX21 = "xxxxxxxxxxxxxxxxxxxxx";
ElementwiseCase quantized(ElementwiseCase c) {
  c.quantized = true;
  return c;
}
}  // namespace

ElementwiseCase elementwise_case(OpId op) {
  ElementwiseCase c;
  switch (op) {
    case OpId::Neg: return unary([](double x) { return -x; }, "xilBhfd");
    case OpId::Abs:
      c = unary([](double x) { return std::fabs(x); }, "xilBhfd");
      c.kink_at_zero = true, c.second_order = false;
      return c;
    case OpId::Exp: return unary([](double x) { return std::exp(x); }, "fffBxfd");
    case OpId::Log:
      c = unary([](double x) { return std::log(x); }, "fffBxfd", 0.5, 2);
      c.positive = true;
      return c;
    case OpId::Log1p:
      c = unary([](double x) { return std::log1p(x); }, "fffBxfd", 0.5, 2);
      c.positive = true;
      return c;
    case OpId::Sqrt:
      c = unary([](double x) { return std::sqrt(x); }, "fffBxfd", 0.5, 2);
      c.positive = true;
      return c;
    case OpId::Rsqrt:
      c = unary([](double x) { return 1.0 / std::sqrt(x); }, "fffBxfd", 0.5, 2);
      c.positive = true;
      return c;
    case OpId::Sin: return unary([](double x) { return std::sin(x); }, "fffBxfd");
    case OpId::Cos: return unary([](double x) { return std::cos(x); }, "fffBxfd");
    case OpId::Tanh: return unary([](double x) { return std::tanh(x); }, "fffBxfd");
    case OpId::Sigmoid: return unary([](double x) { return 1.0 / (1.0 + std::exp(-x)); }, "fffBxfd");
    case OpId::Relu:
      c = unary([](double x) { return std::isnan(x) ? x : (x < 0 ? 0.0 : x); }, "xilBxfd");
      c.kink_at_zero = true, c.second_order = false;
      return c;
    case OpId::Gelu: return unary([](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }, "xxxBxfd");
    case OpId::GeluTanh:
      return unary([](double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); },
                   "xxxBxfd");
    case OpId::Silu: return unary([](double x) { return x / (1.0 + std::exp(-x)); }, "xxxBxfd");
    case OpId::Erf: return unary([](double x) { return std::erf(x); }, "fffBxfd");
    case OpId::Reciprocal: return unary([](double x) { return 1.0 / x; }, "fffBhfd", 0.5, 2);
    // between the steps: a zero gradient both ways
    case OpId::Floor: return unary([](double x) { return std::floor(x); }, "xilBhfd", 0.1, 0.9);
    // NaN propagates and zeros keep their sign (NumPy's sign; torch 1.13 maps NaN to 0)
    case OpId::Sign: return unary([](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : x); }, "bilBhfd");
    case OpId::LogicalNot: return unary([](double x) { return x == 0 ? 1.0 : 0.0; }, "bbbbbbb");
    case OpId::Add: return binary([](double a, double b) { return a + b; }, kTT, kT0, kZT, kTT, kTS, kTS);
    case OpId::Sub:
      return binary([](double a, double b) { return a - b; }, "xxxxxxxxilBhfdxllBhfdxBBBffdxhhfhfdxfffffdxdddddd",
                    "xxxxxxxxiiBhfdxllBhfdxBBBBBBxhhhhhhxffffffxdddddd", "xxxxxxxxilBhfdxilBhfdxBBBhfdxhhBhfdxffBhfdxddBhfd",
                    "xxxxxxxxilBhfdxllBhfdxBBBffdxhhfhfdxfffffdxdddddd", "xxxxifxlfxBBxhhxffxdd", "xxxxifxlfxBBxhhxffxdd");
    case OpId::Mul: return binary([](double a, double b) { return a * b; }, kTT, kT0, kZT, kTT, kTS, kTS);
    case OpId::Div:
      return binary([](double a, double b) { return a / b; }, "fffBhfdfffBhfdfffBhfdBBBBffdhhhfhfdffffffdddddddd",
                    "fffBhfdfffBhfdfffBhfdBBBBBBBhhhhhhhfffffffddddddd", "fffBhfdfffBhfdfffBhfdBBBBhfdhhhBhfdfffBhfddddBhfd",
                    "fffBhfdfffBhfdfffBhfdBBBBffdhhhfhfdffffffdddddddd", "fffffffffBBBhhhfffddd", "fffffffffBBBhhhfffddd", 0.5, 2);
    case OpId::Pow:
      c = binary([](double a, double b) { return std::pow(a, b); }, "xilBhfdiilBhfdlllBhfdBBBBffdhhhfhfdffffffdddddddd",
                 "xilBhfdiiiBhfdlllBhfdBBBBBBBhhhhhhhfffffffddddddd", "xilBhfdiilBhfdlilBhfdBBBBhfdhhhBhfdfffBhfddddBhfd",
                 "xilBhfdiilBhfdlllBhfdBBBBffdhhhfhfdffffffdddddddd", "xlfiifllfBBBhhhfffddd", "xlfiifllfBBBhhhfffddd", 0.5, 2);
      c.positive = true;
      return c;
    case OpId::Maximum:
      c = quantized(binary([](double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }, kTT, kT0,
                           kZT, kTT, kX21, kX21));
      c.second_order = false;
      return c;
    case OpId::Minimum:
      c = quantized(binary([](double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }, kTT, kT0,
                           kZT, kTT, kX21, kX21));
      c.second_order = false;
      return c;
    case OpId::Eq: return quantized(binary([](double a, double b) { return double(a == b); }, kB49, kB49, kB49, kB49, kB21, kB21));
    case OpId::Ne: return quantized(binary([](double a, double b) { return double(a != b); }, kB49, kB49, kB49, kB49, kB21, kB21));
    case OpId::Lt: return quantized(binary([](double a, double b) { return double(a < b); }, kB49, kB49, kB49, kB49, kB21, kB21));
    case OpId::Le: return quantized(binary([](double a, double b) { return double(a <= b); }, kB49, kB49, kB49, kB49, kB21, kB21));
    case OpId::Gt: return quantized(binary([](double a, double b) { return double(a > b); }, kB49, kB49, kB49, kB49, kB21, kB21));
    case OpId::Ge: return quantized(binary([](double a, double b) { return double(a >= b); }, kB49, kB49, kB49, kB49, kB21, kB21));
    case OpId::LogicalAnd:
      return quantized(binary([](double a, double b) { return double(a != 0 && b != 0); }, kB49, kB49, kB49, kB49, kX21, kX21));
    case OpId::LogicalOr:
      return quantized(binary([](double a, double b) { return double(a != 0 || b != 0); }, kB49, kB49, kB49, kB49, kX21, kX21));
    // Python's float // (its fmod-based rounding, exact where floor(a / b) rounds onto an integer); a zero
    // divisor gives a / b, as torch. gradcheck: quotients in (0, 1), between the steps
    case OpId::FloorDivide:
      c = binary(
          [](double a, double b) {
            if (b == 0) return a / b;
            double m = std::fmod(a, b), q = (a - m) / b;
            if (m != 0 && (b < 0) != (m < 0)) q -= 1;
            if (q == 0) return std::copysign(0.0, a / b);
            double f = std::floor(q);
            return q - f > 0.5 ? f + 1 : f;
          },
          "xilBhfdiilBhfdlllBhfdBBBBffdhhhfhfdffffffdddddddd", "xilBhfdiiiBhfdlllBhfdBBBBBBBhhhhhhhfffffffddddddd",
          "xilBhfdiilBhfdlilBhfdBBBBhfdhhhBhfdfffBhfddddBhfd", "xilBhfdiilBhfdlllBhfdBBBBffdhhhfhfdffffffdddddddd",
          "xlfiifllfBBBhhhfffddd", "xlfiifllfBBBhhhfffddd", 0.1, 0.9);
      c.other_lo = 1.0, c.other_hi = 1.5, c.second_order = false;
      return c;
#define KILN_REDUCE(Id, name, init, fold) case OpId::Id:
#define KILN_OP(Id, name, kind) case OpId::Id:
#include "core/ops.def"
      break;
  }
  fail("{} is not an elementwise row", op_name(op));
}

}  // namespace kiln::test
