// kiln::dist under mpirun (run_dist.sh starts 2 ranks): collectives, and DistributedDataParallel
// training that must equal single-process training on the full batch, eager and compiled. The "nccl:"
// cases need the nccl backend and one gpu per rank; they say why they skip (run_dist.sh also runs them
// at world size 1, for a machine with one gpu).
#include "../support.h"

#include <fmt/ranges.h>

#include <cstdlib>
#include <optional>

#include "eager/dist/comm_nccl.h"

#include "samples/digits_models.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;

namespace {

int rank() { return dist::get_rank(); }
bool equal(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.dtype() == b.dtype() && kiln::test::values(a) == kiln::test::values(b);
}
int world() { return dist::get_world_size(); }

// Every rank holds the same values: the max and the min over ranks both equal this rank's.
void check_same_on_every_rank(const Tensor& t) {
  Tensor hi = t.detach().clone(), lo = t.detach().clone();
  dist::all_reduce(hi, dist::ReduceOp::Max);
  dist::all_reduce(lo, dist::ReduceOp::Min);
  CHECK(equal(hi, t.detach()));
  CHECK(equal(lo, t.detach()));
}

// Each step takes the next 64 rows of a fixed synthetic set; a rank takes its 64 / world of them.
struct Data {
  Tensor x, y;
};
Data digits_like() {
  manual_seed(11);
  Tensor x = randn({256, 64});
  return {x, randint(0, 10, {256})};
}

// Trains the digits MLP for `steps` Adam steps and returns its parameters. Distributed, rank r starts
// from its own random weights (seed 1 + r): only DistributedDataParallel's broadcast makes the ranks
// (and the single-process run, seed 1) start alike.
std::vector<Tensor> train(bool distributed, bool compiled, int steps, double bucket_cap_mb = 25,
                          Device device = Device::cpu()) {
  int w = distributed ? world() : 1, r = distributed ? rank() : 0;
  Data d = digits_like();
  if (!device.is_cpu()) d = {d.x.to(device), d.y.to(device)};
  manual_seed(distributed ? 1 + uint64_t(r) : 1);
  auto mlp = kiln::samples::digits_mlp();
  mlp->to(device);
  std::shared_ptr<nn::Module> model = mlp;
  if (distributed) {
    dist::DistributedDataParallelOptions o;
    o.bucket_cap_mb = bucket_cap_mb;
    model = std::make_shared<dist::DistributedDataParallel>(mlp, o);
  }
  optim::Adam opt(model->parameters(), {3e-3});
  auto loss_of = [&](const Tensors& b) { return cross_entropy((*model)(b[0]), b[1]); };
  std::optional<CompiledTrainStep> step;
  if (compiled) step.emplace(*model, loss_of, opt);
  const int64_t batch = 64, local = batch / w;
  for (int s = 0; s < steps; ++s) {
    int64_t start = (s * batch) % d.x.size(0) + r * local;
    Tensors b{d.x.slice(0, start, start + local), d.y.slice(0, start, start + local)};
    if (compiled) {
      (*step)(b);
    } else {
      Tensor loss = loss_of(b);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
  }
  if (compiled) CHECK(compile_stats(step->function()).eager_calls == 0);
  if (auto* ddp = dynamic_cast<dist::DistributedDataParallel*>(model.get())) CHECK(ddp->reductions() == steps);
  std::vector<Tensor> out;
  for (auto& p : mlp->parameters()) out.push_back(p.detach().cpu().clone());
  return out;
}

// Why this job cannot run the nccl cases; empty when it can. The same on every rank of a node, so all
// ranks skip alike.
std::string nccl_skip_reason() {
  if (dist::get_backend() != "nccl") {
    std::string why = dist::nccl_unavailable_reason();
    return "the process group's backend is " + dist::get_backend() + (why.empty() ? "" : " (" + why + ")");
  }
  const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  int ranks = local ? std::atoi(local) : world(), gpus = cuda::device_count();
  if (ranks > gpus)
    return fmt::format("{} ranks on this node and {} visible gpu{}: nccl refuses two ranks on one gpu (run_dist.sh's "
                       "nccl1 mode, meson test dist/nccl_world1, runs these cases at world size 1)",
                       ranks, gpus, gpus == 1 ? "" : "s");
  return "";
}
#define KILN_SKIP_WITHOUT_NCCL()                                            \
  if (std::string why = nccl_skip_reason(); !why.empty()) {                 \
    if (rank() == 0) MESSAGE("skipped: " << why);                           \
    return;                                                                 \
  }

double max_abs_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, amax((a[i] - b[i]).abs()).item<double>());
  return m;
}

