// Graphs compare no lists, so the run-time check compares the mask's dims one by one against the covered dims,
// up to kMaxMaskRank of them (a mask of more dims is refused when the graph runs).
#include "script_frontend/index_masks.h"

#include <fmt/format.h>

#include <climits>

#include "eager/tensor_ops.h"

namespace kiln::script {

using ir::Prim;

namespace {
const Type kInt = Type::scalar(TypeKind::Int);
const Type kBool = Type::scalar(TypeKind::Bool);
constexpr int64_t kMaxMaskRank = 8;
}  // namespace

void check_mask_shape(Lowerer& L, Value* mask, Value* x, int64_t d) {
  const Type &mt = mask->type(), &xt = x->type();
  if (mt.has_static_shape() && xt.has_static_shape()) {
    Shape ms = mt.static_shape(), xs = xt.static_shape();
    int64_t at = d >= 0 ? d : int64_t(xs.size()) - int64_t(ms.size());
    std::string bad = at < 0 ? mask_mismatch(ms, Shape{}, 0) : mask_mismatch(ms, xs, at);
    if (!bad.empty()) L.fail(L.loc(), bad);
    return;
  }
  Type li = Type::list(kInt);
  Value* ms = L.prim(Prim::Shape, {mask}, li);
  Value* xs = L.prim(Prim::Shape, {x}, li);
  Value* k = L.prim(Prim::Len, {ms}, kInt);
  Value* xn = L.prim(Prim::Len, {xs}, kInt);
  Value* start = d >= 0 ? L.constant(d) : L.prim(Prim::NumSub, {xn, k}, kInt);
  L.check(L.prim(Prim::NumLe, {k, L.constant(kMaxMaskRank)}, kBool),
          fmt::format("kiln script checks bool masks of up to {} dims", kMaxMaskRank));
  // a mask of more dims than x has left fails the length test, so the ListIndex below stays in range
  Value* ok = L.if_value(L.prim(Prim::NumGe, {start, L.constant(int64_t(0))}, kBool),
                         [&] { return L.prim(Prim::NumLe, {L.prim(Prim::NumAdd, {start, k}, kInt), xn}, kBool); },
                         [&] { return L.constant(false); }, L.loc());
  for (int64_t i = 0; i < kMaxMaskRank; ++i)
    ok = L.if_value(
        L.if_value(ok, [&] { return L.prim(Prim::NumLt, {L.constant(i), k}, kBool); }, [&] { return L.constant(false); }, L.loc()),
        [&] {
          Value* m = L.prim(Prim::ListIndex, {ms, L.constant(i)}, kInt);
          Value* s = L.prim(Prim::ListIndex, {xs, L.prim(Prim::NumAdd, {start, L.constant(i)}, kInt)}, kInt);
          return L.prim(Prim::NumEq, {m, s}, kBool);
        },
        [&] { return ok; }, L.loc());
  L.check(ok, d >= 0 ? fmt::format("the shape of the mask does not match the shape of the indexed tensor from index {}", d)
                     : std::string("the shape of the mask does not match the shape of the indexed tensor's last dims"));
}

}  // namespace kiln::script
