#include "eager/cpu/conv_onednn.h"

#include <omp.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include "eager/cpu/onednn_switch.h"
#include "eager/cpu/primitive_cache.h"
#include "kiln_config.h"
#if KILN_HAVE_DNNL
#include "core/log.h"
#include "core/memory_category.h"
#include "core/storage.h"

#include <dnnl.hpp>

#include "eager/cpu/conv_one_pixel.h"
#include "eager/cpu/copy.h"
#include "eager/cpu/derived_copy.h"
#include "eager/cpu/onednn_scratchpad.h"
#endif

namespace kiln::cpu {

#if !KILN_HAVE_DNNL

std::optional<Tensor> onednn_conv2d(const Tensor&, const Tensor&, const Tensor&, const Attrs&) { return std::nullopt; }

std::optional<ConvGrads> onednn_conv2d_backward(const Tensor&, const Tensor&, const Tensor&, const Shape&,
                                                     const Shape&, const Attrs&, bool, bool, bool) {
  return std::nullopt;
}

std::string onednn_conv2d_impl(const Shape&, const Shape&, const Attrs&, DType) { return "none: built without oneDNN"; }

#else

namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

using dt = dnnl::memory::data_type;

// The oneDNN type of the dtypes taken here: float32 everywhere, bf16 where oneDNN has a kernel for it
// (checked per primitive, onednn_reference_impl).
std::optional<dt> dnnl_type(DType t) {
  if (t == DType::Float32) return dt::f32;
  if (t == DType::BFloat16) return dt::bf16;
  return std::nullopt;
}

// The gradients of bf16 convolutions with small output planes (a ResNet on 32x32 images: 8x8 down to 1x1) ran
// at about half float32's speed in oneDNN's AMX kernels on an Intel Xeon (per-shape means under ONEDNN_VERBOSE,
// bench/RESULTS.md stop 50), and a one-pixel plane's never reached the float32 GEMM that float32 takes: where
// oneDNN has a bf16 kernel, those compute in float32 on the bf16 values and round once. The forward stays in bf16
// (in float32 the casts cost more than they saved there, eval at 2 threads 11.5 -> 16.5 ms); so do larger planes.
constexpr int64_t kBf16MinPlane = 128;  // output pixels
bool small_bf16_plane(dt t, int64_t oh, int64_t ow) { return t == dt::bf16 && oh * ow < kBf16MinPlane; }
// At output planes of 4 pixels or fewer (ResNet-18's layer3 and layer4 on 32x32 images, 2x2 and 1x1) oneDNN's
// direct backward kernels ran far slower than kiln's column GEMMs (conv2d_backward): per training step, 1 thread,
// 3.8 against 3.5 ms a 256-channel 2x2 conv, 7.1 against 3.3 ms the 256 -> 512 stride-2 conv (its weight
// gradient alone 9.7 ms in oneDNN, ONEDNN_VERBOSE), float32 and bf16 alike; planes of 16 pixels and more ran
// faster in oneDNN (4x4 and 8x8: 1.9 against 3.0, 2.0 against 3.9 ms).
constexpr int64_t kMaxColumnPlane = 4;  // output pixels
bool column_plane(int64_t oh, int64_t ow) { return oh * ow <= kMaxColumnPlane; }
Tensor as_f32(const Tensor& t) { return t.defined() ? cast_to(t, DType::Float32) : t; }
Tensor as_bf16(const Tensor& t) { return t.defined() ? cast_to(t, DType::BFloat16) : t; }

// The primitives for one conv geometry and set of wanted gradients, and the layouts they read and write;
// neither primitive where oneDNN declines them or has only its reference kernel.
struct ConvPrims {
  std::optional<dnnl::convolution_backward_data> data;
  std::optional<dnnl::convolution_backward_weights> weights;
  dnnl::memory::desc data_diff_dst, data_weights, data_diff_src, data_scratchpad;
  dnnl::memory::desc w_diff_dst, w_src, w_diff_weights, w_diff_bias, w_scratchpad;
};

struct ForwardPrim {
  std::optional<dnnl::convolution_forward> prim;  // none: reference kernel only
  std::string impl;
  dnnl::memory::desc src, weights, dst, scratchpad;
};

struct State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  PrimitiveCache<std::map<std::vector<int64_t>, std::shared_ptr<const ConvPrims>>> cache{1024};
  PrimitiveCache<std::map<std::vector<int64_t>, std::shared_ptr<const ForwardPrim>>> forward{1024};
};