struct TwoHeads : nn::Module {
  std::shared_ptr<nn::Linear> used, unused;
  bool use_both;
  explicit TwoHeads(bool both) : use_both(both) {
    used = register_module("used", std::make_shared<nn::Linear>(4, 2));
    unused = register_module("unused", std::make_shared<nn::Linear>(4, 2));
  }
  Tensor forward(const Tensor& x) override { return use_both ? used->forward(x) + unused->forward(x) : used->forward(x); }
  std::string name() const override { return "TwoHeads"; }
};

// A parameter that claims to be on cuda:0 (no device is touched before the backend check raises).
struct OnFakeGpu : nn::Module {
  OnFakeGpu() { register_parameter("w", kiln::test::fake_cuda_tensor({2})); }
  Tensor forward(const Tensor& x) override { return x; }
  std::string name() const override { return "OnFakeGpu"; }
};

}  // namespace

TEST_CASE("dist: rank and world size from mpirun; all_reduce and broadcast in place") {
  REQUIRE(dist::is_initialized());
  CHECK(world() == dist::launcher_world_size());
  CHECK(rank() >= 0);
  CHECK(rank() < world());
  const double n = world(), r = rank();
  Tensor s = full({5}, r + 1);
  dist::all_reduce(s);
  CHECK(equal(s, full({5}, n * (n + 1) / 2)));
  Tensor a = full({3}, r, DType::Float64);
  dist::all_reduce(a, dist::ReduceOp::Avg);
  CHECK(equal(a, full({3}, (n - 1) / 2, DType::Float64)));
  Tensor mx = tensor(std::vector<int64_t>{int64_t(r), -int64_t(r)});
  dist::all_reduce(mx, dist::ReduceOp::Max);
  CHECK(equal(mx, tensor(std::vector<int64_t>{int64_t(n) - 1, 0})));
  // A non-contiguous tensor is reduced through a copy and written back in place.
  Tensor m = full({2, 3}, r + 1).t();
  dist::all_reduce(m, dist::ReduceOp::Min);
  CHECK(equal(m, ones({3, 2})));
  // async: the Work completes on wait().
  Tensor b = rank() == 0 ? arange(6.0).reshape({2, 3}) : zeros({2, 3});
  dist::Work w = dist::broadcast(b, 0, true);
  w.wait();
  CHECK(w.is_completed());
  CHECK(equal(b, arange(6.0).reshape({2, 3})));
  dist::barrier();
}

TEST_CASE("dist: bad collective inputs raise with the facts") {
  check_error([] { dist::all_reduce(Tensor()); }, "all_reduce: tensor is undefined");
  if (dist::get_backend() == "mpi")
    check_error([] { dist::all_reduce(kiln::test::fake_cuda_tensor({2})); },
                "all_reduce: tensor is on cuda:0; the mpi backend works on cpu tensors (init_process_group(\"nccl\") "
                "reduces cuda tensors, or copy with .cpu())");
  check_error([] { dist::all_reduce(ones({2}, DType::BFloat16)); },
              "dist: all_reduce of bfloat16 tensors is not supported (mpi has no 16-bit float type)");
  check_error([] { dist::all_reduce(ones({2}, DType::Int64), dist::ReduceOp::Avg); },
              "all_reduce: reduce op avg needs a floating tensor, got int64");
  check_error([] { dist::broadcast(ones({2}), world()); },
              fmt::format("broadcast: invalid source rank {}, rank should be in the interval [0, {}]", world(), world() - 1));
  check_error([] { dist::init_process_group(); }, "init_process_group: trying to initialize the default process group twice");
  check_error([] { dist::DistributedDataParallel d(kiln::samples::digits_mlp(), {0}); },
              "distributed_data_parallel: bucket_cap_mb must be positive, got 0");
  if (dist::get_backend() == "mpi")
    check_error([] { dist::DistributedDataParallel d(std::make_shared<OnFakeGpu>()); },
                "distributed_data_parallel: 'w' is on cuda:0; the mpi backend reduces cpu tensors "
                "(init_process_group(\"nccl\") reduces cuda tensors)");
}

