// torch.save files: written by Debian's PyTorch in this run (one python3 invocation writes every fixture
// into a scratch directory) and loaded by kiln; written by kiln and checked by PyTorch's
// torch.load(weights_only=True); the refused files; the unpickler under mutation (whole archives are
// fuzzed with the other loaders in test_io.cpp); and optimizer checkpoints that resume training exactly. The PyTorch comparisons never skip (.ci/setup.sh installs
// python3-torch).
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "eager/losses.h"
#include "eager/nn/layers.h"
#include "eager/optim/optimizer.h"
#include "eager/torch_checkpoint.h"
#include "eager/torch_pickle.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_error;
using kiln::test::values;

namespace {

std::string tmp(const std::string& name) { return test::scratch_path("kiln_torch_ckpt_test", name); }

// Runs python3 on `script` with the scratch directory as argument; returns its output, failing the test
// when it exits non-zero.
std::string python(const std::string& name, const std::string& script) {
  test::write_bytes(tmp(name), script);
  std::string cmd = "/usr/bin/python3 " + tmp(name) + " " + std::filesystem::path(tmp("x")).parent_path().string() + " 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  int rc = pclose(p);
  REQUIRE_MESSAGE(rc == 0, "python3 " << name << " failed:\n" << out);
  return out;
}

const char* kFixtures = R"(
import collections, os, pickle, sys, zipfile
import torch
d = sys.argv[1]
base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
values = {
    "base": base, "row": base[1], "t": base.t(), "cols": base[:, 1::2],
    "f16": torch.tensor([0.5, -2.0, 65504.0], dtype=torch.float16),
    "bf16": torch.tensor([[1.5, -3.0], [1e30, 0.0]], dtype=torch.bfloat16),
    "f64": torch.tensor([1.0 / 3.0], dtype=torch.float64), "i64": torch.tensor([-(2**40), 7]),
    "i32": torch.tensor([3, -4], dtype=torch.int32), "bool": torch.tensor([True, False, True]),
    "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
    "nested": {"list": [1, 2.5, True, None, "s", (3, -300000)], "big": 2**40, "neg": -(2**40),
               "od": collections.OrderedDict([("y", 1), ("x", torch.ones(2))])},
}
torch.save(values, os.path.join(d, "values.pt"))

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 3))
net.train()
for _ in range(3):
    net(torch.randn(16, 4))
net.eval()
x = torch.randn(5, 4)
torch.save(net.state_dict(), os.path.join(d, "net.pt"))
torch.save({"model": net.state_dict(), "step": 3}, os.path.join(d, "net_ckpt.pt"))
torch.save({"x": x, "y": net(x).detach()}, os.path.join(d, "net_io.pt"))

torch.save(values, os.path.join(d, "legacy.pt"), _use_new_zipfile_serialization=False)
with zipfile.ZipFile(os.path.join(d, "values.pt")) as src, \
     zipfile.ZipFile(os.path.join(d, "compressed.pt"), "w", zipfile.ZIP_DEFLATED) as dst:
    for n in src.namelist():
        dst.writestr(n, src.read(n))

class System:
    def __reduce__(self):
        return (os.system, ("echo pwned",))
class Unknown:
    pass
for name, obj in (("evil_system.pt", System()), ("evil_class.pt", {"a": Unknown()})):
    with zipfile.ZipFile(os.path.join(d, name), "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle.dumps(obj, protocol=2))
        z.writestr("archive/version", "3\n")
print("fixtures written")
)";

// PyTorch 1.13's weights_only unpickler lacks the BINFLOAT opcode, so it refuses every pickled Python
// float, even in files torch.save wrote (fixed in 2.0): there files with floats load with the full
// unpickler; files without them, and every file on a later torch, with weights_only=True.
const char* kFloatsWeightsOnly = R"(
import io, os, sys, torch
_b = io.BytesIO()
torch.save(1.5, _b)
_b.seek(0)
try:
    FLOATS_WEIGHTS_ONLY = torch.load(_b, weights_only=True) == 1.5
except Exception:
    FLOATS_WEIGHTS_ONLY = False
    assert torch.__version__.startswith("1."), torch.__version__
)";