State& state() {
  static State* s = new State;  // never destroyed: primitives must not outlive their engine
  return *s;
}

dnnl::memory::desc any(const dims& d, dt t) { return dnnl::memory::desc(d, t, tag::any); }

std::shared_ptr<const ConvPrims> create(const dims& src, const dims& wei, const dims& dst, const dims& strides,
                                        const dims& dilates, const dims& pad, bool need_input, bool need_weight,
                                        bool need_bias, dt t) {
  const dnnl::engine& eng = state().engine;
  auto alg = dnnl::algorithm::convolution_direct;
  auto any = [t](const dims& d) { return kiln::cpu::any(d, t); };
  dnnl::memory::desc bias(dims{wei[0]}, t, tag::x);
  // The forward's description is the hint both backward primitives are chosen against.
  dnnl::convolution_forward::primitive_desc fwd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, alg, any(src), any(wei), bias, any(dst),
                                      strides, dilates, pad, pad),
      eng);
  auto p = std::make_shared<ConvPrims>();
  dnnl::primitive_attr attr = user_scratchpad();
  if (need_input) {
    dnnl::convolution_backward_data::primitive_desc pd(
        dnnl::convolution_backward_data::desc(alg, any(src), any(wei), any(dst), strides, dilates, pad, pad), attr, eng, fwd);
    if (onednn_reference_impl(pd.impl_info_str())) return std::make_shared<ConvPrims>();
    p->data.emplace(pd);
    p->data_diff_dst = pd.diff_dst_desc();
    p->data_weights = pd.weights_desc();
    p->data_diff_src = pd.diff_src_desc();
    p->data_scratchpad = pd.scratchpad_desc();
  }
  if (need_weight || need_bias) {
    auto d = need_bias ? dnnl::convolution_backward_weights::desc(alg, any(src), any(wei), bias, any(dst), strides,
                                                                    dilates, pad, pad)
                       : dnnl::convolution_backward_weights::desc(alg, any(src), any(wei), any(dst), strides, dilates,
                                                                    pad, pad);
    dnnl::convolution_backward_weights::primitive_desc pd(d, attr, eng, fwd);
    if (onednn_reference_impl(pd.impl_info_str())) return std::make_shared<ConvPrims>();
    p->weights.emplace(pd);
    p->w_scratchpad = pd.scratchpad_desc();
    p->w_diff_dst = pd.diff_dst_desc();
    p->w_src = pd.src_desc();
    p->w_diff_weights = pd.diff_weights_desc();
    if (need_bias) p->w_diff_bias = pd.diff_bias_desc();
  }
  return p;
}

// A memory of layout `want` holding t (plain, `plain`): t itself when the layouts agree, else a
// reorder into a buffer from kiln's allocator (kept alive by `keep`).
dnnl::memory in_layout(const Tensor& t, const dnnl::memory::desc& plain, const dnnl::memory::desc& want,
                       dnnl::stream& s, std::vector<Tensor>& keep) {
  const dnnl::engine& eng = state().engine;
  dnnl::memory user(plain, eng, t.raw_data());
  if (want == plain) return user;
  keep.push_back(Tensor::empty({int64_t(want.get_size() / sizeof(float)) + 1}, DType::Float32));  // bytes, any dtype
  dnnl::memory m(want, eng, keep.back().raw_data());
  dnnl::reorder(user, m).execute(s, user, m);
  return m;
}

// A memory of layout `have` for a result that ends up in `out` (plain): out itself when they agree.
dnnl::memory out_layout(const Tensor& out, const dnnl::memory::desc& plain, const dnnl::memory::desc& have,
                        std::vector<Tensor>& keep) {
  const dnnl::engine& eng = state().engine;
  if (have == plain) return dnnl::memory(plain, eng, out.raw_data());
  keep.push_back(Tensor::empty({int64_t(have.get_size() / sizeof(float)) + 1}, DType::Float32));
  return dnnl::memory(have, eng, keep.back().raw_data());
}