TEST_CASE("dist: all_gather_into_tensor and reduce_scatter_tensor, as torch's; bad sizes name the numbers") {
  int w = world(), r = rank();
  Tensor mine = full({2, 3}, double(r + 1));
  Tensor all = zeros({w, 2, 3});
  dist::all_gather_into_tensor(all, mine);
  for (int k = 0; k < w; ++k) CHECK(equal(all.select(0, k), full({2, 3}, double(k + 1))));
  // block k of every rank's input is k + rank; its sum over the ranks lands on rank k
  Tensor in = zeros({w * 4});
  for (int k = 0; k < w; ++k) in.slice(0, k * 4, k * 4 + 4).fill_(double(k + r));
  Tensor out = zeros({4}), avg = zeros({2, 2});
  dist::reduce_scatter_tensor(out, in);
  double sum = 0;
  for (int q = 0; q < w; ++q) sum += r + q;
  CHECK(equal(out, full({4}, sum)));
  dist::reduce_scatter_tensor(avg, in, dist::ReduceOp::Avg);  // any output shape with the block's elements
  check_close(avg, full({2, 2}, sum / w));
  dist::Work pending = dist::all_gather_into_tensor(all, mine.t(), true);  // a non-contiguous input
  pending.wait();
  check_error([&] { dist::all_gather_into_tensor(zeros({w * 6 + 1}), mine); },
              fmt::format("all_gather_into_tensor: output has {} elements and input 6; with {} ranks the output must "
                          "have {} times the input's", w * 6 + 1, w, w));
  check_error([&] { dist::reduce_scatter_tensor(zeros({3}), in); },
              fmt::format("reduce_scatter_tensor: output has 3 elements and input {}", w * 4));
  check_error([&] { dist::reduce_scatter_tensor(zeros({4}, DType::Float64), in); },
              "reduce_scatter_tensor: input and output must have the same dtype, got float32 and float64");
  check_error([&] { dist::reduce_scatter_tensor(zeros({4}, DType::Int64), in.to(DType::Int64), dist::ReduceOp::Avg); },
              "reduce_scatter_tensor: reduce op avg needs a floating tensor, got int64");
}

TEST_CASE("ddp: parameters and buffers start from rank 0's values; buckets fill in reverse parameter order") {
  manual_seed(100 + uint64_t(rank()));
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  auto model = std::make_shared<nn::Sequential>(
      std::vector<std::shared_ptr<nn::Module>>{kiln::samples::digits_mlp(), bn});
  for (auto& [n, t] : model->named_buffers())
    if (n == "1.running_mean") t.fill_(double(rank()));
  dist::DistributedDataParallelOptions o;
  o.bucket_cap_mb = 0.02;  // 20 KiB: the 32 KiB first-layer weight gets a bucket of its own
  dist::DistributedDataParallel ddp(model, o);
  for (auto& [n, t] : model->named_parameters()) check_same_on_every_rank(t);
  for (auto& [n, t] : model->named_buffers()) check_same_on_every_rank(t);
  for (auto& [n, t] : model->named_buffers())
    if (n == "1.running_mean") CHECK(equal(t, zeros({3})));
  auto buckets = ddp.bucket_parameter_names();
  REQUIRE(buckets.size() == 2);
  CHECK(buckets[0] == std::vector<std::string>{"1.bias", "1.weight", "0.2.bias", "0.2.weight", "0.0.bias"});
  CHECK(buckets[1] == std::vector<std::string>{"0.0.weight"});
  CHECK(ddp.named_parameters()[0].first == "module.0.0.weight");  // torch's state_dict names under DDP
}

TEST_CASE("ddp: a parameter whose shape differs across ranks raises on every rank, naming it") {
  if (world() < 2) return;
  manual_seed(5);
  auto m = kiln::samples::digits_mlp(64, rank() == 1 ? 100 : 128);
  check_error([&] { dist::DistributedDataParallel d(m); },
              "distributed_data_parallel: parameter '0.weight' is float32 [128,64] cpu on rank 0 but float32 "
              "[100,64] cpu on rank 1");
  auto extra = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{kiln::samples::digits_mlp()});
  if (rank() == 1) extra->add(std::make_shared<nn::Linear>(10, 3));
  check_error([&] { dist::DistributedDataParallel d(extra); },
              "distributed_data_parallel: rank 1 has 6 parameters and buffers but rank 0 has 4: parameter '1.weight' "
              "is missing on rank 0");
}

TEST_CASE("ddp: 20 Adam steps of the digits MLP on the ranks equal single-process training on the full batch") {
  REQUIRE(64 % world() == 0);
  auto ref = train(false, false, 20);
  for (double cap : {25.0, 0.02}) {  // one bucket; two, the second started while backward still runs
    CAPTURE(cap);
    auto got = train(true, false, 20, cap);
    double diff = max_abs_diff(got, ref);
    if (rank() == 0) MESSAGE("eager ddp vs single process, max |diff| = " << diff);
    CHECK(diff <= 1e-5);
    for (auto& p : got) check_same_on_every_rank(p);
  }
}

TEST_CASE("ddp: a compiled training step (CompiledTrainStep) averages gradients before its update") {
  auto ref = train(false, true, 20);
  auto got = train(true, true, 20, 0.02);
  double diff = max_abs_diff(got, ref);
  if (rank() == 0) MESSAGE("compiled ddp vs compiled single process, max |diff| = " << diff);
  CHECK(diff <= 1e-5);
  for (auto& p : got) check_same_on_every_rank(p);
}

