// kiln::Profiler: FLOPs per op against the formulas, counts per op and per module, memory by category
// summing to the allocator's peak on a digits training step, and the Chrome trace as valid JSON.
#include "support.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <variant>

#include "eager/profiler/flops.h"
#include "op_cases.h"
#include "samples/digits_models.h"

using namespace kiln;

namespace {

// A small JSON reader, strict enough to reject what chrome://tracing would.
struct Json {
  std::variant<std::nullptr_t, bool, double, std::string, std::vector<Json>, std::map<std::string, Json>> v;
  const Json& operator[](const std::string& k) const { return std::get<std::map<std::string, Json>>(v).at(k); }
  bool has(const std::string& k) const {
    auto* o = std::get_if<std::map<std::string, Json>>(&v);
    return o && o->count(k);
  }
  const std::vector<Json>& array() const { return std::get<std::vector<Json>>(v); }
  const std::string& str() const { return std::get<std::string>(v); }
  double num() const { return std::get<double>(v); }
};

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}
  Json document() {
    Json j = value();
    ws();
    if (i_ != s_.size()) fail("json: trailing text at {}", i_);
    return j;
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  char peek() {
    ws();
    if (i_ >= s_.size()) fail("json: unexpected end");
    return s_[i_];
  }
  void expect(char c) {
    if (peek() != c) fail("json: expected '{}' at {}, got '{}'", c, i_, s_[i_]);
    ++i_;
  }
  bool literal(const char* w) {
    size_t n = std::char_traits<char>::length(w);
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("json: unterminated string");
      char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("json: control character in string at {}", i_);
      if (c != '\\') { out += c; continue; }
      char e = s_[i_++];
      if (e == 'u') { i_ += 4; out += '?'; }
      else if (std::string("\"\\/bfnrt").find(e) != std::string::npos) out += e;
      else fail("json: bad escape at {}", i_);
    }
  }
  Json value() {
    char c = peek();
    if (c == '{') {
      ++i_;
      std::map<std::string, Json> o;
      if (peek() == '}') { ++i_; return {o}; }
      while (true) {
        std::string k = string();
        expect(':');
        o[k] = value();
        if (peek() == ',') { ++i_; continue; }
        expect('}');
        return {o};
      }
    }
    if (c == '[') {
      ++i_;
      std::vector<Json> a;
      if (peek() == ']') { ++i_; return {a}; }
      while (true) {
        a.push_back(value());
        if (peek() == ',') { ++i_; continue; }
        expect(']');
        return {a};
      }
    }
    if (c == '"') return {string()};
    if (literal("true")) return {true};
    if (literal("false")) return {false};
    if (literal("null")) return {nullptr};
    if (c != '-' && (c < '0' || c > '9')) fail("json: unexpected '{}' at {}", c, i_);
    size_t used = 0;
    double d = std::stod(s_.substr(i_, 40), &used);
    i_ += used;
    return {d};
  }
  const std::string& s_;
  size_t i_ = 0;
};

int64_t op_flops_of(const Profiler& p, std::string_view name) {
  for (const OpProfile& r : p.ops())
    if (r.name == name) return r.flops;
  return -1;
}
int64_t op_count_of(const Profiler& p, std::string_view name) {
  for (const OpProfile& r : p.ops())
    if (r.name == name) return r.count;
  return 0;
}
const ScopeProfile* scope_of(const std::vector<ScopeProfile>& all, const std::string& path) {
  for (const ScopeProfile& s : all)
    if (s.path == path) return &s;
  return nullptr;
}

// Bytes the allocator charges for a tensor of this many bytes (its size class).
int64_t charged(const Tensor& t) {
  MemoryStats before = memory_stats();
  Tensor c = empty(t.sizes(), t.dtype());
  return memory_stats().current_bytes - before.current_bytes;
}

int64_t sum_of(const std::array<int64_t, kNumMemoryCategories>& a) {
  int64_t n = 0;
  for (int64_t x : a) n += x;
  return n;
}

int64_t at(const std::array<int64_t, kNumMemoryCategories>& a, MemoryCategory c) { return a[size_t(c)]; }

}  // namespace

