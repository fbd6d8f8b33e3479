// core/: dtypes and torch's promotion lattice, shapes and broadcasting, the op table, Tensor basics.
#include <set>

#include "core/op.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_error;
using kiln::test::values;

TEST_CASE("core: smoke") {
  Tensor a = arange(6).reshape({2, 3}).to(DType::Float32);
  Tensor b = a * 2 + 1;
  CHECK(b.dtype() == DType::Float32);
  CHECK(b[1][2].item<float>() == 11.0f);
}

TEST_CASE("core: dtype sizes, names and kinds") {
  struct Row {
    DType t;
    size_t size;
    const char* name;
    bool floating, integral;
  };
  const Row rows[] = {{DType::Bool, 1, "bool", false, false},         {DType::Int32, 4, "int32", false, true},
                      {DType::Int64, 8, "int64", false, true},        {DType::BFloat16, 2, "bfloat16", true, false},
                      {DType::Float16, 2, "float16", true, false},    {DType::Float32, 4, "float32", true, false},
                      {DType::Float64, 8, "float64", true, false}};
  static_assert(kNumDTypes == 7, "a new dtype needs a row here");
  for (const Row& r : rows) {
    CAPTURE(r.name);
    CHECK(itemsize(r.t) == r.size);
    CHECK(dtype_name(r.t) == r.name);
    CHECK(is_floating(r.t) == r.floating);
    CHECK(is_integral(r.t) == r.integral);
  }
  CHECK(default_dtype() == DType::Float32);
  CHECK(sizeof(BFloat16) == 2);
  CHECK(sizeof(Float16) == 2);
  CHECK(dtype_of<int64_t>() == DType::Int64);
  CHECK(dtype_of<Float16>() == DType::Float16);
}

TEST_CASE("core: promote_types matches torch.promote_types for every pair") {
  // torch 1.13: ''.join(code[torch.promote_types(a, b)] for a in dts for b in dts), order bool int32 int64
  // bf16 f16 f32 f64 (b i l B h f d)
  const char* table = "bilBhfdiilBhfdlllBhfdBBBBffdhhhfhfdffffffdddddddd";
  const DType all[] = {DType::Bool, DType::Int32, DType::Int64, DType::BFloat16,
                       DType::Float16, DType::Float32, DType::Float64};
  const std::string codes = "bilBhfd";
  for (int i = 0; i < 7; ++i)
    for (int j = 0; j < 7; ++j) {
      CAPTURE(dtype_name(all[i]));
      CAPTURE(dtype_name(all[j]));
      CHECK(promote_types(all[i], all[j]) == all[codes.find(table[i * 7 + j])]);
      CHECK(promote_types(all[i], all[j]) == promote_types(all[j], all[i]));
    }
}

TEST_CASE("core: half types convert like torch") {
  CHECK(float(BFloat16(1.0f)) == 1.0f);
  CHECK(BFloat16(1.00390625f).bits == 0x3f80);  // tie → even
  CHECK(BFloat16(1.01171875f).bits == 0x3f82);  // tie → even (up)
  CHECK(BFloat16(3.4e38f).bits == 0x7f80);      // rounds past the largest finite: inf
  CHECK(std::isnan(float(BFloat16(NAN))));
  CHECK(Float16(65504.0f).bits == 0x7bff);
  CHECK(Float16(65520.0f).bits == 0x7c00);  // halfway to the next binade: inf
  CHECK(Float16(3e-8f).bits == 0x0001);     // rounds up to the smallest subnormal
  CHECK(Float16(2.9802322e-8f).bits == 0x0000);  // exactly half the smallest subnormal: tie → even (0)
  CHECK(Float16(-0.0f).bits == 0x8000);
  CHECK(Float16(INFINITY).bits == 0x7c00);
  CHECK(Float16(-INFINITY).bits == 0xfc00);
  CHECK(std::isnan(float(Float16(NAN))));
  CHECK(float(Float16(6.1035156e-05f)) == 6.1035156e-05f);  // smallest normal
  Float16 sub;
  sub.bits = 0x0001;
  CHECK(float(sub) == 5.9604645e-08f);
}