TEST_CASE("ddp: a parameter without gradient in the first backward is named on every rank instead of hanging") {
  manual_seed(9);
  // Rank 0 uses both heads, the others only one: without the check rank 0 would wait forever on the
  // bucket holding 'unused.*'.
  auto m = std::make_shared<TwoHeads>(rank() == 0);
  Tensor x = randn({4, 4});
  if (world() < 2) return;
  {
    dist::DistributedDataParallel ddp(m);
    check_error([&] { ddp(x).sum().backward(); },
                "distributed_data_parallel: parameters that received no gradient in the first backward on rank 1: "
                "'unused.weight', 'unused.bias'; every parameter that requires grad must take part in the loss on "
                "every rank");
  }
  // Freezing the unused head is the fix: a DDP made after it reduces the rest.
  for (auto& [n, p] : m->unused->named_parameters()) p.requires_grad_(false), p.set_grad(Tensor());
  m->use_both = false;
  dist::DistributedDataParallel ddp2(m);
  ddp2.zero_grad();
  ddp2(x).sum().backward();
  CHECK(ddp2.reductions() == 1);
  check_same_on_every_rank(m->used->named_parameters()[0].second.grad());
}

TEST_CASE("ddp: no_sync accumulates locally; the next backward averages the accumulated gradients") {
  Data d = digits_like();
  manual_seed(1);
  auto plain = kiln::samples::digits_mlp();
  manual_seed(1);
  auto mlp = kiln::samples::digits_mlp();
  dist::DistributedDataParallel ddp(mlp);
  auto rows = [&](int r, int micro) { return std::pair{r * 16 + micro * 8, r * 16 + micro * 8 + 8}; };
  {
    auto guard = ddp.no_sync();
    auto [a, b] = rows(rank(), 0);
    cross_entropy(ddp(d.x.slice(0, a, b)), d.y.slice(0, a, b)).backward();
  }
  CHECK(ddp.reductions() == 0);
  auto [a, b] = rows(rank(), 1);
  cross_entropy(ddp(d.x.slice(0, a, b)), d.y.slice(0, a, b)).backward();
  CHECK(ddp.reductions() == 1);
  // The same sum computed by this process alone: every rank's two micro-batches, averaged over ranks.
  for (int r = 0; r < world(); ++r)
    for (int micro = 0; micro < 2; ++micro) {
      auto [pa, pb] = rows(r, micro);
      (cross_entropy((*plain)(d.x.slice(0, pa, pb)), d.y.slice(0, pa, pb)) / double(world())).backward();
    }
  auto pg = plain->parameters(), dg = mlp->parameters();
  for (size_t i = 0; i < pg.size(); ++i) check_close(dg[i].grad(), pg[i].grad(), 1e-5, 1e-6);
}

TEST_CASE("nccl: where the backend cannot run, init_process_group says what is missing") {
  check_error([] { dist::init_process_group("gloo"); },
              "init_process_group: unknown backend 'gloo'; kiln has the backends mpi and nccl");
  // The loader, on any machine: a library that is not there, one that is not NCCL, and the real one.
  check_error([] { dist::detail::nccl_probe_library("libnccl-missing.so.2"); },
              "nccl: cannot open libnccl-missing.so.2 (");
  std::string why = dist::nccl_unavailable_reason();
  if (why.find("built without") != std::string::npos) {
    if (rank() == 0) MESSAGE("skipped the rest: " << why);
    return;
  }
  check_error([] { dist::detail::nccl_probe_library("libm.so.6"); },
              "nccl: the library libm.so.6 lacks ncclGetVersion");
  try {
    int v = dist::detail::nccl_probe_library("libnccl.so.2");
    CHECK(v >= 20000);
    if (rank() == 0) MESSAGE("libnccl.so.2 loads without a gpu: nccl " << v);
  } catch (const Error& e) {
    if (rank() == 0) MESSAGE("libnccl.so.2 is not on the loader's path here: " << e.what());
  }
  if (dist::is_nccl_available()) {
    CHECK(why.empty());
    if (rank() == 0) MESSAGE("skipped the unavailable-backend error: nccl can run here");
    return;
  }
  // Checked before the group's state: this process already has a group, yet the backend's error comes first.
  REQUIRE(why.rfind("backend nccl ", 0) == 0);
  check_error([] { dist::init_process_group("nccl"); }, "init_process_group: " + why);
  if (!cuda::is_available())
    CHECK(why == "backend nccl needs a cuda device: " + cuda::unavailable_reason());
  CHECK(why.back() != '.');
  if (rank() == 0) MESSAGE("init_process_group(\"nccl\") here: " << why);
}

