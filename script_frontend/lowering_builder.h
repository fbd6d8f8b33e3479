#pragma once
// The script frontend's GraphBuilder (eager/builder.h): a composite of eager/composites.h lowered into the
// graph being built, so scripted and eager composites are one text. Internal to script_frontend.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "eager/autocast/autocast.h"
#include "eager/builder.h"
#include "script_frontend/lowerer.h"

namespace kiln::script {

class LoweringBuilder final : public GraphBuilder {
 public:
  // prefix: the state_dict prefix of the layer whose parameters parameter() names ("", "encoder.fc.")
  explicit LoweringBuilder(Lowerer& L, std::string prefix = "") : L_(L), prefix_(std::move(prefix)) {}
  V op(OpId id, const std::vector<V>& inputs, const Attrs& attrs = {}) override;
  V scalar(Scalar v) override;
  V detach(V x) override;
  V parameter(const Tensor& t, const std::string& name) override;
  V flatten(V x, int64_t start_dim, int64_t end_dim) override;
  V reshape_like(V x, V like, const Shape& tail) override;
  V pad_rank(V x, int64_t rank) override;
  V unflatten_like(V x, int64_t d, V like) override;
  V head(V x, V n) override;
  V reshape_rows(V x, V like, V lead) override;
  V transpose(V x, int64_t d0, int64_t d1) override;
  V count(V x, const Shape& dims, int64_t more_than, const ShapeMessage& msg) override;
  std::pair<V, V> bin(V x, int64_t d, int64_t j, int64_t n) override;
  void update_buffer(V buffer, V value) override;
  V rand_like(V x) override;
  V causal_mask(V q, V k) override;
  V if_bool(V x, const std::function<V()>& then, const std::function<V()>& otherwise) override;
  std::vector<V> autocast(std::string_view fn, const std::vector<V>& inputs) override;
  std::optional<int64_t> rank(V x) override;
  std::optional<Shape> shape(V x) override;
  std::optional<DType> dtype(V x) override;
  int64_t dim(std::string_view op, int64_t d, V x) override;
  void check_rank(V x, const std::vector<int64_t>& ranks, const ShapeMessage& msg) override;
  void check_shape(V x, const Shape& want, bool trailing, const ShapeMessage& msg) override;
  void check_broadcast(const std::vector<V>& xs, const std::string& msg) override;
  [[noreturn]] void fail(const std::string& msg) override;

 private:
  Lowerer& L_;
  std::string prefix_;
  std::map<V, Tensor> tensors_;  // what parameter() gave: the buffer update_buffer() writes
};

// The inputs of an op row or composite as autocast wants them: when the lowering runs inside an
// AutocastGuard and the row has a policy (`policy`), one prim::autocast node records the policy and the scope's
// dtype (the graph then runs as recorded, as a trace under autocast does); otherwise the inputs as they are.
std::vector<Value*> autocast_values(Lowerer& L, AutocastPolicy policy, const std::vector<Value*>& inputs);

}  // namespace kiln::script
