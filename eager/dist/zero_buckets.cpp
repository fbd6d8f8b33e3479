#include "eager/dist/zero_buckets.h"

#include <fmt/ranges.h>

#include <algorithm>

#include "eager/autograd/engine.h"
#include "eager/autograd/graph.h"
#include "eager/dist/comm.h"
#include "eager/ops.h"

namespace kiln::dist::detail {

namespace {

constexpr const char* kWho = "ZeroRedundancyOptimizer";
constexpr size_t kMaxInFlight = 2;  // buckets reducing while backward goes on

struct Bucket {
  std::vector<size_t> params;   // indices into State::params, in layout order
  std::vector<int64_t> offset;  // in flat: the owner's segment start + the place within it
  std::vector<int64_t> seg_start, seg_len;  // per rank: its parameters' segment of flat
  int64_t numel = 0;
  Tensor flat;  // this backward's gradients / world, owner by owner; freed once its reductions completed
  Tensor mine;  // this backward's: the mean of this rank's segment
  size_t pending = 0;
  std::vector<Request> reqs;  // one reduce per owner, to that owner
  bool in_flight() const {
    for (const Request& r : reqs)
      if (r.active()) return true;
    return false;
  }
};

}  // namespace

struct ShardedGradBuckets::State {
  std::shared_ptr<Comm> data, control;  // separate, so the first backward's check never meets a reduction
  std::vector<Tensor> params;
  std::vector<int> owner;
  int me = 0, world = 1;
  DType dtype = DType::Float32;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of, slot_of;
  std::vector<char> ready, trains;  // trains: requires grad (the others are never waited for)
  size_t next_launch = 0;
  bool in_backward = false, first = true, unstepped = false;
  int64_t reductions = 0;
  std::vector<std::pair<Request, Tensor>> abandoned;  // buffers MPI may still write into after an error

  void on_ready(size_t i, const std::weak_ptr<State>& self);
  void fill(size_t i);
  void launch_ready();
  void finish();
  void reset();
  std::string what(size_t b) const {
    return fmt::format("reduce of sharded gradient bucket {} ({} parameters, {} elements)", b, buckets[b].params.size(),
                       buckets[b].numel);
  }
};

void ShardedGradBuckets::State::on_ready(size_t i, const std::weak_ptr<State>& self) {
  if (!in_backward) {
    // The parameters this rank owns hold the last backward's mean gradient: a second backward would add its
    // own to them on this rank only, and the reduction would then count it once instead of world times.
    if (unstepped)
      fail("{}: a second backward before step() with reduce_in_backward; the gradients of the first were already "
           "reduced and sharded (accumulate gradients over several backwards with reduce_in_backward = false, "
           "which reduces them in step())", kWho);
    in_backward = true;
    queue_callback([self] {
      if (auto s = self.lock()) s->finish();
    });
  }
  ready[i] = 1;
  fill(i);
  if (first) return;  // the first backward reduces nothing until every rank has every gradient
  launch_ready();
  // Open MPI advances collectives only inside MPI calls, so testing moves the buckets in flight along; one
  // whose reductions completed frees its buffer. Past kMaxInFlight the oldest is waited for: without it a
  // large bucket's transfer may not progress until backward ends, and every bucket's buffer would be held.
  size_t in_flight = 0;
  for (size_t b = next_launch; b-- > 0;) {
    Bucket& bk = buckets[b];
    if (!bk.flat.defined()) continue;
    bool done = true;
    for (Request& r : bk.reqs) done = (!r.active() || r.test()) && done;
    if (!done && ++in_flight > kMaxInFlight) {
      for (Request& r : bk.reqs) r.wait(what(b));
      done = true;
    }
    if (done) bk.flat = Tensor();
  }
}

void ShardedGradBuckets::State::fill(size_t i) {
  NoGradGuard ng;
  Bucket& b = buckets[bucket_of[i]];
  if (!b.flat.defined()) b.flat = empty({b.numel}, dtype);
  const Tensor& p = params[i];
  b.flat.narrow(0, b.offset[slot_of[i]], p.numel()).view(p.sizes()).copy_(p.grad());
  p.set_grad(Tensor());  // the bucket holds it now: a rank never keeps the whole model's gradients
  // Averaging before the sum: each rank's share is grad / world, so the sum is the mean.
  if (--b.pending == 0 && world > 1) b.flat.mul_(1.0 / double(world));
}

void ShardedGradBuckets::State::launch_ready() {
  // In index order only: every rank must start the same reductions in the same order.
  while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
    Bucket& b = buckets[next_launch++];
    if (b.seg_len[size_t(me)] > 0) b.mine = empty({b.seg_len[size_t(me)]}, dtype);
    b.reqs.clear();
    const size_t bytes = itemsize(dtype);
    for (int r = 0; r < world; ++r) {
      if (b.seg_len[size_t(r)] == 0) continue;
      const char* seg = static_cast<const char*>(b.flat.raw_data()) + size_t(b.seg_start[size_t(r)]) * bytes;
      b.reqs.push_back(data->ireduce(seg, r == me ? b.mine.raw_data() : nullptr, b.seg_len[size_t(r)], dtype, ReduceOp::Sum, r));
    }
  }
}

void ShardedGradBuckets::State::reset() {
  in_backward = false;
  for (size_t i = 0; i < ready.size(); ++i) ready[i] = !trains[i];
  next_launch = 0;
  for (Bucket& b : buckets) {
    for (Request& r : b.reqs)
      if (r.active()) {
        abandoned.emplace_back(std::move(r), b.flat);
        abandoned.emplace_back(Request(), b.mine);
      }
    b.reqs.clear();
    b.flat = b.mine = Tensor();
    b.pending = b.params.size();
  }
}

