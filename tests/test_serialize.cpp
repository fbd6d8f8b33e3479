// kiln::save / kiln::load and `kiln run MODEL.kiln`: functions of every origin (traced module, script
// with control flow, compiled, in-place writes, guards) come back equal, in this process and in a fresh
// one; every broken file raises kiln::Error naming the file; a fuzzer mutates a valid file thousands of
// times and every load either succeeds or raises kiln::Error.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "core/crc32.h"
#include "ir_samples.h"
#include "jit/kiln_file.h"
#include "support.h"

using namespace kiln;
using kiln::test::check_close;
using kiln::test::check_error;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& name) { return test::scratch_path("kiln_serialize_test", name); }


// The sections of a .kiln image, and an image made of sections with a correct header (or a given version).
struct Sections {
  std::string text, tensors;
};
Sections split(const std::string& bytes) {
  uint64_t g = 0;
  std::memcpy(&g, bytes.data() + 8, 8);
  return {bytes.substr(32, g), bytes.substr(32 + g)};
}
std::string image(const Sections& s, uint32_t version = jit::kKilnFormatVersion) {
  std::string h(32, '\0');
  uint64_t g = s.text.size(), t = s.tensors.size();
  uint32_t crc = crc32(crc32(0, s.text.data(), g), s.tensors.data(), t);
  std::memcpy(h.data(), "KILN", 4);
  std::memcpy(h.data() + 4, &version, 4);
  std::memcpy(h.data() + 8, &g, 8);
  std::memcpy(h.data() + 16, &t, 8);
  std::memcpy(h.data() + 24, &crc, 4);
  return h + s.text + s.tensors;
}

// A traced MLP whose graph also holds a tensor constant too large for the text form (8x64 elements).
Function mlp_with_constant() {
  auto m = test::digits_mlp();
  manual_seed(3);
  Tensor shift = randn({8, 64});
  TraceOptions o;
  o.input_names = {"x"};
  return trace_module(*m, [m, shift](const Tensors& in) { return Tensors{m->forward(in[0] + shift)}; },
                      {randn({8, 64})}, o);
}

constexpr const char* kLoopScript = R"(
import torch

def f(x: torch.Tensor, n: int) -> torch.Tensor:
    y = x
    for i in range(n):
        if i % 2 == 0:
            y = torch.relu(y) + 0.5
        else:
            y = y * 2.0
    return y.sum(dim=1)
)";

bool small(const Shape& s) {
  double n = 1;
  for (int64_t d : s) n *= double(d);
  return n <= 65536;
}