TEST_CASE("nccl: all_reduce (sum, avg, max, min) and broadcast of cuda tensors, in place, sync and async") {
  KILN_SKIP_WITHOUT_NCCL();
  const Device dev = dist::nccl_device();
  const double n = world(), r = rank();
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64}) {
    CAPTURE(dtype_name(t));
    Tensor s = full({5}, r + 1, TensorOptions(t)).to(dev);
    dist::all_reduce(s);
    CHECK(s.device() == dev);
    CHECK(equal(s.cpu(), full({5}, n * (n + 1) / 2, TensorOptions(t))));
    Tensor mx = tensor(std::vector<int64_t>{int64_t(r), -int64_t(r)}).to(t).to(dev);
    dist::all_reduce(mx, dist::ReduceOp::Max);
    CHECK(equal(mx.cpu(), tensor(std::vector<int64_t>{int64_t(n) - 1, 0}).to(t)));
    Tensor mn = full({3}, r, TensorOptions(t)).to(dev);
    dist::all_reduce(mn, dist::ReduceOp::Min);
    CHECK(equal(mn.cpu(), zeros({3}, TensorOptions(t))));
    if (is_floating(t)) {
      Tensor a = full({3}, r, TensorOptions(t)).to(dev);
      dist::all_reduce(a, dist::ReduceOp::Avg);
      CHECK(equal(a.cpu(), full({3}, (n - 1) / 2, TensorOptions(t))));
    }
  }
  // A non-contiguous tensor: reduced through a copy, written back on the stream.
  Tensor m = full({2, 3}, r + 1).to(dev).t();
  dist::all_reduce(m, dist::ReduceOp::Min);
  CHECK(equal(m.cpu(), ones({3, 2})));
  // async: kiln's next kernels on the device run after the collective without a wait (one stream).
  Tensor x = full({4}, r + 1).to(dev);
  dist::Work w = dist::all_reduce(x, dist::ReduceOp::Sum, true);
  Tensor doubled = mul(x, 2.0);
  w.wait();
  CHECK(w.is_completed());
  CHECK(equal(doubled.cpu(), full({4}, n * (n + 1))));
  Tensor b = rank() == 0 ? arange(6.0).reshape({2, 3}).to(dev) : zeros({2, 3}).to(dev);
  dist::Work wb = dist::broadcast(b, 0, true);
  wb.wait();
  CHECK(equal(b.cpu(), arange(6.0).reshape({2, 3})));
  // CPU tensors still go through MPI in the same group.
  Tensor c = full({2}, r + 1);
  dist::all_reduce(c);
  CHECK(equal(c, full({2}, n * (n + 1) / 2)));
  check_error([&] { dist::all_reduce(ones({2}, TensorOptions(DType::Bool)).to(dev)); },
              "dist: all_reduce of bool tensors is not supported by nccl");
}

TEST_CASE("nccl: 20 Adam steps of the digits MLP with DistributedDataParallel on cuda equal the cpu run") {
  KILN_SKIP_WITHOUT_NCCL();
  REQUIRE(64 % world() == 0);
  auto ref = train(false, false, 20);
  for (double cap : {25.0, 0.02}) {  // one bucket; two, the first queued on the stream while backward runs
    CAPTURE(cap);
    auto got = train(true, false, 20, cap, dist::nccl_device());
    double diff = max_abs_diff(got, ref);
    if (rank() == 0) MESSAGE("cuda ddp over nccl vs cpu single process, max |diff| = " << diff);
    CHECK(diff <= 1e-5);
    for (auto& p : got) check_same_on_every_rank(p);
  }
}

// ---- tensor parallelism (eager/dist/tensor_parallel.h) ----

namespace {

double max_diff(const Tensor& a, const Tensor& b) { return max(abs(a.detach() - b.detach())).item<double>(); }

}  // namespace

