#include "op_cases.h"

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
    case OpId::AvgPool2dBackward: return {{randn({2, 3, 3, 3})}, Attrs(pool).set("shape", Shape{2, 3, 6, 6})};
    case OpId::Conv2dBackwardInput: return {{randn({2, 4, 6, 6}), randn({4, 3, 3, 3})}, Attrs(conv).set("shape", Shape{2, 3, 6, 6})};
    case OpId::Conv2dBackwardWeight: return {{randn({2, 4, 6, 6}), img}, Attrs(conv).set("shape", Shape{4, 3, 3, 3})};
  }
  return {};
}

}  // namespace kiln::test