int run_command(const std::string& cmd) {
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("serialize: a traced module with parameters and a large constant loads with the same outputs") {
  Function f = mlp_with_constant();
  std::string path = tmp("mlp.kiln");
  save(f, path);
  Function g = load(path);
  CHECK(g.name() == f.name());
  REQUIRE(g.binding().bound.size() == f.binding().bound.size());
  for (size_t i = 0; i < f.binding().bound.size(); ++i) {
    test::check_bit_identical(g.binding().bound[i], f.binding().bound[i]);
    CHECK(g.binding().bound[i].requires_grad());
  }
  for (int k = 0; k < 3; ++k) {
    Tensor x = randn({8, 64});
    test::check_bit_identical(g({x})[0], f({x})[0]);
  }
  // The file round trip is a fixed point: a loaded function saves to the same bytes.
  std::string again = tmp("mlp_again.kiln");
  save(g, again);
  CHECK(test::read_bytes(again) == test::read_bytes(path));
}

TEST_CASE("serialize: loaded parameters train like the original's") {
  Function f = mlp_with_constant();
  save(f, tmp("train.kiln"));
  Function g = load(tmp("train.kiln"));
  Tensor x = randn({8, 64});
  Tensor y = randint(0, 10, {8});
  cross_entropy(f({x})[0], y).backward();
  cross_entropy(g({x})[0], y).backward();
  for (size_t i = 0; i < f.binding().bound.size(); ++i) {
    REQUIRE(g.binding().bound[i].grad().defined());
    test::check_bit_identical(g.binding().bound[i].grad(), f.binding().bound[i].grad());
  }
}

TEST_CASE("serialize: a scripted function with loops and branches, and a compiled one") {
  Function f = script_source(kLoopScript, "loop.py").function("f");
  save(f, tmp("loop.kiln"));
  Function g = load(tmp("loop.kiln"));
  Tensor x = randn({3, 4});
  for (int64_t n : {0, 1, 4}) {
    std::vector<IValue> a = f.call({x, n}), b = g.call({x, n});
    REQUIRE(b.size() == 1);
    test::check_bit_identical(b[0].to_tensor(), a[0].to_tensor());
  }

  // A compiled function saves its graph; the loaded one runs, and compiles again.
  Function c = compile(test::traced_sample("mlp"));
  Tensor in = randn({4, 64});
  Tensor want = c({in})[0];
  save(c, tmp("compiled.kiln"));
  Function l = load(tmp("compiled.kiln"));
  check_close(l({in})[0], want, 1e-5, 1e-6);
  Function lc = compile(l);
  check_close(lc({in})[0], want, 1e-5, 1e-6);
  CHECK(compile_stats(lc).misses == 1);
}

TEST_CASE("serialize: write-backs, exact shapes and guards are kept") {
  Function w = test::traced_sample("inplace");
  save(w, tmp("inplace.kiln"));
  Function lw = load(tmp("inplace.kiln"));
  Tensor x = tensor({1.0, 2.0, 3.0});
  check_close(lw({x})[0], tensor({3.0, 5.0, 7.0}));
  check_close(x, tensor({3.0, 6.0, 9.0}));

  auto flat = [](const Tensors& in) { return Tensors{in[0].reshape({in[0].size(0), -1}) * 2.0}; };
  Function e = trace(flat, {randn({2, 3, 4})});
  save(e, tmp("exact.kiln"));
  Function le = load(tmp("exact.kiln"));
  CHECK(le.binding().exact_shapes);
  CHECK(le.binding().exact_shapes_reason == e.binding().exact_shapes_reason);
  check_error([&] { le({randn({5, 3, 4})}); }, "the trace read the sizes of input 0");

  TraceOptions o;
  o.guard_value_reads = true;
  Function gd = trace(
      [](const Tensors& in) {
        Tensor s = in[0].sum();
        return Tensors{s.item<double>() > 0 ? relu(in[0]) : neg(in[0])};
      },
      {tensor({1.0, 2.0})}, o);
  REQUIRE(gd.binding().guards.size() == 1);
  save(gd, tmp("guard.kiln"));
  Function lg = load(tmp("guard.kiln"));
  REQUIRE(lg.binding().guards.size() == 1);
  CHECK(lg.binding().guards[0].what == gd.binding().guards[0].what);
  check_close(lg({tensor({1.0, 2.0})})[0], tensor({1.0, 2.0}));
  CHECK_THROWS_AS(lg({tensor({-1.0, -2.0})}), GuardFailure);
}

TEST_CASE("serialize: value names the text form cannot spell are respelled") {
  TraceOptions o;
  o.input_names = {"my input", "b-2"};
  Function f = trace([](const Tensors& in) { return Tensors{in[0] * in[1]}; }, {randn({3}), randn({3})}, o);
  save(f, tmp("names.kiln"));
  Function g = load(tmp("names.kiln"));
  CHECK(g.graph().inputs()[0]->name() == "my_input");
  CHECK(g.graph().inputs()[1]->name() == "b_2");
  Tensor a = randn({3}), b = randn({3});
  test::check_bit_identical(g({a, b})[0], f({a, b})[0]);
}

TEST_CASE("serialize: a fresh process running kiln run gives the same outputs") {
  Function f = mlp_with_constant();
  std::string model = tmp("fresh.kiln"), in = tmp("fresh_x.npy"), out = tmp("fresh_y.npy"), err = tmp("fresh.err");
  save(f, model);
  Tensor x = randn({8, 64});
  save_npy(in, x);
  std::string cmd = fmt::format("'{}' run '{}' '{}' -o '{}' 2>'{}'", KILN_EXE, model, in, out, err);
  REQUIRE_MESSAGE(run_command(cmd) == 0, test::read_bytes(err));
  test::check_bit_identical(load_npy(out), f({x})[0]);

  // The JIT backend in the other process agrees to float tolerance.
  std::string out_x86 = tmp("fresh_y86.npy");
  if (run_command(fmt::format("'{}' run '{}' '{}' -o '{}' --backend x86 2>'{}'", KILN_EXE, model, in, out_x86, err)) == 0)
    check_close(load_npy(out_x86), f({x})[0], 1e-5, 1e-6);

  // --randn inputs, printed outputs
  std::string printed = tmp("fresh.out");
  REQUIRE(run_command(fmt::format("'{}' run '{}' --randn 8x64 >'{}' 2>'{}'", KILN_EXE, model, printed, err)) == 0);
  CHECK(test::read_bytes(printed).rfind("tensor(", 0) == 0);

  // A scripted function with an int argument
  Function s = script_source(kLoopScript, "loop.py").function("f");
  std::string loop = tmp("fresh_loop.kiln");
  save(s, loop);
  Tensor lx = randn({3, 4});
  save_npy(in, lx);
  REQUIRE(run_command(fmt::format("'{}' run '{}' '{}' 3 -o '{}' 2>'{}'", KILN_EXE, loop, in, out, err)) == 0);
  test::check_bit_identical(load_npy(out), s.call({lx, int64_t(3)})[0].to_tensor());

  // A broken file: exit status 1 and the error names the file.
  std::string bytes = test::read_bytes(model);
  bytes[bytes.size() / 2] ^= 0x10;
  test::write_bytes(model, bytes);
  CHECK(run_command(fmt::format("'{}' run '{}' '{}' 2>'{}'", KILN_EXE, model, in, err)) == 1);
  CHECK(test::read_bytes(err).find("load: " + model + ": checksum mismatch") != std::string::npos);
}

TEST_CASE("serialize: broken files raise kiln::Error naming the file and the problem") {
  Function f = mlp_with_constant();
  std::string good = tmp("good.kiln");
  save(f, good);
  const std::string bytes = test::read_bytes(good);
  std::string bad = tmp("bad.kiln");
  auto with = [&](const std::string& b) {
    test::write_bytes(bad, b);
    return [&] { load(bad); };
  };

  check_error([&] { load(tmp("missing.kiln")); }, "load: " + tmp("missing.kiln") + ": cannot open");
  check_error(with(""), "load: " + bad + ": file is empty");
  check_error(with("PK\x03\x04" + bytes.substr(4)), "load: " + bad + ": not a kiln file: it starts with 50 4b 03 04");
  check_error(with(bytes.substr(0, 20)), "file is truncated: 20 bytes, shorter than the 32-byte header");
  check_error(with(bytes.substr(0, bytes.size() - 1)), "file is truncated: the header says");
  check_error(with(bytes + "x"), "1 unexpected bytes after the");
  check_error(with(image(split(bytes), 3)), "load: " + bad + ": format version 3 is newer than this kiln reads (1)");
  check_error(with(image(split(bytes), 0)), "format version 0 is not a kiln format version");
  std::string flipped = bytes;
  flipped[bytes.size() - 5] ^= 1;  // a weight's low bit
  check_error(with(flipped), "checksum mismatch");

  Sections s = split(bytes);
  Sections unknown = s;
  size_t relu = unknown.text.find("relu(");
  REQUIRE(relu != std::string::npos);
  unknown.text.replace(relu, 4, "frob");
  check_error(with(image(unknown)), bad + ":");
  check_error(with(image(unknown)), "error: unknown op 'frob'");

  // The tensor section, rebuilt without one constant, with a wrong shape, with an extra tensor.
  SafetensorsContents st = load_safetensors_section(good, 32 + s.text.size(), s.tensors.size(), "test", "t");
  size_t at = s.text.find("prim::Constant[tensor=\"");
  REQUIRE(at != std::string::npos);
  size_t key_start = at + std::strlen("prim::Constant[tensor=\"");
  std::string key = s.text.substr(key_start, s.text.find('"', key_start) - key_start);
  REQUIRE(st.tensors.count(key));
  auto rebuilt = [&](std::map<std::string, Tensor> t) { return image({s.text, safetensors_bytes(t, st.metadata)}); };
  {
    auto t = st.tensors;
    t.erase(key);
    check_error(with(rebuilt(t)), fmt::format("load: {}: constant %{} (line", bad, key));
    check_error(with(rebuilt(t)), fmt::format("refers to tensor \"{}\", which the tensor section lacks", key));
  }
  {
    auto t = st.tensors;
    t[key] = zeros({8, 63});
    check_error(with(rebuilt(t)), "has type f32[8,64] but its tensor in the file is f32[8,63]");
    t[key] = zeros({8, 64}, DType::Float64);
    check_error(with(rebuilt(t)), "has type f32[8,64] but its tensor in the file is f64[8,64]");
  }
  {
    auto t = st.tensors;
    t["extra"] = zeros({2});
    check_error(with(rebuilt(t)), "the tensor section holds \"extra\", which nothing in the graph uses");
  }
  {
    auto t = st.tensors;
    t.erase("0.weight");
    check_error(with(rebuilt(t)), "bound input %0.weight refers to tensor \"0.weight\", which the tensor section lacks");
    t = st.tensors;
    t["0.weight"] = zeros({3, 3});
    check_error(with(rebuilt(t)), "bound input %0.weight has type f32[32,64] but its tensor in the file is f32[3,3]");
  }
  {
    auto meta = st.metadata;
    meta["bound"] = "99";
    check_error(with(image({s.text, safetensors_bytes(st.tensors, meta)})), "metadata \"bound\" is 99, more than");
    meta = st.metadata;
    meta.erase("name");
    check_error(with(image({s.text, safetensors_bytes(st.tensors, meta)})), "metadata lacks \"name\"");
    meta = st.metadata;
    meta["colour"] = "blue";
    check_error(with(image({s.text, safetensors_bytes(st.tensors, meta)})), "unknown metadata \"colour\"");
  }
  // Graphs that do not parse, or parse but break an invariant.
  Sections broken = s;
  size_t ret = broken.text.rfind("return (");
  broken.text.replace(ret, std::string::npos, "return (%nope)\n");
  check_error(with(image(broken)), "use of undefined value %nope");
  broken = s;
  broken.text.replace(broken.text.find("relu("), 5, "relu(%x, ");
  check_error(with(image(broken)), "load: " + bad + ": the graph is invalid: ");

  check_error([&] { save(Function(), tmp("undefined.kiln")); }, "save: " + tmp("undefined.kiln") + ": the function is undefined");
  check_error([&] { save(f, tmp("no_such_dir") + "/m.kiln"); }, "save: " + tmp("no_such_dir") + "/m.kiln: cannot open");
}

TEST_CASE("serialize fuzz: mutated files load or raise kiln::Error, never crash") {
  // Two valid files: a traced module (constants, parameters) and a script with nested blocks.
  std::vector<std::string> seeds;
  save(mlp_with_constant(), tmp("seed0.kiln"));
  save(script_source(kLoopScript, "loop.py").function("f"), tmp("seed1.kiln"));
  for (const char* s : {"seed0.kiln", "seed1.kiln"}) seeds.push_back(test::read_bytes(tmp(s)));

  std::mt19937_64 rng(20240515);
  auto below = [&](size_t n) { return n ? size_t(rng() % n) : 0; };
  // One of: bit flips, random bytes, a truncation, a cut-out range, a duplicated range, a random u64
  // over one of the header's length fields.
  auto mutate = [&](std::string b) {
    if (b.empty()) return b;
    switch (below(6)) {
      case 0:
        for (size_t k = 0, n = 1 + below(4); k < n; ++k) b[below(b.size())] ^= char(1 << below(8));
        break;
      case 1:
        for (size_t k = 0, n = 1 + below(8); k < n; ++k) b[below(b.size())] = char(rng());
        break;
      case 2: b.resize(below(b.size())); break;
      case 3: {
        size_t at = below(b.size());
        b.erase(at, 1 + below(64));
        break;
      }
      case 4: {
        size_t at = below(b.size());
        b.insert(at, b.substr(at, 1 + below(64)));
        break;
      }
      default: {
        uint64_t v = rng() >> below(64);
        if (b.size() >= 24) std::memcpy(b.data() + (below(2) ? 8 : 16), &v, 8);
        break;
      }
    }
    return b;
  };
  // The same mutations inside one section, under a correct header: what reaches the IR parser, the
  // safetensors reader and the binding checks.
  auto mutate_section = [&](const std::string& b) {
    Sections s = split(b);
    std::string& part = below(2) ? s.text : s.tensors;
    std::string m = mutate(part);
    part = m;
    return image(s);
  };

  int loaded = 0, raised = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const std::string& seed = seeds[below(seeds.size())];
    bool whole = iter % 2 == 0;
    std::string b = whole ? mutate(seed) : mutate_section(seed);
    if (b == seed) continue;
    // A new file each time: ext4 flushes a file rewritten in place on close, which made this I/O bound.
    std::string path = tmp(fmt::format("fuzz{}.kiln", iter));
    test::write_bytes(path, b);
    struct Remove {
      std::string path;
      ~Remove() { std::remove(path.c_str()); }
    } remove_after{path};
    try {
      Function f = load(path);
      ++loaded;
      // What loads also runs, or raises kiln::Error (inputs of the sizes the mutated graph declares,
      // when they are small).
      std::vector<IValue> ins;
      for (const ir::Type& t : f.input_types()) {
        if (t.kind == ir::TypeKind::Int) ins.emplace_back(int64_t(3));
        else if (t.is_tensor() && t.dtype && t.has_static_shape() && small(t.static_shape()))
          ins.emplace_back(randn(t.static_shape()).to(*t.dtype));
      }
      if (ins.size() == f.input_types().size()) {
        try {
          f.call(ins);
        } catch (const Error&) {
        }
      }
      // A mutation of the raw file must never load: the checksum and the sizes see every one.
      CHECK_MESSAGE(!whole, "iteration " << iter << ": a corrupt file loaded");
    } catch (const Error&) {
      ++(whole ? rejected : raised);
    }
  }
  MESSAGE("fuzz: " << rejected << " corrupt files rejected; of the section mutations, " << loaded << " loaded and "
                   << raised << " raised kiln::Error");
  CHECK(rejected > 1000);
  CHECK(raised > 0);
}