TEST_CASE("tensor parallel: a Column -> gelu -> Row MLP over the ranks trains as one process, 20 SGD steps") {
  REQUIRE(32 % world() == 0);
  Data d = digits_like();
  manual_seed(5);
  nn::Linear a(64, 32), b(32, 10);
  manual_seed(5);  // the same random state: each shard is cut from the weight the whole Linear gets
  dist::ColumnParallelLinear ca(64, 32, true, /*gather_output=*/false);
  dist::RowParallelLinear rb(32, 10, true, /*input_is_parallel=*/true);
  CHECK(ca.weight.sizes() == Shape{32 / world(), 64});
  CHECK(rb.weight.sizes() == Shape{10, 32 / world()});
  std::vector<std::string> names;
  for (const auto& [n, p] : ca.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"weight", "bias"});
  optim::SGD one({a.weight, a.bias, b.weight, b.bias}, {0.1}), split(std::vector<Tensor>{ca.weight, ca.bias, rb.weight, rb.bias}, {0.1});
  double worst = 0;
  for (int s = 0; s < 20; ++s) {
    Tensor x = d.x.slice(0, (s % 4) * 64, (s % 4) * 64 + 64), y = d.y.slice(0, (s % 4) * 64, (s % 4) * 64 + 64);
    Tensor want = cross_entropy(b(gelu(a(x), "none")), y);
    Tensor got = cross_entropy(rb(gelu(ca(x), "none")), y);
    worst = std::max(worst, std::abs(got.item<double>() - want.item<double>()));
    for (auto [opt, loss] : {std::pair{&one, want}, std::pair{&split, got}}) {
      opt->zero_grad();
      loss.backward();
      opt->step();
    }
  }
  CHECK(worst <= 1e-5);
  int64_t part = 32 / world(), r = rank();
  double w = std::max({max_diff(ca.weight, a.weight.slice(0, r * part, (r + 1) * part)),
                       max_diff(ca.bias, a.bias.slice(0, r * part, (r + 1) * part)),
                       max_diff(rb.weight, b.weight.slice(1, r * part, (r + 1) * part)), max_diff(rb.bias, b.bias)});
  if (rank() == 0) MESSAGE("tensor parallel vs single process: losses within " << worst << ", parameters within " << w);
  CHECK(w <= 1e-5);
  check_same_on_every_rank(rb.bias);
}

TEST_CASE("tensor parallel: gathered outputs and scattered inputs carry their gradients; bad splits name the numbers") {
  manual_seed(8);
  Tensor x = randn({3, 8}).requires_grad_(), x1 = x.detach().clone().requires_grad_();
  manual_seed(9);
  nn::Linear full(8, 6 * world());
  manual_seed(9);
  dist::ColumnParallelLinear col(8, 6 * world(), true, /*gather_output=*/true);
  Tensor yc = col(x), yf = full(x1);
  CHECK(yc.sizes() == yf.sizes());
  CHECK(max_diff(yc, yf) <= 1e-6);
  mul(yc, yc).sum().backward();
  mul(yf, yf).sum().backward();
  CHECK(max_diff(x.grad(), x1.grad()) <= 1e-5);  // the input's gradient summed over the ranks' parts

  manual_seed(10);
  nn::Linear rfull(4 * world(), 5);
  manual_seed(10);
  dist::RowParallelLinear row(4 * world(), 5, true, /*input_is_parallel=*/false);
  Tensor z = randn({2, 4 * world()}).requires_grad_(), z1 = z.detach().clone().requires_grad_();
  Tensor yr = row(z), yr1 = rfull(z1);
  CHECK(max_diff(yr, yr1) <= 1e-5);
  mul(yr, yr).sum().backward();
  mul(yr1, yr1).sum().backward();
  CHECK(max_diff(z.grad(), z1.grad()) <= 1e-5);

  if (world() > 1) {
    check_error([&] { dist::ColumnParallelLinear(4, 2 * world() + 1); },
                fmt::format("ColumnParallelLinear: out_features {} does not divide by the world size {}", 2 * world() + 1, world()));
    check_error([&] { dist::RowParallelLinear(2 * world() + 1, 4); },
                fmt::format("RowParallelLinear: in_features {} does not divide by the world size {}", 2 * world() + 1, world()));
  }
}

// ---- point to point (dist::send / recv / isend / irecv) ----

TEST_CASE("p2p: send and recv between neighbours, blocking and not; bad peers and sizes raise with the facts") {
  if (world() < 2) return;
  const int r = rank(), next = (r + 1) % world(), prev = (r + world() - 1) % world();
  // A ring: every rank sends to the next and receives from the previous at once (nonblocking both ways).
  Tensor out = arange(6.0).reshape({2, 3}) + double(r), in = zeros({2, 3});
  dist::Work ws = dist::isend(out, next, 7), wr = dist::irecv(in, prev, 7);
  wr.wait();
  ws.wait();
  CHECK(equal(in, arange(6.0).reshape({2, 3}) + double(prev)));
  CHECK(wr.source_rank() == prev);
  // Blocking, from any source, into a non-contiguous buffer (written back through a copy).
  if (r == 0) {
    dist::send(tensor(std::vector<int64_t>{4, 5, 6}), 1);
  } else if (r == 1) {
    Tensor buf = zeros({3, 1}, DType::Int64).t();
    CHECK(dist::recv(buf) == 0);
    CHECK(equal(buf.reshape({3}), tensor(std::vector<int64_t>{4, 5, 6})));
  }
  // A message of another size than the buffer is named, not silently truncated or padded.
  if (r == 0) dist::send(ones({3}), 1, 2);
  if (r == 1)
    check_error([] { dist::recv(zeros({4}), 0, 2); },
                "recv: the buffer has 16 bytes (4 float32 elements) but the message from rank 0 has 12 bytes");
  check_error([] { dist::send(ones({1}), rank()); },
              fmt::format("send: the destination rank {} is this process's own rank", rank()));
  check_error([] { dist::recv(ones({1}), world()); },
              fmt::format("recv: invalid source rank {}, rank should be in the interval [0, {}]", world(), world() - 1));
  check_error([] { dist::isend(ones({1}), 0, -1); }, "send: tag must be non-negative, got -1");
  dist::barrier();
}