// A parameter's weights in a primitive's blocked layout, kept while the parameter is unchanged
// (derived_copy.h). Reordering oihw into ABcd16b16a costs more than the conv itself for the 3x3s of
// ResNet-18's deep layers on small images (0.9 ms against 0.37 ms at 512 channels, 1x1 pixels): an eval
// forward spent ~4 of its ~19 ms there.
struct BlockedWeight {
  dnnl::memory::desc desc;
  DerivedCopy copy;
};

struct WeightCache {
  std::mutex mu;
  std::map<std::pair<const Storage*, int64_t>, std::vector<BlockedWeight>> map;
};

WeightCache& weight_cache() {
  static WeightCache* c = new WeightCache;
  return *c;
}

// t (contiguous, plain) in layout `want`, through the cache when t is a parameter; nothing when it is not.
std::optional<dnnl::memory> cached_weight(const Tensor& t, const dnnl::memory::desc& plain,
                                          const dnnl::memory::desc& want, dnnl::stream& s,
                                          std::vector<std::shared_ptr<void>>& keep) {
  const std::shared_ptr<Storage>& st = t.storage();
  if (want == plain || !keeps_derived_copies(st)) return std::nullopt;
  const dnnl::engine& eng = state().engine;
  uint64_t version = t.version();
  WeightCache& c = weight_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto key = std::make_pair(static_cast<const Storage*>(st.get()), t.storage_offset());
  auto it = c.map.find(key);
  if (it == c.map.end()) {
    for (auto e = c.map.begin(); e != c.map.end();)  // drop the copies of parameters that are gone
      e = e->second.empty() || e->second[0].copy.expired() ? c.map.erase(e) : std::next(e);
    it = c.map.emplace(key, std::vector<BlockedWeight>{}).first;
  }
  std::vector<BlockedWeight>& entries = it->second;
  if (!entries.empty() && entries[0].copy.storage.lock() != st) entries.clear();
  BlockedWeight* e = nullptr;
  for (BlockedWeight& b : entries)
    if (b.desc == want) e = &b;
  if (e && e->copy.current(st, version)) {
    keep.push_back(e->copy.buf);
    return dnnl::memory(want, eng, e->copy.buf.get());
  }
  if (!e) e = &entries.emplace_back(BlockedWeight{want, {}});
  e->copy.renew(st, version, want.get_size());
  dnnl::memory user(plain, eng, t.raw_data()), m(want, eng, e->copy.buf.get());
  // The backward-data conv wants the weights blocked the other way round from the forward's (ABcd16a16b,
  // not ABcd16b16a): from the forward's copy of this version that is a swap inside each 16x16 block,
  // cheaper than gathering each block from oihw again.
  const BlockedWeight* from = nullptr;
  for (const BlockedWeight& b : entries)
    if (&b != e && b.copy.current(st, version)) from = &b;
  if (from) {
    dnnl::memory blocked(from->desc, eng, from->copy.buf.get());
    dnnl::reorder(blocked, m).execute(s, blocked, m);
  } else {
    dnnl::reorder(user, m).execute(s, user, m);
  }
  keep.push_back(e->copy.buf);
  return m;
}

void to_plain(const dnnl::memory& m, const Tensor& out, const dnnl::memory::desc& plain, dnnl::stream& s) {
  if (m.get_desc() == plain) return;
  dnnl::memory user(plain, state().engine, out.raw_data());
  dnnl::reorder(m, user).execute(s, const_cast<dnnl::memory&>(m), user);
}

