// Pipeline parallelism (pipeline.h): the plan, the stage, and the executor the schedules share. A
// schedule is only an order of (forward | backward, micro-batch) passes; running one is the same for
// every schedule, which keeps GPipe and 1F1B from drifting apart.
#include "eager/dist/pipeline.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <map>

#include "core/error.h"
#include "eager/autograd/graph.h"
#include "eager/dist/comm.h"
#include "eager/ops.h"

namespace kiln::dist {

using detail::Comm;
using detail::Request;

namespace {

std::string plan_str(const std::vector<int64_t>& balance) { return fmt::format("[{}]", fmt::join(balance, ", ")); }

int64_t parameter_count(const nn::Module& m) {
  int64_t n = 0;
  for (const Tensor& p : m.parameters()) n += p.numel();
  return n;
}

void check_plan(const std::vector<int64_t>& balance, size_t modules, int ranks) {
  if (int64_t(balance.size()) != ranks)
    fail("pipeline: balance {} has {} stages but the process group has {} ranks (one stage per rank)",
         plan_str(balance), balance.size(), ranks);
  int64_t sum = 0;
  for (size_t i = 0; i < balance.size(); ++i) {
    if (balance[i] <= 0)
      fail("pipeline: balance {} gives stage {} {} modules; every stage needs at least one", plan_str(balance), i,
           balance[i]);
    sum += balance[i];
  }
  if (sum != int64_t(modules))
    fail("pipeline: balance {} sums to {} but the model has {} modules", plan_str(balance), sum, modules);
}

}  // namespace

namespace {

// The linear partition problem by dynamic programming: n items in `stages` contiguous runs of at least
// one, minimising the largest run's cost(j, i) (items j .. i-1), runs with allowed(j, i) false excluded.
// Returns the run lengths, empty when no partition is allowed.
template <class Cost, class Allowed>
std::vector<int64_t> partition(int n, int stages, Cost cost, Allowed allowed) {
  const int64_t inf = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(size_t(stages) + 1, std::vector<int64_t>(size_t(n) + 1, inf));
  std::vector<std::vector<int>> cut(size_t(stages) + 1, std::vector<int>(size_t(n) + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {  // stage k holds items j .. i-1
        if (best[size_t(k) - 1][size_t(j)] == inf || !allowed(j, i)) continue;
        int64_t c = std::max(best[size_t(k) - 1][size_t(j)], cost(j, i));
        // <=: among equal plans the latest cut, so a parameter-free module (an activation) stays on the
        // stage of the layer before it.
        if (c <= best[size_t(k)][size_t(i)]) best[size_t(k)][size_t(i)] = c, cut[size_t(k)][size_t(i)] = j;
      }
  if (best[size_t(stages)][size_t(n)] == inf) return {};
  std::vector<int64_t> runs(static_cast<size_t>(stages), 0);
  for (int k = stages, i = n; k > 0; --k) {
    int j = cut[size_t(k)][size_t(i)];
    runs[size_t(k) - 1] = i - j;
    i = j;
  }
  return runs;
}

}  // namespace

std::vector<int64_t> balance_by_parameters(const std::vector<std::shared_ptr<nn::Module>>& modules, int stages) {
  const int n = int(modules.size());
  if (stages <= 0) fail("pipeline: the number of stages must be positive, got {}", stages);
  if (n < stages) fail("pipeline: the model has {} modules, fewer than the {} stages", n, stages);
  std::vector<int64_t> prefix(size_t(n) + 1, 0);
  for (int i = 0; i < n; ++i) prefix[size_t(i) + 1] = prefix[size_t(i)] + parameter_count(*modules[size_t(i)]);
  auto params = [&](int j, int i) { return prefix[size_t(i)] - prefix[size_t(j)]; };
  auto any = [](int, int) { return true; };
  // First the smallest possible largest stage; then, among plans that keep every stage within it, the
  // most even module counts, so parameter-free modules (activations) spread instead of piling up.
  std::vector<int64_t> first = partition(n, stages, params, any);
  int64_t limit = 0;
  for (int s = 0, j = 0; s < stages; j += int(first[size_t(s)]), ++s)
    limit = std::max(limit, params(j, j + int(first[size_t(s)])));
  return partition(n, stages, [](int j, int i) { return int64_t(i - j); },
                   [&](int j, int i) { return params(j, i) <= limit; });
}

PipelineStage::PipelineStage(std::shared_ptr<nn::Module> submodule, int stage_index, int num_stages)
    : module_(std::move(submodule)), stage_(stage_index), stages_(num_stages) {
  auto world = Comm::world();
  if (!module_) fail("pipeline: stage {} has no module", stage_index);
  if (num_stages != world->size())
    fail("pipeline: {} stages but the process group has {} ranks (one stage per rank)", num_stages, world->size());
  if (stage_index != world->rank())
    fail("pipeline: rank {} must hold stage {}, got stage {}", world->rank(), world->rank(), stage_index);
  // Transfers of their own: their tags cannot be matched by the program's dist::send/recv.
  comm_ = world->dup();
}

PipelineStage pipeline_stage(const std::vector<std::shared_ptr<nn::Module>>& modules, std::vector<int64_t> balance) {
  auto world = Comm::world();
  const int ranks = world->size(), rank = world->rank();
  if (balance.empty()) balance = balance_by_parameters(modules, ranks);
  // Every rank must cut the same way, or a stage would receive activations shaped for another cut. The
  // plans are compared before they are checked, so a plan that is wrong on one rank only raises on
  // every rank instead of leaving the others waiting in the exchange.
  auto all = world->allgather(plan_str(balance), "pipeline: the exchange of plans");
  for (int r = 0; r < ranks; ++r)
    if (all[size_t(r)] != all[0])
      fail("pipeline: rank {}'s plan {} differs from rank 0's {}; every rank must cut the model the same way", r,
           all[size_t(r)], all[0]);
  check_plan(balance, modules.size(), ranks);
  int64_t offset = 0;
  for (int s = 0; s < rank; ++s) offset += balance[size_t(s)];
  auto part = std::make_shared<nn::Sequential>();
  for (int64_t i = offset; i < offset + balance[size_t(rank)]; ++i) part->add(modules[size_t(i)]);
  PipelineStage stage(part, rank, ranks);
  stage.offset_ = offset;
  stage.balance_ = std::move(balance);
  return stage;
}

PipelineStage pipeline_stage(const nn::Sequential& model, std::vector<int64_t> balance) {
  std::vector<std::shared_ptr<nn::Module>> modules;
  for (const auto& [name, m] : model.named_children()) modules.push_back(m);
  return pipeline_stage(modules, std::move(balance));
}

// ---- schedules ----

std::vector<PipelineSchedule::Action> ScheduleGPipe::order() const {
  std::vector<Action> out;
  for (int i = 0; i < chunks_; ++i) out.push_back({true, i});
  for (int i = 0; i < chunks_; ++i) out.push_back({false, i});
  return out;
}

std::vector<PipelineSchedule::Action> Schedule1F1B::order() const {
  // Warm-up: enough forwards that the last stage has work as soon as it starts; then each backward
  // frees a micro-batch's activations before the next forward makes more.
  const int warmup = std::min(stage_.num_stages() - stage_.stage_index() - 1, chunks_);
  std::vector<Action> out;
  for (int i = 0; i < warmup; ++i) out.push_back({true, i});
  for (int i = 0; i < chunks_ - warmup; ++i) {
    out.push_back({true, warmup + i});
    out.push_back({false, i});
  }
  for (int i = chunks_ - warmup; i < chunks_; ++i) out.push_back({false, i});
  return out;
}

PipelineSchedule::PipelineSchedule(PipelineStage& stage, int n_microbatches, PipelineLoss loss_fn)
    : stage_(stage), chunks_(n_microbatches), loss_fn_(std::move(loss_fn)) {
  if (n_microbatches <= 0) fail("pipeline: n_microbatches must be positive, got {}", n_microbatches);
  if (stage.is_last() && !loss_fn_) fail("pipeline: the last stage (stage {}) needs a loss function", stage.stage_index());
}

PipelineSchedule::~PipelineSchedule() = default;

// ---- the executor ----

namespace {

// Tags on the pipeline's communicator. Activations go forward and gradients backward, so each pair of
// neighbours has one stream per tag, delivered in order.
constexpr int kActivationHeader = 1, kActivation = 2, kGradient = 3;
// An activation's header: dtype, whether it requires grad, number of dims, then the sizes.
constexpr int kMaxDims = 8;
using Header = std::array<int64_t, 3 + kMaxDims>;

// Buffers of transfers that may still be in flight when a step fails: MPI cannot cancel a send, and a
// receive that timed out may still be written into, so their memory must outlive the process's use of
// MPI (never freed, not even by static destructors before the exit handler aborts the job). The group
// is unusable after such an error (marked broken), and the process is expected to exit.
void keep_until_exit(std::shared_ptr<void> buffer) {
  static auto* kept = new std::vector<std::shared_ptr<void>>();
  Comm::mark_broken();
  kept->push_back(std::move(buffer));
}

}  // namespace

// One step's state: what each micro-batch keeps between its forward and its backward, and the sends
// still in flight (their buffers must live until MPI is done with them).
struct PipelineSchedule::Run {
  PipelineSchedule& s;
  Comm& comm;
  int stage, stages;
  Tensors inputs, targets;
  std::vector<Tensor> stage_in, stage_out, loss;  // per micro-batch; released by its backward
  struct Pending {
    Request req;
    std::shared_ptr<void> buffer;  // a Tensor's storage, or a header
  };
  std::vector<Pending> sends;
  std::chrono::steady_clock::duration busy{};  // in this stage's forwards and backwards, transfers excluded

  // Runs f and adds its time to busy.
  template <class F>
  void compute(F&& f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    busy += std::chrono::steady_clock::now() - t0;
  }

  ~Run() {
    for (auto& p : sends)
      if (p.req.active()) keep_until_exit(std::move(p.buffer));
  }

  std::string what(const char* transfer, int mb, const char* dir, int peer) const {
    return fmt::format("pipeline stage {}: {} of micro-batch {} {} rank {}", stage, transfer, mb, dir, peer);
  }

  // Completed sends free their buffers; testing also drives MPI's progress for those still going.
  void reap() {
    std::erase_if(sends, [](Pending& p) { return p.req.test(); });
  }

  void send(const void* data, int64_t bytes, int peer, int tag, std::shared_ptr<void> keep) {
    sends.push_back({comm.isend(data, bytes, peer, tag), std::move(keep)});
  }
  void send(const Tensor& t, int peer, int tag) {
    Tensor c = t.is_contiguous() ? t : t.contiguous();
    send(c.raw_data(), c.numel() * int64_t(c.element_size()), peer, tag, std::make_shared<Tensor>(c));
  }

  void recv(void* data, int64_t bytes, int peer, int tag, const std::string& what, const std::shared_ptr<void>& keep) {
    Request r = comm.irecv(data, bytes, peer, tag);
    try {
      r.wait(what);
    } catch (...) {
      keep_until_exit(keep);
      throw;
    }
  }
  void recv(const Tensor& t, int peer, int tag, const std::string& what) {
    recv(t.raw_data(), t.numel() * int64_t(t.element_size()), peer, tag, what, std::make_shared<Tensor>(t));
  }

  void forward(int mb) {
    Tensor x;
    if (stage == 0) {
      x = inputs[size_t(mb)];
    } else {
      // The activation's dtype and shape come first: a stage need not know its input's shape.
      auto h = std::make_shared<Header>();
      std::string w = what("recv of the activation", mb, "from", stage - 1);
      recv(h->data(), int64_t(sizeof(Header)), stage - 1, kActivationHeader, w, h);
      Shape shape(h->begin() + 3, h->begin() + 3 + (*h)[2]);
      x = empty(shape, TensorOptions(DType((*h)[0])));
      recv(x, stage - 1, kActivation, w);
      if ((*h)[1]) x.requires_grad_();
    }
    Tensor y, l;
    compute([&] {
      y = s.stage_.submodule()(x);
      if (stage == stages - 1) l = s.loss_fn_(y, targets[size_t(mb)]);
    });
    if (stage == stages - 1) {
      if (l.numel() != 1)
        fail("pipeline: the loss function returned {} elements for micro-batch {}; it must return one (a mean)",
             l.numel(), mb);
      s.losses_[size_t(mb)] = l.detach();
      loss[size_t(mb)] = l;
    } else {
      if (!y.device().is_cpu())
        fail("pipeline: stage {}'s output is on {}; the pipeline sends cpu tensors (nccl transfers are not supported "
             "yet)",
             stage, y.device().str());
      if (y.dim() > kMaxDims)
        fail("pipeline: stage {}'s output has {} dims; activations of at most {} dims cross stages", stage, y.dim(),
             kMaxDims);
      auto h = std::make_shared<Header>();
      h->fill(0);
      (*h)[0] = int64_t(y.dtype());
      (*h)[1] = y.requires_grad();
      (*h)[2] = y.dim();
      for (int64_t d = 0; d < y.dim(); ++d) (*h)[size_t(3 + d)] = y.size(d);
      send(h->data(), int64_t(sizeof(Header)), stage + 1, kActivationHeader, h);
      send(y.detach(), stage + 1, kActivation);
      stage_out[size_t(mb)] = y;
    }
    stage_in[size_t(mb)] = x;
  }

  void backward(int mb) {
    if (stage == stages - 1) {
      // Scaled so the accumulated gradients are those of the whole batch's mean loss.
      compute([&] { (loss[size_t(mb)] / double(s.chunks_)).backward(); });
    } else if (Tensor y = stage_out[size_t(mb)]; y.requires_grad()) {
      Tensor g = empty(y.sizes(), TensorOptions(y.dtype()));
      recv(g, stage + 1, kGradient, what("recv of the gradient", mb, "from", stage + 1));
      compute([&] { y.backward(g); });
    }
    Tensor x = stage_in[size_t(mb)];
    if (stage > 0 && x.requires_grad()) {
      Tensor g = x.grad();
      if (!g.defined()) g = zeros_like(x);  // the output did not depend on the input
      send(g, stage - 1, kGradient);
    }
    stage_in[size_t(mb)] = Tensor(), stage_out[size_t(mb)] = Tensor(), loss[size_t(mb)] = Tensor();
  }
};

Tensor PipelineSchedule::step(const Tensor& input, const Tensor& target) {
  auto split = [&](const Tensor& t, const char* what) {
    if (!t.defined()) fail("pipeline: stage {} needs the {}; pass it to step()", stage_.stage_index(), what);
    if (t.dim() == 0 || t.size(0) % chunks_ != 0)
      fail("pipeline: the {} of {} rows does not split into {} equal micro-batches", what,
           t.dim() == 0 ? 0 : t.size(0), chunks_);
    return chunk(t, chunks_, 0);
  };
  Run run{*this, *stage_.comm_, stage_.stage_index(), stage_.num_stages(), {}, {}, {}, {}, {}, {}};
  // Every rank that was given the batch checks it, so a bad split raises on all of them at once.
  if (stage_.is_first() || input.defined()) run.inputs = split(input, "input batch");
  if (stage_.is_last() || target.defined()) run.targets = split(target, "target batch");
  size_t n = size_t(chunks_);
  run.stage_in.resize(n), run.stage_out.resize(n), run.loss.resize(n);
  losses_.assign(n, Tensor());
  for (const Action& a : order()) {
    if (a.forward)
      run.forward(a.microbatch);
    else
      run.backward(a.microbatch);
    run.reap();
  }
  for (auto& p : run.sends) p.req.wait(fmt::format("pipeline stage {}: a send at the end of the step", run.stage));
  busy_seconds_ = std::chrono::duration<double>(run.busy).count();
  if (!stage_.is_last()) return {};
  Tensor total = losses_[0];
  for (size_t i = 1; i < n; ++i) total = total + losses_[i];
  return total / double(chunks_);
}

}  // namespace kiln::dist
