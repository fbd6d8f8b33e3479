// DistributedDataParallel: bucketed gradient all-reduce driven by autograd hooks (see ddp.h).
#include "eager/dist/ddp.h"

#include <fmt/ranges.h>

#include <cstring>

#include "eager/autograd/engine.h"
#include "eager/autograd/graph.h"
#include "eager/dist/comm.h"
#include "eager/dist/comm_nccl.h"
#include "eager/ops.h"

namespace kiln::dist {

using detail::Comm;
using detail::NcclComm;
using detail::NcclRequest;
using detail::Request;

namespace {

struct Bucket {
  std::vector<size_t> params;  // indices into State::params, in the order they are laid out
  std::vector<int64_t> offsets;
  int64_t numel = 0;
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  Tensor flat;  // this step's buffer: a fresh one each step, since the .grads of the last step view it
  size_t pending = 0;
  Request req;       // a CPU bucket's MPI all-reduce
  NcclRequest nreq;  // a CUDA bucket's NCCL all-reduce, queued on the device's stream
};

// Grouping by dtype and device since one call reduces one type, and MPI and NCCL one kind of memory.
std::vector<Bucket> make_buckets(const std::vector<Tensor>& params, double cap_mb) {
  const double cap = cap_mb * 1024 * 1024;
  std::vector<Bucket> out;
  double bytes = 0;
  for (size_t k = params.size(); k-- > 0;) {  // reverse: backward produces the last layer's gradients first
    const Tensor& p = params[k];
    double b = double(p.numel()) * double(p.element_size());
    if (out.empty() || out.back().dtype != p.dtype() || out.back().device != p.device() ||
        (bytes + b > cap && !out.back().params.empty())) {
      out.emplace_back();
      out.back().dtype = p.dtype();
      out.back().device = p.device();
      bytes = 0;
    }
    Bucket& bk = out.back();
    bk.params.push_back(k);
    bk.offsets.push_back(bk.numel);
    bk.numel += p.numel();
    bytes += b;
  }
  return out;
}

// The device's type only: under nccl each rank's module is on a gpu of its own (cuda:local_rank).
std::string describe(const std::string& kind, const std::string& name, const Tensor& t) {
  return fmt::format("{} '{}' {} {} {}", kind, name, dtype_name(t.dtype()), shape_str(t.sizes()),
                     t.device().is_cpu() ? "cpu" : "cuda");
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// "parameter '0.weight' float32 [128,64] cpu" -> "parameter '0.weight'" and "float32 [128,64] cpu".
std::pair<std::string, std::string> split_description(const std::string& d) {
  size_t q = d.find('\'', d.find('\'') + 1);
  return {d.substr(0, q + 1), q + 2 <= d.size() ? d.substr(q + 2) : std::string()};
}

}  // namespace

struct DistributedDataParallel::State {
  std::shared_ptr<Comm> data, control;  // gradients / checks: separate so their collectives never interleave
  NcclComm* nccl = nullptr;             // CUDA buckets': NCCL orders them by the stream instead
  std::vector<Tensor> params;           // those that require grad
  std::vector<std::string> names;
  std::vector<size_t> bucket_of, slot_of;
  std::vector<Bucket> buckets;
  std::vector<char> ready;
  size_t next_launch = 0;
  double scale = 1;
  bool in_backward = false, no_sync = false, first = true;
  int64_t reductions = 0;
  // Buffers of all-reduces abandoned by an error while in flight: MPI still writes into them.
  std::vector<std::pair<Request, Tensor>> abandoned;