// The conv's geometry as oneDNN dims, when it is one taken here (see the header).
struct Geometry {
  dims src, wei, dst, strides, dilates, pad;
};
std::optional<Geometry> geometry(const Shape& input_shape, const Shape& weight_shape, const Attrs& attrs) {
  if (input_shape.size() != 4 || weight_shape.size() != 4 || attrs.i_or("groups", 1) != 1 || input_shape[1] < 8 ||
      weight_shape[1] != input_shape[1])
    return std::nullopt;
  const Shape &st = attrs.ints("stride"), &pd = attrs.ints("padding"), &dl = attrs.ints("dilation");
  if (st.size() != 2 || pd.size() != 2 || dl.size() != 2) return std::nullopt;
  Geometry g{dims(input_shape.begin(), input_shape.end()), dims(weight_shape.begin(), weight_shape.end()), {},
             {st[0], st[1]}, {dl[0] - 1, dl[1] - 1}, {pd[0], pd[1]}};
  int64_t oh = (input_shape[2] + 2 * pd[0] - dl[0] * (weight_shape[2] - 1) - 1), ow = (input_shape[3] + 2 * pd[1] - dl[1] * (weight_shape[3] - 1) - 1);
  if (oh < 0 || ow < 0 || st[0] <= 0 || st[1] <= 0) return std::nullopt;
  g.dst = {input_shape[0], weight_shape[0], oh / st[0] + 1, ow / st[1] + 1};
  return g;
}

// The cached forward primitive for geometry g in type t (with a bias or not); without one where oneDNN
// declines the conv. Declines are cached too: on an AVX2-only CPU oneDNN has no bf16 conv at all, and
// asking again costs every autocast conv a search through its implementations.
std::shared_ptr<const ForwardPrim> forward_prim(const Geometry& g, dt t, bool with_bias) {
  std::vector<int64_t> key = g.src;
  key.insert(key.end(), g.wei.begin(), g.wei.end());
  for (const dims* d : {&g.strides, &g.dilates, &g.pad}) key.insert(key.end(), d->begin(), d->end());
  key.push_back(with_bias);
  key.push_back(int64_t(t));
  key.push_back(omp_get_max_threads());
  State& s = state();
  return s.forward.get(key, [&]() -> std::shared_ptr<const ForwardPrim> {
    try {
      dnnl::memory::desc bias(dims{g.wei[0]}, t, tag::x);
      auto alg = dnnl::algorithm::convolution_direct;
      auto kind = dnnl::prop_kind::forward_training;
      auto d = with_bias ? dnnl::convolution_forward::desc(kind, alg, any(g.src, t), any(g.wei, t), bias,
                                                           any(g.dst, t), g.strides, g.dilates, g.pad, g.pad)
                         : dnnl::convolution_forward::desc(kind, alg, any(g.src, t), any(g.wei, t), any(g.dst, t),
                                                           g.strides, g.dilates, g.pad, g.pad);
      dnnl::convolution_forward::primitive_desc pd(d, user_scratchpad(), s.engine);
      auto p = std::make_shared<ForwardPrim>(ForwardPrim{std::nullopt, pd.impl_info_str(), pd.src_desc(),
                                                         pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc()});
      if (!onednn_reference_impl(p->impl)) p->prim.emplace(pd);
      return p;
    } catch (const dnnl::error& e) {
      kiln::logger().debug("conv2d: onednn declined input {} weight {}: {}",
                           shape_str(Shape(g.src.begin(), g.src.end())), shape_str(Shape(g.wei.begin(), g.wei.end())),
                           e.what());
      return std::make_shared<const ForwardPrim>(
          ForwardPrim{std::nullopt, std::string("oneDNN has no kernel for it: ") + e.what(), {}, {}, {}, {}});
    }
  });
}

}  // namespace

std::string onednn_conv2d_impl(const Shape& input_shape, const Shape& weight_shape, const Attrs& attrs, DType dtype) {
  std::optional<dt> t = dnnl_type(dtype);
  std::optional<Geometry> g = geometry(input_shape, weight_shape, attrs);
  if (!t || !g) return "none: not a conv taken here";
  std::shared_ptr<const ForwardPrim> p = forward_prim(*g, *t, false);
  return p->prim ? p->impl : "none: " + p->impl;
}