struct Fixtures {
  Fixtures() { python("fixtures.py", kFixtures); }
};
void need_fixtures() { static Fixtures f; }

std::vector<double> iota(int n, int from = 0) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

}  // namespace

TEST_CASE("torch checkpoint: a file torch.save wrote, every dtype, views sharing a storage, nested values") {
  need_fixtures();
  IValue v = torch_load(tmp("values.pt"));
  REQUIRE(v.is_dict());
  const Tensor& base = v.find("base")->to_tensor();
  CHECK(values(base) == iota(20));
  const Tensor& row = v.find("row")->to_tensor();
  const Tensor& t = v.find("t")->to_tensor();
  const Tensor& cols = v.find("cols")->to_tensor();
  // Views share the base's storage, with torch's offsets and strides.
  CHECK(row.storage() == base.storage());
  CHECK(t.storage() == base.storage());
  CHECK(cols.storage() == base.storage());
  CHECK(row.storage_offset() == 5);
  CHECK(values(row) == iota(5, 5));
  CHECK(t.strides() == Shape{1, 5});
  CHECK(!t.is_contiguous());
  CHECK(values(t) == values(base.t()));
  CHECK(cols.sizes() == Shape{4, 2});
  CHECK(values(cols) == std::vector<double>{1, 3, 6, 8, 11, 13, 16, 18});
  const Tensor& f16 = v.find("f16")->to_tensor();
  CHECK(f16.dtype() == DType::Float16);
  CHECK(values(f16) == std::vector<double>{0.5, -2.0, 65504.0});
  const Tensor& bf16 = v.find("bf16")->to_tensor();
  CHECK(bf16.dtype() == DType::BFloat16);
  CHECK(bf16.sizes() == Shape{2, 2});
  CHECK(values(bf16)[0] == 1.5);
  CHECK(values(bf16)[1] == -3.0);
  CHECK(values(bf16)[2] == double(float(BFloat16(1e30f))));
  CHECK(v.find("f64")->to_tensor().dtype() == DType::Float64);
  CHECK(v.find("f64")->to_tensor().item<double>() == 1.0 / 3.0);
  const Tensor& i64 = v.find("i64")->to_tensor();
  CHECK(i64.dtype() == DType::Int64);
  CHECK(i64.data_ptr<int64_t>()[0] == -(int64_t(1) << 40));
  CHECK(values(v.find("i32")->to_tensor()) == std::vector<double>{3, -4});
  CHECK(v.find("i32")->to_tensor().dtype() == DType::Int32);
  CHECK(v.find("bool")->to_tensor().dtype() == DType::Bool);
  CHECK(values(v.find("bool")->to_tensor()) == std::vector<double>{1, 0, 1});
  CHECK(v.find("scalar")->to_tensor().dim() == 0);
  CHECK(v.find("scalar")->to_tensor().item<double>() == 2.5);
  CHECK(v.find("empty")->to_tensor().sizes() == Shape{0, 3});
  const IValue& nested = *v.find("nested");
  CHECK(nested.find("list")->repr() == "[1, 2.5, True, None, 's', (3, -300000)]");
  CHECK(nested.find("big")->to_int() == int64_t(1) << 40);
  CHECK(nested.find("neg")->to_int() == -(int64_t(1) << 40));
  const IValue& od = *nested.find("od");
  REQUIRE(od.items().size() == 2);
  CHECK(od.items()[0].first.to_string() == "y");  // insertion order kept
  CHECK(values(od.find("x")->to_tensor()) == std::vector<double>{1, 1});
}

TEST_CASE("torch checkpoint: a torch state_dict loads into kiln's equivalent model and gives torch's forward") {
  need_fixtures();
  auto make = [] {
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::BatchNorm1d>(8), std::make_shared<nn::Linear>(8, 3)});
  };
  IValue io = torch_load(tmp("net_io.pt"));
  const Tensor& x = io.find("x")->to_tensor();
  const Tensor& y = io.find("y")->to_tensor();
  for (const char* file : {"net.pt", "net_ckpt.pt"}) {
    CAPTURE(file);
    auto net = make();
    net->load(tmp(file));
    net->eval();
    NoGradGuard ng;
    test::check_close((*net)(x), y, 1e-5, 1e-6);
    CHECK(net->state_dict().at("1.num_batches_tracked").item<int64_t>() == 3);
  }
}