TEST_CASE("profiler: matmul, batched matmul, conv2d with groups and elementwise ops count the documented flops") {
  Tensor a = randn({3, 5, 7}), b = randn({7, 4});
  Tensor x = randn({2, 6, 9, 9}), w = randn({4, 3, 3, 3});  // groups = 2: each output sees 3 input channels
  Profiler p;
  Tensor y = matmul(a, b);                                              // batch 3: 2*3*5*4*7
  Tensor v = matmul(randn({7}), randn({7}));                           // dot: 2*7
  Tensor c = conv2d(x, w, Tensor(), {2, 2}, {1, 1}, {1, 1}, 2);        // out [2,4,5,5]
  Tensor e = exp(y) + y;                                                // 60 + 60
  Tensor s = y.sum();                                                   // 60
  Tensor r = y.reshape({15, 4}).t();                                    // views: 0
  p.stop();
  CHECK(c.sizes() == Shape{2, 4, 5, 5});
  CHECK(op_flops_of(p, "matmul") == 2 * 3 * 5 * 4 * 7 + 2 * 7);
  CHECK(op_count_of(p, "matmul") == 2);
  CHECK(op_flops_of(p, "conv2d") == 2 * 2 * 4 * 5 * 5 * 3 * 3 * 3);
  // the same from the inputs alone, before the conv runs (the interpreter's estimate): stride 2 counted
  Attrs conv = Attrs().set("stride", Shape{2, 2}).set("padding", Shape{1, 1}).set("dilation", Shape{1, 1}).set("groups", int64_t(2));
  CHECK(gemm_flops_before_run(OpId::Conv2d, {x, w}, conv) == 2 * 2 * 4 * 5 * 5 * 3 * 3 * 3);
  CHECK(gemm_flops_before_run(OpId::Exp, {x}, {}) == -1);
  CHECK(op_flops_of(p, "exp") == 60);
  CHECK(op_flops_of(p, "add") == 60);
  CHECK(op_flops_of(p, "sum") == 60);
  CHECK(op_flops_of(p, "reshape") == 0);
  CHECK(op_flops_of(p, "permute") == 0);
  CHECK(p.total_flops() == 2 * 3 * 5 * 4 * 7 + 2 * 7 + 2 * 2 * 4 * 5 * 5 * 27 + 180);
}

TEST_CASE("profiler: every row of the op table runs under the profiler with its kind's flops") {
  for (int i = 0; i < kNumOps; ++i) {
    OpId op = OpId(i);
    test::OpCase oc = test::case_for(op, 1);
    Profiler p;
    Tensors out = dispatch(op, oc.inputs, oc.attrs);
    p.stop();
    std::string name(op_name(op));
    CAPTURE(name);
    std::vector<OpProfile> rows = p.ops();
    REQUIRE(rows.size() == 1);
    const OpProfile& r = rows[0];
    CHECK(r.name == name);
    CHECK(r.count == 1);
    CHECK(r.flops == op_flops(op, oc.inputs, oc.attrs, out));
    // the interpreter's estimate before an op runs is the same formula, for the ops it has one for
    int64_t before = gemm_flops_before_run(op, oc.inputs, oc.attrs);
    if (before >= 0) CHECK(before == r.flops);
    switch (op_info(op).kind) {
      case OpKind::Unary:
      case OpKind::Binary: CHECK(r.flops == out[0].numel()); break;
      case OpKind::Reduce: CHECK(r.flops == oc.inputs[0].numel()); break;
      case OpKind::View: CHECK(r.flops == 0); break;
      case OpKind::Other: CHECK(r.flops >= 0); break;
    }
  }
}