std::optional<Tensor> onednn_conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Attrs& attrs) {
  if (!onednn_gemm_enabled() || !x.defined() || !w.defined() || x.dtype() != w.dtype() || !x.device().is_cpu() ||
      !w.device().is_cpu() || x.dim() != 4 || w.dim() != 4)
    return std::nullopt;
  std::optional<dt> t = dnnl_type(x.dtype());
  if (!t) return std::nullopt;
  if (b.defined() && (b.dtype() != x.dtype() || !b.device().is_cpu() || b.dim() != 1 || b.size(0) != w.size(0)))
    return std::nullopt;
  std::optional<Geometry> g = geometry(x.sizes(), w.sizes(), attrs);
  if (!g || x.numel() == 0 || w.numel() == 0) return std::nullopt;
  std::shared_ptr<const ForwardPrim> p = forward_prim(*g, *t, b.defined());
  if (!p->prim) return std::nullopt;
  State& s = state();
  auto plain = [&](const dims& d, tag tg) { return dnnl::memory::desc(d, *t, tg); };
  dnnl::memory::desc src_plain = plain(g->src, tag::nchw), dst_plain = plain(g->dst, tag::nchw),
                     wei_plain = plain(g->wei, tag::oihw);
  Tensor xc = x.contiguous(), wc = w.contiguous(), bc = b.defined() ? b.contiguous() : b;
  Tensor out = Tensor::empty(Shape(g->dst.begin(), g->dst.end()), x.dtype());
  std::vector<Tensor> keep;
  try {
    thread_local dnnl::stream stream(s.engine);
    dnnl::memory xm = in_layout(xc, src_plain, p->src, stream, keep);
    std::vector<std::shared_ptr<void>> cached;
    std::optional<dnnl::memory> wcached = cached_weight(wc, wei_plain, p->weights, stream, cached);
    dnnl::memory wm = wcached ? *wcached : in_layout(wc, wei_plain, p->weights, stream, keep);
    dnnl::memory ym = out_layout(out, dst_plain, p->dst, keep);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, xm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, ym}};
    if (bc.defined()) args.emplace(DNNL_ARG_BIAS, dnnl::memory(plain({g->wei[0]}, tag::x), s.engine, bc.raw_data()));
    add_scratchpad(args, p->scratchpad, s.engine);
    p->prim->execute(stream, args);
    to_plain(ym, out, dst_plain, stream);
    stream.wait();
  } catch (const dnnl::error& e) {
    fail("conv2d: onednn input {} weight {} failed: {}", shape_str(x.sizes()), shape_str(w.sizes()), e.what());
  }
  return out;
}

