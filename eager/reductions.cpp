#include "eager/ops.h"
namespace kiln {
Tensor sum(const Tensor&, const Shape&, bool) { fail("pending"); }
Tensor prod(const Tensor&, const Shape&, bool) { fail("pending"); }
Tensor mean(const Tensor&, const Shape&, bool) { fail("pending"); }
Tensor amax(const Tensor&, const Shape&, bool) { fail("pending"); }
Tensor amin(const Tensor&, const Shape&, bool) { fail("pending"); }
Tensor max(const Tensor&) { fail("pending"); }
Tensor min(const Tensor&) { fail("pending"); }
std::pair<Tensor, Tensor> max(const Tensor&, int64_t, bool) { fail("pending"); }
std::pair<Tensor, Tensor> min(const Tensor&, int64_t, bool) { fail("pending"); }
Tensor argmax(const Tensor&, std::optional<int64_t>, bool) { fail("pending"); }
Tensor argmin(const Tensor&, std::optional<int64_t>, bool) { fail("pending"); }
Tensor var(const Tensor&, const Shape&, int64_t, bool) { fail("pending"); }
Tensor std(const Tensor&, const Shape&, int64_t, bool) { fail("pending"); }
Tensor logsumexp(const Tensor&, const Shape&, bool) { fail("pending"); }
}