  void on_ready(size_t i, const std::weak_ptr<State>& self);
  void fill(size_t i);
  void launch_ready();
  void finish();
  void reset();
  std::string bucket_what(size_t b) const {
    return fmt::format("all_reduce of gradient bucket {} ({} parameters, {} elements)", b, buckets[b].params.size(),
                       buckets[b].numel);
  }
};

void DistributedDataParallel::State::on_ready(size_t i, const std::weak_ptr<State>& self) {
  if (no_sync) return;
  if (!in_backward) {
    in_backward = true;
    queue_callback([self] {
      if (auto s = self.lock()) s->finish();
    });
  }
  ready[i] = 1;
  if (first) return;  // the first backward reduces nothing until every rank has every gradient
  fill(i);
  launch_ready();
  // Open MPI advances nonblocking collectives only inside MPI calls: testing here moves the buckets
  // in flight along while backward computes the next ones.
  for (size_t b = 0; b < next_launch; ++b)
    if (buckets[b].req.active()) buckets[b].req.test();
}

void DistributedDataParallel::State::fill(size_t i) {
  NoGradGuard ng;
  Bucket& b = buckets[bucket_of[i]];
  if (!b.flat.defined()) b.flat = Tensor::empty({b.numel}, b.dtype, b.device);
  const Tensor& p = params[i];
  Tensor g = p.grad(), dst = b.flat.narrow(0, b.offsets[slot_of[i]], p.numel());
  // A plain memcpy when it can be one (AccumulateGrad gives a contiguous parameter a contiguous .grad):
  // measured, the general strided copy_ costs ~8% of a small MLP's step here.
  if (g.is_contiguous() && g.dtype() == b.dtype && g.device().is_cpu())
    std::memcpy(dst.raw_data(), g.raw_data(), size_t(p.numel()) * g.element_size());
  else
    dst.view(p.sizes()).copy_(g);
  // Averaging before the sum: each rank's share is grad / world, so the sum is the mean.
  if (--b.pending == 0 && scale != 1) b.flat.mul_(scale);
}

void DistributedDataParallel::State::launch_ready() {
  // In index order only: every rank must start the same all-reduces in the same order.
  while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
    size_t k = next_launch++;
    Bucket& b = buckets[k];
    // A CUDA bucket's all-reduce is queued behind the kernels that filled it: the host does not wait.
    if (b.device.is_cpu())
      b.req = data->iallreduce(b.flat.raw_data(), b.numel, b.dtype, ReduceOp::Sum);
    else
      b.nreq = nccl->all_reduce(b.flat.raw_data(), b.numel, b.dtype, ReduceOp::Sum, bucket_what(k));
  }
}

void DistributedDataParallel::State::reset() {
  in_backward = false;
  std::fill(ready.begin(), ready.end(), 0);
  next_launch = 0;
  for (Bucket& b : buckets) {
    if (b.req.active()) abandoned.emplace_back(std::move(b.req), b.flat);
    b.req = Request();
    // An abandoned NCCL all-reduce needs no keeping: the buffer's memory is reused only by later work
    // on the same stream, which runs after it.
    b.nreq = NcclRequest();
    b.flat = Tensor();
    b.pending = b.params.size();
  }
}

void DistributedDataParallel::State::finish() {
  struct ResetOnExit {
    State* s;
    ~ResetOnExit() { s->reset(); }
  } reset_on_exit{this};
  std::vector<std::string> missing;
  for (size_t i = 0; i < params.size(); ++i)
    if (!ready[i]) missing.push_back("'" + names[i] + "'");
  if (first) {
    // Every rank learns every rank's unused parameters (on the control communicator), so all raise
    // the same error instead of some waiting on a bucket that will never fill.
    std::string mine = fmt::format("{}", fmt::join(missing, ", "));
    auto all = control->allgather(mine, "the unused parameter check of the first backward");
    std::vector<std::string> per_rank;
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty()) per_rank.push_back(fmt::format("on rank {}: {}", r, all[r]));
    if (!per_rank.empty())
      fail("distributed_data_parallel: parameters that received no gradient in the first backward {}; every "
           "parameter that requires grad must take part in the loss on every rank (freeze the others with "
           "requires_grad_(false) before wrapping the module)",
           fmt::join(per_rank, "; "));
    first = false;
    for (size_t i = 0; i < params.size(); ++i) fill(i);
    launch_ready();
  } else if (!missing.empty()) {
    fail("distributed_data_parallel: parameters {} received no gradient in this backward on rank {} but did in "
         "the first; the same parameters must take part in every step",
         fmt::join(missing, ", "), data->rank());
  }
  // Every bucket, before the optimizer step: a CUDA one's results are ordered before the step's kernels by
  // the stream anyway, but the wait is where a peer's failure or a timeout surfaces.
  for (size_t b = 0; b < buckets.size(); ++b) {
    buckets[b].req.wait(bucket_what(b));
    buckets[b].nreq.wait();
  }
  NoGradGuard ng;
  for (Bucket& b : buckets)
    for (size_t s = 0; s < b.params.size(); ++s) {
      const Tensor& p = params[b.params[s]];
      p.set_grad(b.flat.narrow(0, b.offsets[s], p.numel()).view(p.sizes()));
    }
  ++reductions;
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 DistributedDataParallelOptions options)
    : module_(std::move(module)) {
  if (!module_) fail("distributed_data_parallel: module is null");
  if (!(options.bucket_cap_mb > 0))
    fail("distributed_data_parallel: bucket_cap_mb must be positive, got {}", options.bucket_cap_mb);
  auto world = Comm::world();
  if (options.broadcast_from < 0 || options.broadcast_from >= world->size())
    fail("distributed_data_parallel: invalid broadcast_from rank {}, rank should be in the interval [0, {}]",
         options.broadcast_from, world->size() - 1);
  register_module("module", module_);
  auto st = std::make_shared<State>();
  st->data = world->dup();
  st->control = world->dup();
  st->scale = 1.0 / double(world->size());

  // Shapes first, on every rank, before any data moves: a broadcast between different shapes would
  // corrupt memory or hang, and each rank must reach the same verdict to raise together.
  auto named_params = module_->named_parameters();
  auto named_buffers = module_->named_buffers();
  std::string mine;
  for (auto& [n, t] : named_params) mine += describe("parameter", n, t) + "\n";
  for (auto& [n, t] : named_buffers) mine += describe("buffer", n, t) + "\n";
  auto all = st->control->allgather(mine, "the parameter shape check");
  int root = options.broadcast_from;
  auto ref = split_lines(all[size_t(root)]);
  for (size_t r = 0; r < all.size(); ++r) {
    auto lines = split_lines(all[r]);
    for (size_t k = 0; k < std::max(lines.size(), ref.size()); ++k) {
      if (k < lines.size() && k < ref.size() && lines[k] == ref[k]) continue;
      if (k >= lines.size())
        fail("distributed_data_parallel: rank {} has {} parameters and buffers but rank {} has {}: {} is missing "
             "on rank {}",
             r, lines.size(), root, ref.size(), split_description(ref[k]).first, r);
      if (k >= ref.size())
        fail("distributed_data_parallel: rank {} has {} parameters and buffers but rank {} has {}: {} is missing "
             "on rank {}",
             r, lines.size(), root, ref.size(), split_description(lines[k]).first, root);
      auto [name_r, rest_r] = split_description(lines[k]);
      auto [name_0, rest_0] = split_description(ref[k]);
      if (name_r != name_0)
        fail("distributed_data_parallel: entry {} is {} on rank {} but {} on rank {}", k, name_0, root, name_r, r);
      fail("distributed_data_parallel: {} is {} on rank {} but {} on rank {}", name_r, rest_0, root, rest_r, r);
    }
  }
  // Every rank has the same devices now (the check above compared them), so all reach the NCCL
  // rendezvous together.
  auto all_named = named_params;
  all_named.insert(all_named.end(), named_buffers.begin(), named_buffers.end());
  for (auto& [n, t] : all_named) {
    if (t.device().is_cpu()) continue;
    std::string backend = get_backend();
    if (backend != "nccl")
      fail("distributed_data_parallel: '{}' is on {}; the {} backend reduces cpu tensors (init_process_group(\"nccl\") "
           "reduces cuda tensors)",
           n, t.device().str(), backend);
    if (!st->nccl) st->nccl = &NcclComm::get(*world);
    if (t.device().index != st->nccl->device())
      fail("distributed_data_parallel: '{}' is on {} but rank {}'s nccl communicator is on cuda:{}", n,
           t.device().str(), st->nccl->rank(), st->nccl->device());
  }

  {
    NoGradGuard ng;
    const auto& all_tensors = all_named;
    std::vector<Request> reqs;
    std::vector<NcclRequest> nreqs;
    std::vector<std::pair<Tensor, Tensor>> copies;  // (contiguous buffer, tensor) for non-contiguous ones
    for (auto& [n, t] : all_tensors) {
      Tensor buf = t.is_contiguous() ? t : t.contiguous();
      if (!buf.is_same(t)) copies.emplace_back(buf, t);
      int64_t bytes = buf.numel() * int64_t(buf.element_size());
      std::string what = fmt::format("broadcast of '{}' from rank {}", n, root);
      if (t.device().is_cpu()) {
        reqs.push_back(st->control->ibcast(buf.raw_data(), bytes, root));
        nreqs.emplace_back();
      } else {
        reqs.emplace_back();
        nreqs.push_back(st->nccl->broadcast(buf.raw_data(), bytes, root, what));
      }
    }
    for (size_t k = 0; k < reqs.size(); ++k) {
      reqs[k].wait(fmt::format("broadcast of '{}' from rank {}", all_tensors[k].first, root));
      nreqs[k].wait();
    }
    for (auto& [n, t] : all_tensors) t.bump_version();
    for (auto& [buf, t] : copies) t.copy_(buf);
  }

  for (auto& [n, t] : named_params)
    if (t.requires_grad()) st->params.push_back(t), st->names.push_back(n);
  if (st->params.empty())
    fail("distributed_data_parallel: the module has no parameter that requires gradient; DistributedDataParallel "
         "is not needed");
  st->buckets = make_buckets(st->params, options.bucket_cap_mb);
  st->bucket_of.resize(st->params.size());
  st->slot_of.resize(st->params.size());
  for (size_t b = 0; b < st->buckets.size(); ++b)
    for (size_t s = 0; s < st->buckets[b].params.size(); ++s)
      st->bucket_of[st->buckets[b].params[s]] = b, st->slot_of[st->buckets[b].params[s]] = s;
  st->ready.assign(st->params.size(), 0);
  st->reset();
  std::weak_ptr<State> weak = st;
  for (size_t i = 0; i < st->params.size(); ++i)
    st->params[i].register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto s = weak.lock()) s->on_ready(i, weak);
    });
  state_ = std::move(st);
}

DistributedDataParallel::~DistributedDataParallel() = default;

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& d) : d_(d), prev_(d.state_->no_sync) {
  d_.state_->no_sync = true;
}
DistributedDataParallel::NoSync::~NoSync() { d_.state_->no_sync = prev_; }

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const Bucket& b : state_->buckets) {
    out.emplace_back();
    for (size_t i : b.params) out.back().push_back(state_->names[i]);
  }
  return out;
}

int64_t DistributedDataParallel::reductions() const { return state_->reductions; }

}  // namespace kiln::dist