TEST_CASE("torch checkpoint: refused files raise kiln::Error naming the file and the reason") {
  need_fixtures();
  check_error([] { torch_load(tmp("evil_system.pt")); }, "refused global 'posix.system'");
  check_error([] { torch_load(tmp("evil_system.pt")); }, tmp("evil_system.pt"));
  check_error([] { torch_load(tmp("evil_class.pt")); }, "refused global '__main__.Unknown'");
  check_error([] { torch_load(tmp("legacy.pt")); }, "legacy torch.save format");
  check_error([] { torch_load(tmp("legacy.pt")); }, tmp("legacy.pt"));
  check_error([] { torch_load(tmp("compressed.pt")); }, "is compressed (zip method 8)");
  std::string bytes = test::read_bytes(tmp("values.pt"));
  test::write_bytes(tmp("truncated.pt"), bytes.substr(0, bytes.size() / 2));
  check_error([] { torch_load(tmp("truncated.pt")); }, tmp("truncated.pt") + ": not a zip archive or truncated");
  check_error([] { torch_load(tmp("missing.pt")); }, tmp("missing.pt") + ": cannot open");
  auto net = std::make_shared<nn::Linear>(4, 8);
  check_error([&] { net->load(tmp("values.pt")); }, "neither a state_dict nor holds one");
}

TEST_CASE("torch checkpoint: kiln's torch_save is read by torch.load(weights_only=True)") {
  Tensor base = arange(0, 20, 1, DType::Float32).reshape({4, 5});
  IValue v = IValue::dict({
      {"base", base},
      {"row", base.select(0, 1)},
      {"t", base.t()},
      {"cols", base.slice(1, 1, std::nullopt, 2)},
      {"bf16", tensor(std::vector<double>{1.5, -3.0}, {2}, DType::BFloat16)},
      {"f16", tensor(std::vector<double>{0.5, 65504.0}, {2}, DType::Float16)},
      {"i64", tensor(std::vector<int64_t>{-(int64_t(1) << 40), 7})},
      {"bool", tensor(std::vector<double>{1, 0}, {2}, DType::Bool)},
      {"nested", IValue::dict({{"list", IValue::list({1, true, IValue(), "s", IValue::tuple({3, -300000})})},
                               {"big", int64_t(1) << 40},
                               {7, "int key"}})},
  });
  torch_save(tmp("kiln_values.pt"), v);
  torch_save(tmp("kiln_floats.pt"), IValue::dict({{"f", IValue::list({2.5, -0.1, 1e300})}}));
  // kiln reads its own file back the same way
  IValue back = torch_load(tmp("kiln_values.pt"));
  CHECK(back.find("row")->to_tensor().storage() == back.find("base")->to_tensor().storage());
  CHECK(values(back.find("t")->to_tensor()) == values(base.t()));
  CHECK(back.find("nested")->repr() == v.find("nested")->repr());
  python("check_values.py", std::string(kFloatsWeightsOnly) + R"(
v = torch.load(os.path.join(sys.argv[1], "kiln_values.pt"), weights_only=True)
base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
assert torch.equal(v["base"], base)
assert torch.equal(v["row"], base[1]) and v["row"].storage_offset() == 5
assert torch.equal(v["t"], base.t()) and v["t"].stride() == (1, 5)
assert torch.equal(v["cols"], base[:, 1::2])
v["base"][0, 0] = 100.0  # the views share one storage, as they did in kiln
assert v["t"][0, 0] == 100.0
assert v["bf16"].dtype == torch.bfloat16 and v["bf16"].tolist() == [1.5, -3.0]
assert v["f16"].dtype == torch.float16 and v["f16"].tolist() == [0.5, 65504.0]
assert v["i64"].tolist() == [-(2**40), 7] and v["bool"].tolist() == [True, False]
assert v["nested"] == {"list": [1, True, None, "s", (3, -300000)], "big": 2**40, 7: "int key"}, v["nested"]
f = torch.load(os.path.join(sys.argv[1], "kiln_floats.pt"), weights_only=FLOATS_WEIGHTS_ONLY)
assert f == {"f": [2.5, -0.1, 1e300]}, f
print("ok")
)");
}

