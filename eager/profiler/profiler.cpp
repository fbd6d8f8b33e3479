// The recorder behind kiln::Profiler: installed as this thread's ProfileHooks, it sums each op into
// its row and into every open scope, and keeps one event per op and scope for the trace.
#include "eager/profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include <fmt/format.h>

#include "core/allocator.h"
#include "core/error.h"
#include "core/op.h"
#include "core/tensor.h"
#include "eager/nn/module.h"
#include "eager/profiler/flops.h"
#include "eager/profiler/profile_hooks.h"

namespace kiln {

namespace detail {
thread_local ProfileHooks* t_profile_hooks = nullptr;
}  // namespace detail

int64_t profile_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Profiler::State final : ProfileHooks {
  struct Open {
    int id;                    // into scopes
    int64_t start_ns;
    const nn::Module* module;  // null for named spans
    std::string dotted;        // module path without types: "Sequential.0"
  };

  int64_t t0 = profile_clock_ns();
  ProfileHooks* prev = nullptr;
  bool active = false;
  std::vector<OpProfile> op_rows = std::vector<OpProfile>(size_t(kNumOps));
  std::vector<OpProfile> kernel_rows;  // by first run
  std::unordered_map<std::string, size_t> kernel_ids;
  std::vector<ScopeProfile> scopes;
  std::unordered_map<std::string, int> scope_ids;
  std::vector<Open> stack;
  std::vector<ProfileEvent> events;
  MemoryProfile final_memory;

  void on_op(OpId op, const Tensors& inputs, const Attrs& attrs, const Tensors& outputs, int64_t start_ns,
             int64_t end_ns) override {
    record(op_rows[size_t(op)], op_name(op), inputs, op_flops(op, inputs, attrs, outputs), start_ns, end_ns);
  }

  void on_kernel(std::string_view name, const Tensors& inputs, int64_t flops, int64_t start_ns,
                 int64_t end_ns) override {
    auto [it, fresh] = kernel_ids.emplace(std::string(name), kernel_rows.size());
    if (fresh) kernel_rows.push_back({std::string(name), true, 0, 0, 0});
    record(kernel_rows[it->second], name, inputs, flops, start_ns, end_ns);
  }

  void record(OpProfile& row, std::string_view name, const Tensors& inputs, int64_t flops, int64_t start_ns,
              int64_t end_ns) {
    row.count++;
    row.flops += flops;
    row.total_ns += end_ns - start_ns;
    for (const Open& o : stack) scopes[size_t(o.id)].flops += flops;
    ProfileEvent e;
    e.name = std::string(name);
    e.start_ns = start_ns - t0;
    e.dur_ns = end_ns - start_ns;
    e.flops = flops;
    e.is_kernel = row.kernel;
    for (const Tensor& t : inputs) {
      if (!e.shapes.empty()) e.shapes += ' ';
      e.shapes += shape_str(t.sizes());
    }
    if (!stack.empty()) e.scope = scopes[size_t(stack.back().id)].path;
    e.memory = memory_stats().category_bytes;
    events.push_back(std::move(e));
  }

  void push_scope(std::string_view name, const nn::Module* module) override {
    std::string dotted, path;
    const Open* parent = stack.empty() ? nullptr : &stack.back();
    std::string child;
    if (module && parent && parent->module)
      for (const auto& [n, c] : parent->module->named_children())
        if (c.get() == module) child = n;
    if (!child.empty()) {
      dotted = parent->dotted + "." + child;
      path = fmt::format("{} ({})", dotted, name);
    } else {
      dotted = parent ? parent->dotted + "/" + std::string(name) : std::string(name);
      path = dotted;
    }
    auto [it, fresh] = scope_ids.emplace(path, int(scopes.size()));
    if (fresh) scopes.push_back({path, 0, 0, 0});
    scopes[size_t(it->second)].count++;
    stack.push_back({it->second, profile_clock_ns(), module, std::move(dotted)});
  }

  void pop_scope() override {
    if (stack.empty()) return;
    Open o = std::move(stack.back());
    stack.pop_back();
    int64_t end = profile_clock_ns();
    ScopeProfile& s = scopes[size_t(o.id)];
    s.total_ns += end - o.start_ns;
    ProfileEvent e;
    e.name = s.path;
    e.start_ns = o.start_ns - t0;
    e.dur_ns = end - o.start_ns;
    e.is_scope = true;
    events.push_back(std::move(e));
  }
};

namespace {

MemoryProfile memory_now() {
  MemoryStats m = memory_stats();
  return {m.peak_bytes, m.category_peak_bytes, m.current_bytes, m.category_bytes};
}

}  // namespace

Profiler::Profiler() : s_(std::make_unique<State>()) {
  reset_peak_memory_stats();
  s_->prev = detail::t_profile_hooks;
  s_->active = true;
  detail::t_profile_hooks = s_.get();
}

Profiler::~Profiler() { stop(); }
Profiler::Profiler(Profiler&&) noexcept = default;
Profiler& Profiler::operator=(Profiler&& o) noexcept {
  if (this != &o) {
    stop();
    s_ = std::move(o.s_);
  }
  return *this;
}

void Profiler::stop() {
  if (!s_ || !s_->active) return;
  s_->active = false;
  // Profilers nest: the one started inside another stops first and hands the thread back.
  if (detail::t_profile_hooks == s_.get()) detail::t_profile_hooks = s_->prev;
  s_->stack.clear();
  s_->final_memory = memory_now();
}

bool Profiler::recording() const { return s_ && s_->active; }

std::vector<OpProfile> Profiler::ops() const {
  std::vector<OpProfile> out;
  if (!s_) return out;
  for (int i = 0; i < kNumOps; ++i) {
    if (s_->op_rows[size_t(i)].count == 0) continue;
    OpProfile r = s_->op_rows[size_t(i)];
    r.name = std::string(op_name(OpId(i)));
    out.push_back(std::move(r));
  }
  out.insert(out.end(), s_->kernel_rows.begin(), s_->kernel_rows.end());
  std::stable_sort(out.begin(), out.end(), [](const OpProfile& a, const OpProfile& b) { return a.total_ns > b.total_ns; });
  return out;
}

std::vector<ScopeProfile> Profiler::scopes() const { return s_ ? s_->scopes : std::vector<ScopeProfile>{}; }

MemoryProfile Profiler::memory() const {
  if (!s_) return {};
  return s_->active ? memory_now() : s_->final_memory;
}

int64_t Profiler::total_flops() const {
  int64_t n = 0;
  if (s_) {
    for (const OpProfile& r : s_->op_rows) n += r.flops;
    for (const OpProfile& r : s_->kernel_rows) n += r.flops;
  }
  return n;
}

const std::vector<ProfileEvent>& Profiler::events() const {
  static const std::vector<ProfileEvent> none;
  return s_ ? s_->events : none;
}

Profiler profile(const std::function<void()>& fn) {
  Profiler p;
  fn();
  p.stop();
  return p;
}

}  // namespace kiln