TEST_CASE("profiler: per-module scopes on the digits MLP and CNN, forward and backward") {
  manual_seed(0);
  auto mlp = samples::digits_mlp();
  Tensor x = randn({32, 64});
  Tensor labels = randint(0, 10, {32});
  Profiler p;
  Tensor loss = cross_entropy((*mlp)(x), labels);
  int64_t forward_matmul = op_flops_of(p, "matmul");
  loss.backward();
  p.stop();
  CHECK(forward_matmul == 2 * 32 * 64 * 128 + 2 * 32 * 128 * 10);
  // Backward: for each layer the input's and the weight's gradient, each as large as the forward
  // product, except no input gradient for the first layer (x does not require grad).
  CHECK(op_flops_of(p, "matmul") == forward_matmul + 2 * 32 * 64 * 128 + 2 * (2 * 32 * 128 * 10));
  std::vector<ScopeProfile> sc = p.scopes();
  const ScopeProfile* seq = scope_of(sc, "Sequential");
  const ScopeProfile* l0 = scope_of(sc, "Sequential.0 (Linear)");
  const ScopeProfile* relu = scope_of(sc, "Sequential.1 (ReLU)");
  const ScopeProfile* l2 = scope_of(sc, "Sequential.2 (Linear)");
  const ScopeProfile* bw = scope_of(sc, "backward");
  REQUIRE(seq);
  REQUIRE(l0);
  REQUIRE(relu);
  REQUIRE(l2);
  REQUIRE(bw);
  CHECK(seq->count == 1);
  CHECK(l0->flops == 2 * 32 * 64 * 128 + 32 * 128);  // the matmul and the bias add
  CHECK(relu->flops == 32 * 128);
  CHECK(seq->flops == l0->flops + relu->flops + l2->flops);
  CHECK(bw->flops > forward_matmul);
  for (const ProfileEvent& e : p.events())
    if (!e.is_scope && e.name == "relu") CHECK(e.scope == "Sequential.1 (ReLU)");

  auto cnn = samples::digits_cnn();
  Tensor img = randn({8, 1, 8, 8});
  Profiler q;
  Tensor out = (*cnn)(img);
  q.stop();
  // conv 1->16 on 8x8 (padding 1), pool to 4x4, conv 16->32, pool to 2x2, linear 128->10
  CHECK(op_flops_of(q, "conv2d") == 2 * 8 * 16 * 8 * 8 * 1 * 9 + 2 * 8 * 32 * 4 * 4 * 16 * 9);
  CHECK(op_flops_of(q, "matmul") == 2 * 8 * 128 * 10);
  std::vector<ScopeProfile> qs = q.scopes();
  const ScopeProfile* conv = scope_of(qs, "Sequential.3 (Conv2d)");
  REQUIRE(conv);
  CHECK(conv->flops == 2 * 8 * 32 * 4 * 4 * 16 * 9);
}

TEST_CASE("profiler: memory categories sum to the allocator peak on a digits MLP training step") {
  manual_seed(1);
  auto mlp = samples::digits_mlp();
  optim::Adam opt(mlp->parameters(), {1e-3});
  Tensor x = randn({32, 64});
  Tensor labels = randint(0, 10, {32});
  int64_t param_bytes = 0;
  for (const Tensor& t : mlp->parameters()) param_bytes += charged(t);

  Profiler p;
  MemoryStats at_start = memory_stats();
  Tensor loss = cross_entropy((*mlp)(x), labels);
  MemoryStats after_forward = memory_stats();
  opt.zero_grad();
  loss.backward();
  MemoryStats after_backward = memory_stats();
  opt.step();
  MemoryStats after_step = memory_stats();
  p.stop();

  MemoryProfile m = p.memory();
  // The categories split the allocator's figures exactly; the task asks for within 1 %.
  CHECK(sum_of(m.at_peak) == m.peak_bytes);
  CHECK(std::abs(double(sum_of(m.at_peak) - m.peak_bytes)) <= 0.01 * double(m.peak_bytes));
  CHECK(sum_of(m.current) == m.current_bytes);
  CHECK(m.peak_bytes == after_step.peak_bytes);
  // The model's parameters are parameters from before the profiler started until the end.
  CHECK(at(at_start.category_bytes, MemoryCategory::Parameter) >= param_bytes);
  CHECK(at(m.at_peak, MemoryCategory::Parameter) == at(at_start.category_bytes, MemoryCategory::Parameter));
  // Forward keeps what backward reads (x, the hidden pre-activations, the logits' inputs) ...
  int64_t saved = at(after_forward.category_bytes, MemoryCategory::Activation);
  CHECK(saved >= charged(x) + 2 * charged(empty({32, 128})));
  // ... and backward frees it all and leaves one gradient per parameter.
  CHECK(at(after_backward.category_bytes, MemoryCategory::Activation) ==
        at(at_start.category_bytes, MemoryCategory::Activation));
  CHECK(at(after_backward.category_bytes, MemoryCategory::Gradient) -
            at(at_start.category_bytes, MemoryCategory::Gradient) == param_bytes);
  // Adam's first step adds two moments per parameter.
  CHECK(at(after_step.category_bytes, MemoryCategory::OptimizerState) -
            at(at_start.category_bytes, MemoryCategory::OptimizerState) == 2 * param_bytes);
  // The peak is during the step: parameters, their gradients and Adam's moments are all live.
  CHECK(at(m.at_peak, MemoryCategory::Gradient) >= param_bytes);
  CHECK(at(m.at_peak, MemoryCategory::OptimizerState) >= 2 * param_bytes);
  // The trace's counter track saw the activations.
  int64_t most_saved = 0;
  for (const ProfileEvent& e : p.events()) most_saved = std::max(most_saved, at(e.memory, MemoryCategory::Activation));
  CHECK(most_saved >= saved);
  std::string table = p.table();
  CHECK(table.find("optimizer state") != std::string::npos);
  CHECK(table.find("Adam.step") != std::string::npos);
  MESSAGE(table);
}