TEST_CASE("torch checkpoint: the unpickler survives every truncation and bit flip of a pickle") {
  Tensor base = arange(0, 6, 1, DType::Float32);
  IValue v = IValue::dict({{"a", base.reshape({2, 3})},
                           {"b", base.slice(0, 1, 5, 2)},
                           {"n", IValue::list({1, 2.5, IValue::tuple({"x", IValue()}), int64_t(1) << 40})}});
  std::vector<std::pair<std::string, Tensor>> storages;
  std::string pkl = torch_pickle::pickle(v, storages, "fuzz");
  // torch_load checks a storage's size against its archive entry before allocating; so does this stand-in.
  auto load = [](const torch_pickle::StorageRef& r) {
    if (r.numel > 64) fail("fuzz.pkl: storage of {} elements", r.numel);
    return zeros({r.numel}, r.dtype);
  };
  CHECK(torch_pickle::unpickle(pkl, load, "fuzz.pkl").repr() == v.repr());
  int errors = 0;
  auto attempt = [&](const std::string& b) {
    try {
      torch_pickle::unpickle(b, load, "fuzz.pkl");
    } catch (const Error& e) {
      ++errors;
      CHECK_MESSAGE(std::string(e.what()).rfind("fuzz.pkl: ", 0) == 0, e.what());
    }
  };
  for (size_t n = 0; n < pkl.size(); ++n) attempt(pkl.substr(0, n));
  for (size_t i = 0; i < pkl.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string b = pkl;
      b[i] = char(b[i] ^ (1 << bit));
      attempt(b);
    }
  CHECK(errors > int(pkl.size()));
}

// ---------------------------------------------------------------------------------------------------
// Optimizer checkpoints

namespace {

std::shared_ptr<nn::Sequential> small_net(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::LayerNorm>(Shape{8}), std::make_shared<nn::Linear>(8, 3)});
}

// nanoGPT's configure_optimizers: weight decay for matrices, none for biases and norms.
std::vector<optim::ParamGroup> decay_groups(const nn::Module& net) {
  optim::ParamGroup decay{{}, {}, 0.1}, no_decay{{}, {}, 0.0};
  for (auto& [name, p] : net.named_parameters()) (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  return {decay, no_decay};
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind, const nn::Module& net) {
  if (kind == "adamw") return std::make_unique<optim::AdamW>(decay_groups(net), optim::AdamOptions{1e-2, 0.9, 0.95, 1e-8, 0.1});
  if (kind == "adam") return std::make_unique<optim::Adam>(net.parameters(), optim::AdamOptions{1e-2});
  return std::make_unique<optim::SGD>(decay_groups(net), optim::SGDOptions{0.05, 0.9, 0, 0.01, true});
}

struct Batch {
  Tensor x, t;
};
std::vector<Batch> batches(int n) {
  manual_seed(123);
  std::vector<Batch> out;
  for (int i = 0; i < n; ++i) out.push_back({randn({16, 4}), randn({16, 3})});
  return out;
}

double train_step(nn::Module& net, optim::Optimizer& opt, const Batch& b) {
  opt.zero_grad();
  Tensor loss = mse_loss(net(b.x), b.t);
  loss.backward();
  opt.step();
  return loss.item<double>();
}

}  // namespace

TEST_CASE("torch checkpoint: {model, optimizer, step} saved mid-training resumes with the same losses") {
  RestoreRngState keep;
  std::vector<Batch> data = batches(10);
  for (std::string kind : {"adamw", "adam", "sgd"}) {
    CAPTURE(kind);
    auto net = small_net(1);
    auto opt = make_optimizer(kind, *net);
    std::vector<double> straight;
    for (auto& b : data) straight.push_back(train_step(*net, *opt, b));

    net = small_net(1);
    opt = make_optimizer(kind, *net);
    std::vector<double> resumed;
    for (int i = 0; i < 5; ++i) resumed.push_back(train_step(*net, *opt, data[size_t(i)]));
    torch_save(tmp("resume.pt"), IValue::dict({{"model", to_ivalue(net->state_dict())},
                                               {"optimizer", opt->state_dict()},
                                               {"step", 5}}));
    // A fresh process would start from other weights and an empty optimizer.
    net = small_net(2);
    opt = make_optimizer(kind, *net);
    IValue ckpt = torch_load(tmp("resume.pt"));
    net->load(tmp("resume.pt"));
    opt->load_state_dict(*ckpt.find("optimizer"));
    for (int64_t i = ckpt.find("step")->to_int(); i < 10; ++i) resumed.push_back(train_step(*net, *opt, data[size_t(i)]));
    CHECK(resumed == straight);
  }
}