// ---- pipeline parallelism (eager/dist/pipeline.h) ----

namespace {

// 5 modules: Linear 64->32, ReLU, Linear 32->32, ReLU, Linear 32->10.
std::shared_ptr<nn::Sequential> pipe_mlp() {
  manual_seed(21);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(64, 32), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 32),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(32, 10)});
}

// The last stage's loss on every rank.
Tensor loss_everywhere(Tensor loss) {
  Tensor t = loss.defined() ? loss.detach().reshape({1}).clone() : zeros({1});
  dist::broadcast(t, world() - 1);
  return t;
}

// Trains pipe_mlp for `steps` SGD steps on 32-row batches: in one process on the whole batch
// (schedule empty), or as a pipeline over the ranks with `chunks` micro-batches. Returns the losses and
// the parameters of the modules this rank holds (all of them in one process, in module order).
struct PipeRun {
  std::vector<double> losses;
  std::vector<Tensor> params;
  int64_t offset = 0, count = 0;  // the modules behind params
};
PipeRun train_pipe(const std::string& schedule, int chunks, int steps, std::vector<int64_t> balance = {}) {
  Data d = digits_like();
  auto model = pipe_mlp();
  auto loss_fn = [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
  PipeRun run;
  std::optional<dist::PipelineStage> stage;
  std::unique_ptr<dist::PipelineSchedule> sched;
  if (schedule.empty()) {
    run.count = int64_t(model->size());
  } else {
    stage.emplace(dist::pipeline_stage(*model, balance));
    run.offset = stage->module_offset();
    run.count = stage->balance()[size_t(rank())];
    if (schedule == "gpipe") sched = std::make_unique<dist::ScheduleGPipe>(*stage, chunks, loss_fn);
    else sched = std::make_unique<dist::Schedule1F1B>(*stage, chunks, loss_fn);
  }
  optim::SGD opt(stage ? stage->parameters() : model->parameters(), {0.1});
  for (int s = 0; s < steps; ++s) {
    Tensor x = d.x.slice(0, s * 32, s * 32 + 32), y = d.y.slice(0, s * 32, s * 32 + 32);
    opt.zero_grad();
    Tensor loss;
    if (sched) {
      loss = loss_everywhere(sched->step(x, y));
    } else {
      loss = loss_fn((*model)(x), y);
      loss.backward();
    }
    opt.step();
    run.losses.push_back(loss.item<double>());
  }
  for (int64_t i = run.offset; i < run.offset + run.count; ++i)
    for (const Tensor& p : (*model)[size_t(i)].parameters()) run.params.push_back(p.detach().clone());
  return run;
}

}  // namespace

TEST_CASE("pipeline: an MLP split in stages trains as one process, GPipe and 1F1B, 5 SGD steps") {
  auto ref = train_pipe("", 1, 5);
  for (std::string schedule : {"gpipe", "1f1b"}) {
    for (int chunks : {1, 4}) {
      CAPTURE(schedule);
      CAPTURE(chunks);
      auto got = train_pipe(schedule, chunks, 5, world() == 2 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{});
      double loss_diff = 0;
      for (size_t i = 0; i < got.losses.size(); ++i) loss_diff = std::max(loss_diff, std::abs(got.losses[i] - ref.losses[i]));
      // This rank's modules against the same modules of the whole model.
      size_t first = 0;
      for (int64_t i = 0; i < got.offset; ++i) first += (*pipe_mlp())[size_t(i)].parameters().size();
      std::vector<Tensor> mine(ref.params.begin() + long(first), ref.params.begin() + long(first + got.params.size()));
      double param_diff = max_abs_diff(got.params, mine);
      if (rank() == 0 && chunks == 4)
        MESSAGE(schedule << ", 4 micro-batches, vs one process: losses within " << loss_diff << ", parameters within "
                         << param_diff);
      CHECK(loss_diff <= 1e-6);
      CHECK(param_diff <= 1e-6);
    }
  }
}