TEST_CASE("profiler: the chrome trace is JSON with complete events in microseconds") {
  auto mlp = samples::digits_mlp();
  Profiler p;
  Tensor loss = (*mlp)(randn({4, 64})).sum();
  loss.backward();
  p.stop();
  std::string path = "kiln_profiler_trace_test.json";
  p.save_chrome_trace(path);
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::remove(path.c_str());
  Json doc = JsonParser(ss.str()).document();
  const std::vector<Json>& evs = doc["traceEvents"].array();
  int ops = 0, scopes = 0, counters = 0;
  int64_t flops = 0;
  for (const Json& e : evs) {
    REQUIRE(e.has("ph"));
    if (e["ph"].str() == "C") {
      ++counters;
      CHECK(e["args"].has("activation"));
      continue;
    }
    if (e["ph"].str() != "X") continue;
    CHECK(e["ts"].num() >= 0);
    CHECK(e["dur"].num() >= 0);
    CHECK(e.has("pid"));
    CHECK(e.has("tid"));
    if (e["cat"].str() == "scope") {
      ++scopes;
      continue;
    }
    ++ops;
    flops += int64_t(e["args"]["flops"].num());
    CHECK(e["args"].has("shapes"));
  }
  int64_t n_ops = 0;
  for (const OpProfile& r : p.ops()) n_ops += r.count;
  CHECK(ops == n_ops);
  CHECK(counters == n_ops);
  CHECK(scopes == 5);  // Sequential, its three layers, backward
  CHECK(flops == p.total_flops());
  test::check_error([] { JsonParser(std::string("{\"a\":[1,2,}")).document(); }, "json:");
}

TEST_CASE("profiler: nothing is recorded outside a profiler, and profilers nest") {
  CHECK(profile_hooks() == nullptr);
  Tensor a = randn({4, 4});
  Profiler outer;
  Tensor b = a + a;
  {
    Profiler inner;
    Tensor c = a * a;
    inner.stop();
    CHECK(op_count_of(inner, "mul") == 1);
    CHECK(op_count_of(inner, "add") == 0);
  }
  Tensor d = a - a;
  outer.stop();
  CHECK(profile_hooks() == nullptr);
  CHECK(op_count_of(outer, "add") == 1);
  CHECK(op_count_of(outer, "sub") == 1);
  CHECK(op_count_of(outer, "mul") == 0);  // the inner profiler had it
  Tensor e = a / a;
  CHECK(op_count_of(outer, "div") == 0);
  Profiler q = profile([&] { Tensor t = matmul(a, a); });
  CHECK(!q.recording());
  CHECK(op_flops_of(q, "matmul") == 2 * 4 * 4 * 4);
}

TEST_CASE("profiler: a memory category scope and set_memory_category move bytes between categories") {
  MemoryStats s0 = memory_stats();
  Tensor t;
  {
    MemoryCategoryScope scope(MemoryCategory::OptimizerState);
    t = empty({1000});
  }
  int64_t n = charged(t);
  MemoryStats s1 = memory_stats();
  CHECK(at(s1.category_bytes, MemoryCategory::OptimizerState) - at(s0.category_bytes, MemoryCategory::OptimizerState) == n);
  set_memory_category(t.view({10, 100}), MemoryCategory::Gradient);  // a view moves its storage
  MemoryStats s2 = memory_stats();
  CHECK(at(s2.category_bytes, MemoryCategory::OptimizerState) == at(s0.category_bytes, MemoryCategory::OptimizerState));
  CHECK(at(s2.category_bytes, MemoryCategory::Gradient) - at(s0.category_bytes, MemoryCategory::Gradient) == n);
  t = Tensor();
  CHECK(at(memory_stats().category_bytes, MemoryCategory::Gradient) == at(s0.category_bytes, MemoryCategory::Gradient));
  // Borrowed memory is not the allocator's: no account changes.
  float buf[4] = {};
  set_memory_category(Tensor::from_blob(buf, {4}, DType::Float32), MemoryCategory::Parameter);
  CHECK(memory_stats().category_bytes == s0.category_bytes);
}