std::optional<ConvGrads> onednn_conv2d_backward(const Tensor& grad, const Tensor& x, const Tensor& w,
                                                     const Shape& input_shape, const Shape& weight_shape,
                                                     const Attrs& attrs, bool need_input, bool need_weight,
                                                     bool need_bias) {
  std::optional<dt> t = dnnl_type(grad.dtype());
  if (!onednn_gemm_enabled() || !t || !grad.device().is_cpu() || grad.dim() != 4) return std::nullopt;
  if (input_shape.size() != 4 || weight_shape.size() != 4 || attrs.i_or("groups", 1) != 1 || input_shape[1] < 8)
    return std::nullopt;
  for (const Tensor* t : {need_weight ? &x : nullptr, need_input ? &w : nullptr})
    if (t && (!t->defined() || t->dtype() != grad.dtype() || !t->device().is_cpu())) return std::nullopt;
  if ((need_weight && x.sizes() != input_shape) || (need_input && w.sizes() != weight_shape)) return std::nullopt;
  if (grad.numel() == 0 || (need_bias && !need_weight)) return std::nullopt;
  const Shape &st = attrs.ints("stride"), &pd = attrs.ints("padding"), &dl = attrs.ints("dilation");
  if (st.size() != 2 || pd.size() != 2 || dl.size() != 2) return std::nullopt;
  dims src(input_shape.begin(), input_shape.end()), wei(weight_shape.begin(), weight_shape.end()),
      dst(grad.sizes().begin(), grad.sizes().end());
  dims strides{st[0], st[1]}, dilates{dl[0] - 1, dl[1] - 1}, pad{pd[0], pd[1]};
  if (*t == dt::f32 && column_plane(dst[2], dst[3])) return std::nullopt;  // the caller's own kernels
  std::vector<int64_t> key{src[0], src[1], src[2], src[3], wei[0], wei[2], wei[3], st[0], st[1], dl[0], dl[1],
                           pd[0], pd[1], need_input, need_weight, need_bias, int64_t(*t), int64_t(omp_get_max_threads())};
  State& s = state();
  std::shared_ptr<const ConvPrims> p = s.cache.get(key, [&]() -> std::shared_ptr<const ConvPrims> {
    try {
      return create(src, wei, dst, strides, dilates, pad, need_input, need_weight, need_bias, *t);
    } catch (const dnnl::error& e) {  // cached as declined (see forward_prim)
      kiln::logger().debug("conv backward: onednn declined input {} weight {}: {}", shape_str(input_shape),
                           shape_str(weight_shape), e.what());
      return std::make_shared<const ConvPrims>();
    }
  });
  if (!p->data && !p->weights) return std::nullopt;  // declined, or reference kernels only
  if (small_bf16_plane(*t, dst[2], dst[3])) {
    std::optional<ConvGrads> one =
        one_pixel_conv2d_backward(grad, x, w, input_shape, weight_shape, attrs, need_input, need_weight, need_bias);
    if (one) return one;
    const Tensor g32 = as_f32(grad), x32 = as_f32(x), w32 = as_f32(w);
    std::optional<ConvGrads> f =
        column_plane(dst[2], dst[3])
            ? conv2d_backward(g32, x32, w32, input_shape, weight_shape, attrs, need_input, need_weight, need_bias)
            : onednn_conv2d_backward(g32, x32, w32, input_shape, weight_shape, attrs, need_input, need_weight,
                                     need_bias);
    if (!f) return std::nullopt;
    return ConvGrads{as_bf16(f->input), as_bf16(f->weight), as_bf16(f->bias)};
  }
  auto plain = [&](const dims& d, tag tg) { return dnnl::memory::desc(d, *t, tg); };
  dnnl::memory::desc src_plain = plain(src, tag::nchw), dst_plain = plain(dst, tag::nchw),
                     wei_plain = plain(wei, tag::oihw);
  Tensor gc = grad.contiguous(), xc = need_weight ? x.contiguous() : Tensor(), wc = need_input ? w.contiguous() : Tensor();
  ConvGrads r;
  std::vector<Tensor> keep;
  std::vector<std::shared_ptr<void>> cached;
  try {
    thread_local dnnl::stream stream(s.engine);
    std::optional<dnnl::memory> grad_data;
    if (need_input) {
      r.input = Tensor::empty(input_shape, grad.dtype());
      dnnl::memory g = in_layout(gc, dst_plain, p->data_diff_dst, stream, keep);
      grad_data = g;
      std::optional<dnnl::memory> wcached = cached_weight(wc, wei_plain, p->data_weights, stream, cached);
      dnnl::memory wm = wcached ? *wcached : in_layout(wc, wei_plain, p->data_weights, stream, keep);
      dnnl::memory dx = out_layout(r.input, src_plain, p->data_diff_src, keep);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, g}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DIFF_SRC, dx}};
      add_scratchpad(args, p->data_scratchpad, s.engine);
      p->data->execute(stream, args);
      to_plain(dx, r.input, src_plain, stream);
    }
    if (need_weight) {
      Tensor dw = Tensor::empty(weight_shape, grad.dtype());
      // Both primitives usually read the gradient in one blocked layout: reorder it once.
      dnnl::memory g = grad_data && p->w_diff_dst == p->data_diff_dst
                           ? *grad_data
                           : in_layout(gc, dst_plain, p->w_diff_dst, stream, keep);
      dnnl::memory xm = in_layout(xc, src_plain, p->w_src, stream, keep);
      dnnl::memory dwm = out_layout(dw, wei_plain, p->w_diff_weights, keep);
      std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_DIFF_DST, g}, {DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_WEIGHTS, dwm}};
      if (need_bias) {
        r.bias = Tensor::empty({wei[0]}, grad.dtype());
        args.emplace(DNNL_ARG_DIFF_BIAS, dnnl::memory(p->w_diff_bias, s.engine, r.bias.raw_data()));
      }
      add_scratchpad(args, p->w_scratchpad, s.engine);
      p->weights->execute(stream, args);
      to_plain(dwm, dw, wei_plain, stream);
      r.weight = dw;
    }
    stream.wait();
  } catch (const dnnl::error& e) {
    fail("conv backward: onednn input {} weight {} failed: {}", shape_str(input_shape), shape_str(weight_shape), e.what());
  }
  return r;
}

#endif

}  // namespace kiln::cpu
