#include "eager/nn/module.h"

#include <set>

#include "eager/autograd/graph.h"
#include "eager/cpu/gemm_warm_up.h"
#include <cstdio>

#include "eager/io.h"
#include "eager/torch_checkpoint.h"

namespace kiln::nn {

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  if (requires_grad) t.requires_grad_(true);
  set_memory_category(t, MemoryCategory::Parameter);
  // A model with a weight matrix will multiply by it: the GEMM library's one-time set-up starts now, beside
  // the rest of the model's construction, rather than at the first step that needs it.
  if (t.device().is_cpu() && t.dim() >= 2 && is_floating(t.dtype())) cpu::blas::warm_up_on_a_spare_core();
  params_.emplace_back(name, t);
  return t;
}

// Buffers (running statistics) are counted with the parameters: model state that is not trained.
Tensor Module::register_buffer(const std::string& name, Tensor t) {
  set_memory_category(t, MemoryCategory::Parameter);
  buffers_.emplace_back(name, t);
  return t;
}

Tensor Module::hooked_forward(const Tensor& x) {
  ProfileScope scope(name(), this);
  if (!hooks_) return forward(x);
  std::shared_ptr<Hooks> h = hooks_;  // a hook may register another
  for (size_t i = 0; i < h->pre.size(); ++i) h->pre[i](*this, x);
  Tensor y = forward(x);
  for (size_t i = 0; i < h->post.size(); ++i)
    if (Tensor r = h->post[i](*this, x, y); r.defined()) y = r;
  return y;
}

void Module::register_forward_pre_hook(ForwardPreHook hook) {
  if (!hooks_) hooks_ = std::make_shared<Hooks>();
  hooks_->pre.push_back(std::move(hook));
}

void Module::register_forward_hook(ForwardHook hook) {
  if (!hooks_) hooks_ = std::make_shared<Hooks>();
  hooks_->post.push_back(std::move(hook));
}

void Module::collect(const std::string& prefix, bool params, bool recurse,
                     std::vector<std::pair<std::string, Tensor>>& out) const {
  for (auto& [n, t] : params ? params_ : buffers_) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (auto& [n, c] : children_) c->collect(prefix + n + ".", params, true, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> all, out;
  collect("", true, recurse, all);
  std::set<const TensorImpl*> seen;
  for (auto& [n, t] : all)
    if (seen.insert(t.impl()).second) out.emplace_back(n, t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::all_named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", true, true, out);
  return out;
}

void Module::replace_parameter(const std::string& name, Tensor t) {
  for (auto& [n, p] : params_)
    if (n == name) {
      p = std::move(t);
      return;
    }
  fail("{} has no parameter '{}'", this->name(), name);
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", false, recurse, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

namespace {
// t becomes `now` in place: the handle in params_ and the layer's member share t's impl, so both see
// the new storage (and dtype); a gradient of the old one is dropped.
void rebind(const Tensor& t, const Tensor& now) {
  TensorImpl* impl = t.impl();
  impl->storage = now.storage();
  impl->sizes = now.sizes();
  impl->strides = now.strides();
  impl->offset = now.storage_offset();
  impl->dtype = now.dtype();
  if (t.requires_grad()) t.set_grad(Tensor());
}
}  // namespace

Module& Module::to(Device device) {
  auto move = [&](const Tensor& t) {
    if (t.device() != device) rebind(t, t.detach().to(device));
  };
  for (auto& [n, t] : named_parameters()) move(t);
  for (auto& [n, t] : named_buffers()) move(t);
  return *this;
}

Module& Module::to(DType dtype) {
  if (!is_floating(dtype)) fail("Module.to: expected a floating dtype, got {}", dtype_name(dtype));
  auto cast = [&](const Tensor& t) {
    if (is_floating(t.dtype()) && t.dtype() != dtype) rebind(t, t.detach().to(dtype));
  };
  for (auto& [n, t] : named_parameters()) cast(t);
  for (auto& [n, t] : named_buffers()) cast(t);
  return *this;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [n, t] : all_named_parameters()) out[n] = t.detach();
  for (auto& [n, t] : named_buffers()) out[n] = t.detach();
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  std::map<std::string, Tensor> mine = state_dict();
  if (strict) {
    for (auto& [n, t] : state)
      if (!mine.count(n)) fail("load_state_dict: unexpected key '{}' for {}", n, name());
    for (auto& [n, t] : mine)
      if (!state.count(n)) fail("load_state_dict: missing key '{}' for {}", n, name());
  }
  NoGradGuard ng;
  for (auto& [n, dst] : mine) {
    auto it = state.find(n);
    if (it == state.end()) continue;
    if (it->second.sizes() != dst.sizes())
      fail("load_state_dict: size mismatch for '{}': copying a param with shape {}, the shape in the current "
           "model is {}",
           n, shape_str(it->second.sizes()), shape_str(dst.sizes()));
    dst.copy_(it->second);
  }
}

void Module::save(const std::string& path) const {
  std::map<std::string, Tensor> s;
  for (auto& [n, t] : state_dict()) s[n] = t.contiguous();
  save_safetensors(path, s);
}

namespace {
// A torch.save file is a zip archive; safetensors starts with its header length.
bool is_zip(const std::string& path) {
  char head[4] = {};
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;  // load_safetensors names the failure
  size_t n = std::fread(head, 1, 4, f);
  std::fclose(f);
  return n == 4 && std::string_view(head, 4) == std::string_view("PK\x03\x04", 4);
}

// The state_dict in what a training script saved: itself, or under one of the keys scripts use.
std::map<std::string, Tensor> state_dict_in(const IValue& v, const std::string& path) {
  if (!v.is_dict()) fail("Module.load: {}: holds a {}, not a state_dict", path, v.type_name());
  bool all_tensors = true;
  for (auto& [k, e] : v.items()) all_tensors &= k.is_string() && e.is_tensor();
  if (all_tensors) return tensor_dict(v, "Module.load: " + path);
  for (const char* key : {"model", "state_dict", "model_state_dict"})
    if (const IValue* sd = v.find(key)) return tensor_dict(*sd, fmt::format("Module.load: {}: '{}'", path, key));
  fail("Module.load: {}: a dict that is neither a state_dict nor holds one under 'model', 'state_dict' or "
       "'model_state_dict'",
       path);
}
}  // namespace

void Module::load(const std::string& path, bool strict) {
  if (is_zip(path)) return load_state_dict(state_dict_in(torch_load(path), path), strict);
  load_state_dict(load_safetensors(path), strict);
}

}  // namespace kiln::nn