void ShardedGradBuckets::State::finish() {
  struct ResetOnExit {
    State* s;
    ~ResetOnExit() { s->reset(); }
  } reset_on_exit{this};
  std::vector<size_t> missing;
  for (size_t i = 0; i < params.size(); ++i)
    if (!ready[i]) missing.push_back(i);
  if (first) {
    // Every rank learns every rank's missing gradients, so all raise together instead of some waiting on a
    // bucket that never fills.
    auto all = control->allgather(fmt::format("{}", fmt::join(missing, ", ")), "the missing gradient check of the first backward");
    std::vector<std::string> per_rank;
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty()) per_rank.push_back(fmt::format("on rank {}: {}", r, all[r]));
    if (!per_rank.empty())
      fail("{}: parameters that received no gradient in the first backward (indices into params()) {}; with "
           "reduce_in_backward every parameter that requires grad must take part in every backward on every rank",
           kWho, fmt::join(per_rank, "; "));
    first = false;
    launch_ready();
  } else if (!missing.empty()) {
    fail("{}: parameters {} (indices into params()) received no gradient in this backward on rank {} but did in the "
         "first; with reduce_in_backward the same parameters must take part in every backward",
         kWho, fmt::join(missing, ", "), me);
  }
  for (size_t b = 0; b < buckets.size(); ++b)
    for (Request& r : buckets[b].reqs) r.wait(what(b));
  NoGradGuard ng;
  MemoryCategoryScope category(MemoryCategory::Gradient);
  for (Bucket& b : buckets)
    for (size_t s = 0; s < b.params.size(); ++s) {
      const size_t i = b.params[s];
      if (owner[i] != me) continue;
      const Tensor& p = params[i];
      const int64_t at = b.offset[s] - b.seg_start[size_t(me)];
      p.set_grad(b.mine.narrow(0, at, p.numel()).view(p.sizes()));
    }
  unstepped = true;
  ++reductions;
}

std::shared_ptr<ShardedGradBuckets> ShardedGradBuckets::attach(const std::vector<Tensor>& params,
                                                               const std::vector<int>& owner, double bucket_cap_mb) {
  if (!(bucket_cap_mb > 0)) fail("{}: bucket_cap_mb must be positive, got {}", kWho, bucket_cap_mb);
  auto world = Comm::world();
  auto st = std::make_shared<State>();
  st->data = world->dup();
  st->control = world->dup();
  st->me = world->rank();
  st->world = world->size();
  st->dtype = params.empty() ? DType::Float32 : params[0].dtype();
  std::vector<size_t> trained;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].requires_grad()) trained.push_back(i);
  st->params = params;
  st->owner = owner;
  // reverse order: backward produces the last layer's gradients first
  const double cap = bucket_cap_mb * 1024 * 1024;
  double bytes = cap;
  auto close = [&] {  // owner-major: each rank's parameters one contiguous segment, in layout order
    if (st->buckets.empty()) return;
    Bucket& b = st->buckets.back();
    b.seg_start.assign(size_t(st->world), 0);
    for (int r = 1; r < st->world; ++r) b.seg_start[size_t(r)] = b.seg_start[size_t(r - 1)] + b.seg_len[size_t(r - 1)];
    for (size_t s = 0; s < b.params.size(); ++s) b.offset[s] += b.seg_start[size_t(owner[b.params[s]])];
  };
  for (size_t k = trained.size(); k-- > 0;) {
    const size_t i = trained[k];
    const double nb = double(params[i].numel()) * double(params[i].element_size());
    if (bytes + nb > cap && bytes > 0) {
      close();
      st->buckets.emplace_back();
      st->buckets.back().seg_len.assign(size_t(st->world), 0);
      bytes = 0;
    }
    Bucket& b = st->buckets.back();
    b.params.push_back(i);
    b.offset.push_back(b.seg_len[size_t(owner[i])]);  // within the owner's segment; close() adds its start
    b.seg_len[size_t(owner[i])] += params[i].numel();
    b.numel += params[i].numel();
    bytes += nb;
  }
  close();
  st->bucket_of.assign(params.size(), 0);
  st->slot_of.assign(params.size(), 0);
  for (size_t b = 0; b < st->buckets.size(); ++b)
    for (size_t s = 0; s < st->buckets[b].params.size(); ++s)
      st->bucket_of[st->buckets[b].params[s]] = b, st->slot_of[st->buckets[b].params[s]] = s;
  st->trains.assign(params.size(), 0);
  for (size_t i : trained) st->trains[i] = 1;
  st->ready.assign(params.size(), 0);
  st->reset();
  std::weak_ptr<State> weak = st;
  for (size_t i : trained)
    st->params[i].register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto s = weak.lock()) s->on_ready(i, weak);
    });
  return std::make_shared<ShardedGradBuckets>(st);
}

ShardedGradBuckets::ShardedGradBuckets(std::shared_ptr<State> s) : state_(std::move(s)) {}
ShardedGradBuckets::~ShardedGradBuckets() = default;

void ShardedGradBuckets::stepped() { state_->unstepped = false; }

std::vector<std::vector<size_t>> ShardedGradBuckets::buckets() const {
  std::vector<std::vector<size_t>> out;
  for (const Bucket& b : state_->buckets) out.push_back(b.params);
  return out;
}

int64_t ShardedGradBuckets::reductions() const { return state_->reductions; }

}  // namespace kiln::dist::detail