TEST_CASE("core: shapes, strides and broadcasting") {
  CHECK(shape_str({}) == "[]");
  CHECK(shape_str({2, 3}) == "[2,3]");
  CHECK(numel_of({}) == 1);
  CHECK(numel_of({2, 0, 3}) == 0);
  CHECK(contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
  CHECK(contiguous_strides({2, 0, 4}) == Shape{4, 4, 1});
  CHECK(contiguous_strides({}) == Shape{});
  CHECK(broadcast_shapes("op", {2, 1, 3}, {4, 1}) == Shape{2, 4, 3});
  CHECK(broadcast_shapes("op", {}, {3}) == Shape{3});
  CHECK(broadcast_shapes("op", {0, 1}, {1, 5}) == Shape{0, 5});
  CHECK(broadcast_shapes("op", {1}, {0}) == Shape{0});
  check_error([] { broadcast_shapes("add", {2, 3}, {4}); }, "add: shapes [2,3] and [4] cannot be broadcast");
  check_error([] { broadcast_shapes("add", {2}, {0}); }, "add: shapes [2] and [0] cannot be broadcast");
  CHECK(wrap_dim("op", -1, 3) == 2);
  CHECK(wrap_dim("op", 0, 0) == 0);  // 0-d accepts 0 and -1
  CHECK(wrap_dim("op", -1, 0) == 0);
  check_error([] { wrap_dim("sum", 3, 2); }, "sum: dim 3 is out of range for a tensor of rank 2 (expected in [-2, 1])");
  check_error([] { wrap_dim("sum", -3, 2); }, "sum: dim -3 is out of range for a tensor of rank 2 (expected in [-2, 1])");
}

TEST_CASE("core: the op table") {
  std::set<std::string_view> names;
  int n = 0;
#define KILN_UNARY(Id, name, rule, expr) CHECK(op_info(OpId::Id).kind == OpKind::Unary); ++n;
#define KILN_BINARY(Id, name, rule, expr) CHECK(op_info(OpId::Id).kind == OpKind::Binary); ++n;
#define KILN_REDUCE(Id, name, ...) CHECK(op_info(OpId::Id).kind == OpKind::Reduce); ++n;
#define KILN_OP(Id, name, k) CHECK(op_info(OpId::Id).kind == OpKind::k); ++n;
#include "core/ops.def"
  CHECK(n == kNumOps);
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(OpId(i));
    CAPTURE(info.name);
    CHECK(names.insert(info.name).second);  // names are unique
    OpId back;
    REQUIRE(op_from_name(info.name, &back));
    CHECK(back == OpId(i));
    // code generators need the expression of every elementwise row and a reduction's start value and fold
    bool generated = info.kind == OpKind::Unary || info.kind == OpKind::Binary || info.kind == OpKind::Reduce;
    CHECK(generated == !info.expr.empty());
    CHECK((info.kind == OpKind::Reduce) == !info.init.empty());
  }
  CHECK(op_name(OpId::Add) == "add");
  CHECK(op_info(OpId::Div).rule == DTypeRule::Float);
  CHECK(op_info(OpId::Lt).rule == DTypeRule::Compare);
  CHECK(op_info(OpId::Reshape).kind == OpKind::View);
  OpId dummy;
  CHECK(!op_from_name("no_such_op", &dummy));
}

TEST_CASE("core: scalars and wrapped numbers") {
  CHECK(Scalar(2).type == DType::Int64);
  CHECK(Scalar(int64_t(5)).type == DType::Int64);
  CHECK(Scalar(2.5).type == DType::Float64);
  CHECK(Scalar(2.5f).type == DType::Float64);
  CHECK(Scalar(true).type == DType::Bool);
  Tensor w = Tensor::wrap_scalar(3);
  CHECK(w.dim() == 0);
  CHECK(w.dtype() == DType::Int64);
  CHECK(w.impl()->wrapped_number);
  CHECK(w.item<int64_t>() == 3);
  int64_t big = (int64_t(1) << 62) + 7;
  CHECK(Tensor::wrap_scalar(big).item<int64_t>() == big);  // not routed through double
  CHECK(Tensor::wrap_scalar(2.5).dtype() == DType::Float64);
  CHECK(Tensor::wrap_scalar(false).item<bool>() == false);
  CHECK(!zeros({}).impl()->wrapped_number);
  CHECK(kiln::add(kiln::arange(3), big)[0].item<int64_t>() == big);
}

TEST_CASE("core: tensor handle basics") {
  Tensor u;
  CHECK(!u.defined());
  check_error([&] { u.dim(); }, "tensor: use of an undefined tensor");
  check_error([&] { kiln::add(u, 1); }, "add: an input tensor is undefined");
  Tensor x = zeros({2, 3, 4});
  Tensor y = x;  // copies the handle
  CHECK(y.is_same(x));
  CHECK(x.size(-1) == 4);
  CHECK(x.stride(0) == 12);
  CHECK(x.numel() == 24);
  CHECK(x.element_size() == 4);
  CHECK(x.is_floating_point());
  CHECK(!kiln::arange(2).is_floating_point());
  CHECK(x.device().is_cpu());
  CHECK(x.storage()->nbytes == 96);
  CHECK(x.version() == 0);
  x.bump_version();
  CHECK(y.version() == 1);
  CHECK(x.is_contiguous());
  CHECK(!x.transpose(0, 1).is_contiguous());
  CHECK(zeros({1, 3}).t().is_contiguous());
  CHECK(zeros({3, 0}).t().is_contiguous());
}