TEST_CASE("torch checkpoint: optimizer state_dict layout and parameter groups") {
  auto net = small_net(1);
  optim::AdamW opt(decay_groups(*net), {1e-2, 0.9, 0.95, 1e-8, 0.1});
  REQUIRE(opt.param_groups().size() == 2);
  CHECK(opt.param_groups()[0].weight_decay == 0.1);
  CHECK(opt.param_groups()[1].weight_decay == 0.0);
  CHECK(opt.param_groups()[0].end - opt.param_groups()[0].begin == 2);
  IValue s = opt.state_dict();
  CHECK(s.find("state")->items().empty());
  std::vector<Batch> data = batches(1);
  train_step(*net, opt, data[0]);
  s = opt.state_dict();
  const IValue& st = *s.find("state");
  REQUIRE(st.items().size() == 6);
  CHECK(st.items()[0].first.to_int() == 0);
  CHECK(st.items()[0].second.find("step")->to_tensor().item<double>() == 1.0);
  CHECK(st.items()[0].second.find("exp_avg")->to_tensor().sizes() == Shape{8, 4});
  const IValue& g1 = s.find("param_groups")->elements()[1];
  CHECK(g1.find("params")->repr() == "[2, 3, 4, 5]");
  CHECK(g1.find("betas")->repr() == "(0.9, 0.95)");
  CHECK(g1.find("weight_decay")->to_double() == 0.0);
  optim::AdamW one(net->parameters());
  check_error([&] { one.load_state_dict(s); }, "AdamW.load_state_dict: the state has 2 parameter groups, this optimizer 1");
  optim::StepLR sched(opt, 1, 0.5);
  sched.step();
  CHECK(opt.param_groups()[0].lr == 5e-3);
  CHECK(opt.param_groups()[1].lr == 5e-3);
}

TEST_CASE("torch checkpoint: PyTorch resumes kiln's {model, optimizer, step} and takes the step kiln takes") {
  RestoreRngState keep;
  std::vector<Batch> data = batches(6);
  auto net = small_net(1);
  auto opt = make_optimizer("adamw", *net);
  for (int i = 0; i < 5; ++i) train_step(*net, *opt, data[size_t(i)]);
  torch_save(tmp("kiln_ckpt.pt"), IValue::dict({{"model", to_ivalue(net->state_dict())},
                                                {"optimizer", opt->state_dict()},
                                                {"step", 5}}));
  train_step(*net, *opt, data[5]);
  torch_save(tmp("kiln_after.pt"), IValue::dict({{"model", to_ivalue(net->state_dict())},
                                                 {"x", data[5].x},
                                                 {"t", data[5].t}}));
  std::string out = python("resume_in_torch.py", std::string(kFloatsWeightsOnly) + R"(
d = sys.argv[1]
ckpt = torch.load(os.path.join(d, "kiln_ckpt.pt"), weights_only=FLOATS_WEIGHTS_ONLY)
after = torch.load(os.path.join(d, "kiln_after.pt"), weights_only=True)
net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 3))
net.load_state_dict(ckpt["model"])
decay = [p for p in net.parameters() if p.dim() >= 2]
no_decay = [p for p in net.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=1e-2, betas=(0.9, 0.95))
opt.load_state_dict(ckpt["optimizer"])
assert ckpt["step"] == 5
opt.zero_grad()
torch.nn.functional.mse_loss(net(after["x"]), after["t"]).backward()
opt.step()
for name, p in net.state_dict().items():
    assert torch.allclose(p, after["model"][name], rtol=1e-5, atol=1e-6), (name, p, after["model"][name])
print("torch step equals kiln's")
)");
  CHECK(out.find("torch step equals kiln's") != std::string::npos);
}