TEST_CASE("pipeline: plans are checked and named; the default balances parameters; a batch must split evenly") {
  auto model = pipe_mlp();
  std::vector<std::shared_ptr<nn::Module>> mods;
  for (const auto& [n, m] : model->named_children()) mods.push_back(m);
  // Parameters 2080, 0, 1056, 0, 330: no stage can hold less than 2080, and [2, 3] is the evenest plan that does.
  CHECK(dist::balance_by_parameters(mods, 2) == std::vector<int64_t>{2, 3});
  CHECK(fmt::format("{}", dist::balance_by_parameters(mods, 3)) == "[2, 2, 1]");
  check_error([&] { dist::balance_by_parameters(mods, 6); }, "pipeline: the model has 5 modules, fewer than the 6 stages");
  if (world() != 2) return;
  check_error([&] { dist::pipeline_stage(*model, {2, 2}); }, "pipeline: balance [2, 2] sums to 4 but the model has 5 modules");
  check_error([&] { dist::pipeline_stage(*model, {5, 0}); },
              "pipeline: balance [5, 0] gives stage 1 0 modules; every stage needs at least one");
  check_error([&] { dist::pipeline_stage(mods, {1, 1, 3}); },
              "pipeline: balance [1, 1, 3] has 3 stages but the process group has 2 ranks (one stage per rank)");
  check_error([&] { dist::pipeline_stage(*model, rank() == 0 ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{3, 2}); },
              "pipeline: rank 1's plan [3, 2] differs from rank 0's [2, 3]; every rank must cut the model the same way");
  dist::PipelineStage stage = dist::pipeline_stage(*model);
  CHECK(stage.balance() == std::vector<int64_t>{2, 3});
  CHECK(stage.module_offset() == (rank() == 0 ? 0 : 2));
  CHECK(stage.parameters().size() == (rank() == 0 ? 2u : 4u));
  dist::ScheduleGPipe gpipe(stage, 4, [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); });
  // Every rank is given the batch, so every rank raises (no rank is left waiting for a transfer).
  check_error([&] { gpipe.step(randn({30, 64}), randint(0, 10, {30})); },
              "pipeline: the input batch of 30 rows does not split into 4 equal micro-batches");
  check_error([&] { dist::ScheduleGPipe(stage, 0); }, "pipeline: n_microbatches must be positive, got 0");
  if (stage.is_last()) check_error([&] { dist::Schedule1F1B(stage, 2); }, "pipeline: the last stage (stage 1) needs a loss function");
  // The schedules' orders on this stage: 1F1B's warm-up is stages - stage - 1 forwards.
  auto str = [](const std::vector<dist::PipelineSchedule::Action>& o) {
    std::string s;
    for (auto a : o) s += fmt::format("{}{} ", a.forward ? 'F' : 'B', a.microbatch);
    return s;
  };
  CHECK(str(gpipe.order()) == "F0 F1 F2 F3 B0 B1 B2 B3 ");
  dist::Schedule1F1B one(stage, 4, [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); });
  CHECK(str(one.order()) == (rank() == 0 ? "F0 F1 B0 F2 B1 F3 B2 B3 " : "F0 B0 F1 B1 F2 B2 F3 B3 "));
  dist::barrier();
}

TEST_CASE("pipeline: with 8 micro-batches 1F1B's peak memory on a stage is well below GPipe's") {
  if (world() != 2) return;
  manual_seed(12);
  Data d{randn({1024, 64}), randint(0, 10, {1024})};  // activations large beside the 2 k parameters
  auto model = pipe_mlp();
  dist::PipelineStage stage = dist::pipeline_stage(*model, {2, 3});
  optim::SGD opt(stage.parameters(), {0.1});
  auto loss_fn = [](const Tensor& out, const Tensor& y) { return cross_entropy(out, y); };
  // The allocator's rise above what is live after zero_grad, over one step after a warm-up one.
  auto rise = [&](dist::PipelineSchedule& s) {
    for (int i = 0; i < 2; ++i) {
      opt.zero_grad();
      int64_t before = memory_stats().current_bytes;
      reset_peak_memory_stats();
      s.step(d.x, d.y);
      if (i == 1) return memory_stats().peak_bytes - before;
    }
    return int64_t(0);
  };
  dist::ScheduleGPipe gpipe(stage, 8, loss_fn);
  dist::Schedule1F1B one(stage, 8, loss_fn);
  int64_t g = rise(gpipe), o = rise(one);
  MESSAGE("stage " << rank() << ", 1024 rows in 8 micro-batches: peak rise gpipe " << g << " bytes, 1f1b " << o);
  // Stage 0 holds 2 micro-batches' activations under 1F1B instead of 8, the last stage 1 instead of 8.
  CHECK(o * 2 < g);
}
