#include "script_frontend/lower.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "core/ir/op_schema.h"
#include "eager/autocast/autocast.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/lowering_builder.h"
#include "script_frontend/parser.h"

namespace kiln::script {

using ir::Block;
using ir::Node;
using ir::Prim;

// Exit flags are ordinary variables whose names no Python identifier can take.
namespace {
constexpr const char* kReturned = "$returned";
constexpr const char* kRetValue = "$ret_value";

const char* flag_ir_name(const std::string& var) {
  if (var == kReturned) return "returned";
  if (var == kRetValue) return "ret_value";
  if (var.rfind("$broke", 0) == 0) return "broke";
  if (var.rfind("$continued", 0) == 0) return "continued";
  return nullptr;
}
std::string ir_name(const std::string& var) {
  const char* f = flag_ir_name(var);
  return f ? f : var;
}
}  // namespace

Lowerer::Lowerer(const Source& src, const FileAst& m) : src_(&src), m_(&m) {}

// ---------------------------------------------------------------- graph building

Node* Lowerer::emit(Node* n) {
  n->line = loc_.line;
  return g_->insert(n);
}

Value* Lowerer::op(OpId id, const std::vector<Value*>& inputs, Attrs attrs) {
  // Inside an AutocastGuard a row of the policy casts its inputs, as dispatch() does in eager.
  std::vector<Value*> ins = autocast_values(*this, autocast_policy(id), inputs);
  Node* n = emit(g_->create_op(id, ins, std::move(attrs), size_t(ir::op_schema(id).outputs)));
  for (Value* o : n->outputs()) o->set_type(Type::tensor());
  return n->output();
}

Value* Lowerer::prim(Prim p, const std::vector<Value*>& inputs, Type out) {
  Node* n = g_->create(p, 1);
  for (Value* v : inputs) n->add_input(v);
  n->output()->set_type(std::move(out));
  return emit(n)->output();
}

Value* Lowerer::constant(int64_t v) {
  Value* c = g_->insert_constant(v);
  c->node()->line = loc_.line;
  return c;
}
Value* Lowerer::constant(double v) {
  Value* c = g_->insert_constant(v);
  c->node()->line = loc_.line;
  return c;
}
Value* Lowerer::constant(bool v) {
  Value* c = g_->insert_constant(v);
  c->node()->line = loc_.line;
  return c;
}

Value* Lowerer::tuple(const std::vector<Value*>& elems) {
  std::vector<Type> ts;
  for (Value* v : elems) ts.push_back(v->type());
  return prim(Prim::TupleConstruct, elems, Type::tuple(std::move(ts)));
}

Value* Lowerer::number_to_tensor(Value* v) { return prim(Prim::NumToTensor, {v}, Type::tensor()); }

Value* Lowerer::placeholder(const Type& t) {
  Value* v = nullptr;
  switch (t.kind) {
    case TypeKind::Tensor: {
      Tensor zero = Tensor::empty({}, default_dtype());
      std::memset(zero.raw_data(), 0, itemsize(zero.dtype()));
      v = g_->insert_constant(zero);
      break;
    }
    case TypeKind::Int: v = g_->insert_constant(int64_t(0)); break;
    case TypeKind::Float: v = g_->insert_constant(0.0); break;
    case TypeKind::Bool: v = g_->insert_constant(false); break;
    case TypeKind::Str: v = g_->insert_constant(std::string()); break;
    case TypeKind::None:
    case TypeKind::Optional: v = g_->insert_none(); break;
    case TypeKind::Tuple: {
      std::vector<Value*> es;
      for (const Type& e : t.elems) es.push_back(placeholder(e));
      v = tuple(es);
      break;
    }
    case TypeKind::List: v = prim(Prim::ListConstruct, {}, t); break;
  }
  if (!t.is_tensor()) v->set_type(t);  // a tensor constant keeps its exact type, as the verifier wants
  v->node()->line = loc_.line;
  return v;
}

Value* Lowerer::to_condition(Value* v, SourceLoc loc) {
  switch (v->type().kind) {
    case TypeKind::Bool: return v;
    case TypeKind::Tensor:
    case TypeKind::Int:
    case TypeKind::Float: return prim(Prim::ToBool, {v}, Type::scalar(TypeKind::Bool));
    case TypeKind::None: return constant(false);
    case TypeKind::Optional:
      fail(loc, fmt::format("cannot use {} as a condition; test it with `is None` / `is not None`", v->type().str()));
    case TypeKind::Str:
    case TypeKind::Tuple:
    case TypeKind::List: break;
  }
  fail(loc, fmt::format("cannot use {} as a condition", v->type().str()));
}

Value* Lowerer::coerce(Value* v, const Type& want, SourceLoc loc, std::string_view what) {
  if (same_type(v->type(), want)) return v;
  if (want.kind == TypeKind::Float && (v->type().kind == TypeKind::Int || v->type().kind == TypeKind::Bool))
    return prim(Prim::ToFloat, {v}, want);
  if (want.kind == TypeKind::Optional) {
    if (v->type().kind == TypeKind::None) {
      v->set_type(want);
      return v;
    }
    if (same_type(v->type(), want.elems[0])) return v;
  }
  if (want.kind == TypeKind::Tuple && v->type().kind == TypeKind::Tuple && v->type().elems.size() == want.elems.size()) {
    // element by element (googlenet's `return x, aux2, aux1` as Tuple[Tensor, Optional[Tensor], Optional[Tensor]])
    std::vector<Value*> es;
    for (size_t i = 0; i < want.elems.size(); ++i) {
      Value* e = v->node()->prim() == Prim::TupleConstruct ? v->node()->input(i) : nullptr;
      if (!e) {
        Node* n = g_->create(Prim::TupleIndex, 1);
        n->add_input(v);
        n->attrs().set("index", int64_t(i));
        n->output()->set_type(v->type().elems[i]);
        e = emit(n)->output();
      }
      es.push_back(coerce(e, want.elems[i], loc, what));
    }
    return prim(Prim::TupleConstruct, es, want);
  }
  fail(loc, fmt::format("{} expects {}, got {}", what, want.str(), v->type().str()));
}

// A value of type `have` where `want` is declared: the same type, a number for a float, None or T for an
// Optional[T], and tuples element by element.
static bool fits_declared(const Type& have, const Type& want) {
  if (same_type(have, want)) return true;
  if (want.kind == TypeKind::Float && is_number(have)) return true;
  if (want.kind == TypeKind::Optional) return have.kind == TypeKind::None || same_type(have, want.elems[0]);
  if (want.kind != TypeKind::Tuple || have.kind != TypeKind::Tuple || have.elems.size() != want.elems.size()) return false;
  for (size_t i = 0; i < want.elems.size(); ++i)
    if (!fits_declared(have.elems[i], want.elems[i])) return false;
  return true;
}

// ---------------------------------------------------------------- functions

Lowerer::Frame Lowerer::new_frame(const FunctionDef& f, const Object* self) {
  // an inlined callee's (a lambda's, a helper's) unannotated parameters are typed by its call's arguments, as a
  // method's; a function lowered as a graph of its own types every parameter
  bool inlined = !inlining_.empty() && inlining_.back() != &f;
  check_def(*src_, f, self != nullptr || inlined || f.name == "<lambda>", "kiln script");
  Frame fr{&f, Type::scalar(TypeKind::None)};
  fr.self = self;
  if (f.has_returns && (f.returns.name == "Dict" || f.returns.name == "dict")) {
    fr.infer_ret = true;  // a dict is a tuple whose element types come from the return
  } else if (f.has_returns) {
    fr.ret_type = type_from_annotation(*src_, f.returns, *m_);
  } else if (self || (!inlining_.empty() && inlining_.back() != &f)) {
    // TorchScript infers a method's return type from its returns, and a called function's (swin's
    // shifted_window_attention has no annotation); a function lowered as a graph of its own declares it
    fr.infer_ret = true;
  } else {
    fail(f.loc, fmt::format("function '{}' needs a return type annotation (-> Tensor, ...)", f.name));
  }
  if (self && (f.params.empty() || f.params[0].name != "self"))
    fail(f.loc, fmt::format("method '{}' must take self as its first parameter", f.name));
  return fr;
}

std::shared_ptr<ir::Graph> Lowerer::lower_function(const FunctionDef& f) { return lower_top(f, nullptr); }

MethodGraph Lowerer::lower_method(const FunctionDef& f, const Object& self, const std::vector<Type>& arg_types) {
  MethodGraph mg;
  arg_types_ = arg_types;
  writebacks_.clear();
  tied_.clear();
  self.walk([&](const Object& o) {
    for (const auto& [old, now] : o.tied) tied_[old.impl()] = now;
  });
  mg.graph = lower_top(f, &self);
  arg_types_.clear();
  mg.bound = bound_;
  mg.writebacks = writebacks_;
  return mg;
}

std::shared_ptr<ir::Graph> Lowerer::lower_top(const FunctionDef& f, const Object* self) {
  g_ = std::make_shared<ir::Graph>();
  frames_.clear();
  loops_.clear();
  bound_.clear();
  bound_inputs_.clear();
  buffer_vars_.clear();
  views_.clear();
  devices_.clear();
  dtypes_.clear();
  shared_list_.clear();
  opaque_.clear();
  param_of_.clear();
  untyped_params_.clear();
  inlining_ = {&f};
  loc_ = f.loc;
  Frame fr = new_frame(f, self);
  std::set<std::string> seen;
  // A method's parameters after self; unannotated ones are Tensors, as in TorchScript.
  for (size_t i = self ? 1 : 0; i < f.params.size(); ++i) {
    const Param& p = f.params[i];
    if (!seen.insert(p.name).second) fail(p.loc, fmt::format("duplicate parameter '{}'", p.name));
    // unannotated with a None default (nanoGPT's `targets=None`): an optional Tensor
    bool none_default = p.default_value && p.default_value->kind == ExprKind::None;
    Type t = p.has_type ? type_from_annotation(*src_, p.type, *m_) : none_default ? Type::optional(Type::tensor()) : Type::tensor();
    // Called with known arguments (nanoGPT's generate(idx, max_new_tokens, temperature, top_k=None)): an
    // unannotated parameter is what it was given, so `range(max_new_tokens)` loops and `top_k is not None`
    // is decided for this call's None.
    size_t arg = i - (self ? 1 : 0);
    bool typed_by_call = !p.has_type && arg < arg_types_.size();
    if (typed_by_call) {
      t = arg_types_[arg];
      none_default = false;
    }
    if (none_default && t.kind != TypeKind::Optional)
      fail(p.default_value->loc, fmt::format("parameter '{}' defaults to None, so its type must be Optional[...], not {}",
                                             p.name, t.str()));
    if (p.default_value && p.default_value->kind != ExprKind::None && !self)
      fail(p.default_value->loc, "only None is supported as a parameter default in kiln script");
    fr.env[p.name] = g_->add_input(t, p.name);
    if (!p.has_type && !typed_by_call && self) untyped_params_.insert(fr.env[p.name]);
    if (p.has_type) note_namedtuple(fr.env[p.name], p.type);
    param_of_[fr.env[p.name]] = fmt::format("parameter '{}' of '{}'", p.name, f.name);
  }
  frames_.push_back(std::move(fr));
  Value* result = nullptr;
  {
    Frame& F = frame();
    const auto& body = f.body;
    bool final_only = returns_at_end(body);
    F.flag_returns = !final_only;
    if (F.infer_ret && F.flag_returns)
      fail_return_paths(f, fmt::format("method '{}' returns from more than one place; give it a return annotation (-> Tensor, ...)",
                                       f.name));
    if (F.infer_ret && !always_returns(body) && (exits(body) & kRet))
      fail_return_paths(f, fmt::format("method '{}' does not return on every path", f.name));
    if (!F.infer_ret && F.ret_type.kind != TypeKind::None && !always_returns(body))
      fail_return_paths(f, fmt::format("function '{}' does not return a {} on every path", f.name, F.ret_type.str()));
    if (F.flag_returns) {
      F.env[kReturned] = constant(false);
      F.env[kReturned]->set_name("returned");
      F.env[kRetValue] = placeholder(F.ret_type);
      F.env[kRetValue]->set_name("ret_value");
    }
    top_body_ = &body;
    const Resume top = resume_point();
    try {
      block(body);
    } catch (const UntypedParameter&) {
      throw;  // not an error of the body: the caller lowers it again, typed by a call
    } catch (const Error& e) {
      if (first_error_.empty()) first_error_ = e.what();
      recover_after(body, top_index_, top);
      throw;
    }
    Frame& F2 = frame();
    result = F2.flag_returns ? F2.env.at(kRetValue) : F2.final_return;
    if (!result) result = placeholder(F2.ret_type);  // the body always raises
    if (F2.ret_type.kind == TypeKind::None) result = nullptr;
  }
  if (result) g_->register_output(result);
  // Buffers updated in place (batch norm in training mode): their new values are trailing outputs.
  for (auto& [impl, var] : buffer_vars_) {
    auto it = frame().env.find(var);
    if (it == frame().env.end()) continue;
    size_t in = 0;
    while (g_->inputs()[in] != bound_inputs_.at(impl)) ++in;
    writebacks_.emplace_back(in, g_->register_output(it->second));
  }
  frames_.pop_back();
  return g_;
}

Value* Lowerer::inline_call(const FunctionDef& f, const Expr& call, const Object* self, const File* file, const Closure* closure) {
  CallArgs a;
  // The arguments are evaluated in the caller's scope, before entering the callee.
  for (size_t i = 1; i < call.args.size(); ++i) {
    if (call.args[i]->kind == ExprKind::Starred) fail(call.args[i]->loc, "starred arguments are only supported in __init__");
    a.pos.push_back(expr(*call.args[i]));
    a.pos_locs.push_back(call.args[i]->loc);
  }
  for (const Keyword& k : call.keywords) a.kw.push_back({k.name, expr(*k.value), k.loc});
  return inline_values(f, a, call.loc, self, file, closure);
}

Value* Lowerer::inline_values(const FunctionDef& f, const CallArgs& a, SourceLoc call_loc, const Object* self, const File* file,
                              const Closure* closure) {
  if (JitMark mark = jit_mark(f); mark == JitMark::Ignore || mark == JitMark::Unused) return call_jit_marked(f, call_loc);
  // Inlining can multiply code (f calls g twice, g calls h twice, ...): bound the graph it builds.
  if (g_->num_nodes() > 200000) fail(call_loc, "the program is too large after inlining its calls");
  for (size_t i = 0; i < inlining_.size(); ++i)
    if (inlining_[i] == &f) {
      std::string chain;
      RecursionError::Cycle cycle;
      for (size_t j = 0; j < inlining_.size(); ++j) {
        chain += inlining_[j]->name + " -> ";
        if (j >= i) cycle.insert(inlining_[j]);
      }
      throw RecursionError(format_source_error(src_->name, src_->text, call_loc,
                                               fmt::format("recursive call {}{} is not supported in kiln script (calls "
                                                           "are inlined)",
                                                           chain, f.name)),
                           std::move(cycle));
    }
  // A method of a class of another file (one the model file imports) reads that file's names, and its
  // errors point into it.
  struct FileSwitch {
    Lowerer& L;
    const Source* src;
    const FileAst* m;
    ~FileSwitch() {
      L.src_ = src;
      L.m_ = m;
    }
  } restore{*this, src_, m_};
  if (self && self->file) file = self->file.get();
  if (file) {
    src_ = &file->src;
    m_ = &file->ast;
  }
  Frame fr = new_frame(f, self);
  size_t first = self ? 1 : 0;
  size_t nparams = f.params.size() - first;
  size_t npos = a.pos.size();
  if (npos > nparams) fail(call_loc, fmt::format("{}() takes {} arguments, got {}", f.name, nparams, npos));
  std::vector<Value*> bound(nparams, nullptr);
  std::vector<SourceLoc> locs(nparams, call_loc);
  for (size_t i = 0; i < npos; ++i) {
    bound[i] = a.pos[i];
    locs[i] = a.pos_locs[i];
  }
  for (const auto& k : a.kw) {
    size_t i = 0;
    while (i < nparams && f.params[i + first].name != k.name) ++i;
    if (i == nparams) {
      std::vector<std::string> names;
      for (size_t j = first; j < f.params.size(); ++j) names.push_back(f.params[j].name);
      fail(k.loc, fmt::format("{}() has no parameter '{}'{}", f.name, k.name, did_you_mean(k.name, names)));
    }
    if (bound[i]) fail(k.loc, fmt::format("{}() got multiple values for argument '{}'", f.name, k.name));
    bound[i] = k.value;
    locs[i] = k.loc;
  }
  for (size_t i = 0; i < nparams; ++i) {
    const Param& p = f.params[i + first];
    if (p.has_type && is_dict_annotation(p.type)) {
      if (!bound[i]) fail(call_loc, fmt::format("{}() is missing argument '{}'", f.name, p.name));
      fr.env[p.name] = dict_argument(p, f, bound[i], locs[i]);
      continue;
    }
    if (!bound[i]) {
      if (!p.default_value) fail(call_loc, fmt::format("{}() is missing argument '{}'", f.name, p.name));
      bound[i] = expr(*p.default_value);
    }
    // An inlined call knows its arguments: an unannotated parameter takes the argument's type (a helper
    // method called with an int, as published code writes them), where a graph's own input is a Tensor.
    if (!p.has_type && f.overloads.empty()) {
      fr.env[p.name] = bound[i];
      continue;
    }
    Type t = p.has_type ? type_from_annotation(*src_, p.type, *m_) : Type::tensor();
    // An @torch.jit._overload_method declaration with the argument's type: the body is lowered for it.
    for (const auto& o : f.overloads) {
      if (same_type(bound[i]->type(), t)) break;
      if (i + first < o->params.size() && o->params[i + first].has_type) {
        Type ot = type_from_annotation(*src_, o->params[i + first].type, *m_);
        if (same_type(bound[i]->type(), ot)) t = ot;
      }
    }
    fr.env[p.name] = coerce(bound[i], t, locs[i], fmt::format("argument '{}' of {}()", p.name, f.name));
    if (p.has_type) note_namedtuple(fr.env[p.name], p.type);
  }
  if (closure) {
    for (const auto& [k, v] : closure->values) fr.env.emplace(k, v);
    for (const auto& [k, o] : closure->modules)
      if (!fr.env.count(k)) fr.modules.emplace(k, o);
  }
  // While the callee runs, its parameters are the caller's values: writing to them is refused.
  std::map<Value*, std::string> saved_params = param_of_;
  for (size_t i = 0; i < nparams; ++i) {
    Value* v = fr.env[f.params[i + first].name];
    if (!param_of_.count(v)) param_of_[v] = fmt::format("parameter '{}' of '{}'", f.params[i + first].name, f.name);
  }
  // Updated buffers are state of the whole module tree: the callee sees and updates them.
  for (auto& [impl, var] : buffer_vars_)
    if (frame().env.count(var)) fr.env[var] = frame().env.at(var);
  SourceLoc saved_loc = loc_;
  inlining_.push_back(&f);
  std::vector<LoopCtx> saved_loops;
  std::swap(saved_loops, loops_);
  frames_.push_back(std::move(fr));
  Frame& F = frame();
  const auto& body = f.body;
  bool final_only = returns_at_end(body);
  F.flag_returns = !final_only;
  if (F.infer_ret && F.flag_returns)
    fail_return_paths(f, fmt::format("method '{}' returns from more than one place; give it a return annotation (-> Tensor, ...)",
                                     f.name));
  if (!F.infer_ret && F.ret_type.kind != TypeKind::None && !always_returns(body))
    fail_return_paths(f, fmt::format("function '{}' does not return a {} on every path", f.name, F.ret_type.str()));
  if (F.flag_returns) {
    F.env[kReturned] = constant(false);
    F.env[kRetValue] = placeholder(F.ret_type);
  }
  block(body);
  Value* result = frame().flag_returns ? frame().env.at(kRetValue) : frame().final_return;
  if (!result) result = placeholder(frame().ret_type);  // the body always raises
  if (frame().ret_type.kind == TypeKind::None) result = g_->insert_none();
  std::map<std::string, Value*> buffers;
  for (auto& [impl, var] : buffer_vars_)
    if (frame().env.count(var)) buffers[var] = frame().env.at(var);
  frames_.pop_back();
  param_of_ = std::move(saved_params);
  for (auto& [var, v] : buffers) frame().env[var] = v;
  std::swap(saved_loops, loops_);
  inlining_.pop_back();
  loc_ = saved_loc;
  if (f.has_returns) note_namedtuple(result, f.returns);
  return result;
}

// ---------------------------------------------------------------- exits

unsigned Lowerer::exits(const Stmt& s) const {
  switch (s.kind) {
    case StmtKind::Return: return kRet;
    case StmtKind::Break: return kBrk;
    case StmtKind::Continue: return kCont;
    case StmtKind::If: return exits(s.body) | exits(s.orelse);
    case StmtKind::While:
    case StmtKind::For: return exits(s.body) & kRet;
    case StmtKind::Expr:
    case StmtKind::Assign:
    case StmtKind::AugAssign:
    case StmtKind::AnnAssign:
    case StmtKind::Pass:
    case StmtKind::Assert:
    case StmtKind::FunctionDef:
    case StmtKind::ClassDef:
    case StmtKind::Import:
    case StmtKind::ImportFrom:
    case StmtKind::AsyncFor:
    case StmtKind::Try:
    case StmtKind::TryStar:
    case StmtKind::With:
    case StmtKind::AsyncWith:
    case StmtKind::Raise:
    case StmtKind::Global:
    case StmtKind::Nonlocal:
    case StmtKind::Delete:
    case StmtKind::Match: return 0;  // lowering rejects these kinds before it asks
  }
  return 0;
}

unsigned Lowerer::exits(const std::vector<StmtPtr>& b) const {
  unsigned f = 0;
  for (const auto& s : b) f |= exits(*s);
  return f;
}

bool Lowerer::always_exits(const std::vector<StmtPtr>& b) const {
  for (const auto& s : b) {
    if (s->kind == StmtKind::Return || s->kind == StmtKind::Break || s->kind == StmtKind::Continue ||
        s->kind == StmtKind::Raise)
      return true;
    if (s->kind == StmtKind::If && always_exits(s->body) && always_exits(s->orelse)) return true;
  }
  return false;
}

bool Lowerer::always_returns(const std::vector<StmtPtr>& b) const {
  for (const auto& s : b) {
    if (s->kind == StmtKind::Return || s->kind == StmtKind::Raise) return true;
    if (s->kind == StmtKind::If && always_returns(s->body) && always_returns(s->orelse)) return true;
  }
  return false;
}

Value* Lowerer::exit_condition(unsigned flags) {
  std::vector<Value*> fs;
  Frame& F = frame();
  if ((flags & kRet) && F.flag_returns) fs.push_back(F.env.at(kReturned));
  if ((flags & kBrk) && !loops_.empty() && !loops_.back().brk.empty()) fs.push_back(F.env.at(loops_.back().brk));
  if ((flags & kCont) && !loops_.empty() && !loops_.back().cont.empty()) fs.push_back(F.env.at(loops_.back().cont));
  if (fs.empty()) return nullptr;
  Value* c = fs[0];
  for (size_t i = 1; i < fs.size(); ++i) {
    Value* rhs = fs[i];
    c = if_value(c, [&] { return constant(true); }, [&] { return rhs; }, loc_);
  }
  return c;
}

void Lowerer::target_names(const Expr& t, std::set<std::string>& out) const {
  if (t.kind == ExprKind::Name) out.insert(t.name);
  // x[i] = v and x[i].add_(v) write x (a new value in the graph, so a loop carries it)
  if (t.kind == ExprKind::Subscript) target_names(*t.args[0], out);
  if (t.kind == ExprKind::Tuple || t.kind == ExprKind::List)
    for (const auto& a : t.args) target_names(*a, out);
}

void Lowerer::assigned_names(const std::vector<StmtPtr>& b, std::set<std::string>& out) const {
  for (const auto& s : b) assigned_names(*s, out);
}

void Lowerer::assigned_names(const Stmt& s, std::set<std::string>& out) const {
  for (const auto& t : s.targets) target_names(*t, out);
  // xs.append(v) rebinds xs (lists are values in the graph)
  const Expr* v = s.kind == StmtKind::Expr ? s.value.get() : nullptr;
  if (v && v->kind == ExprKind::Call && v->args[0]->kind == ExprKind::Attribute && v->args[0]->name == "append" &&
      v->args[0]->args[0]->kind == ExprKind::Name)
    out.insert(v->args[0]->args[0]->name);
  if (v && v->kind == ExprKind::Call && v->args[0]->kind == ExprKind::Attribute && v->args[0]->name.size() > 1 &&
      v->args[0]->name.back() == '_')
    target_names(*v->args[0]->args[0], out);
  assigned_names(s.body, out);
  assigned_names(s.orelse, out);
}

namespace {

void names_read(const Stmt& s, std::set<std::string>& out);

void names_read(const Expr* e, std::set<std::string>& out) {
  if (!e) return;
  if (e->kind == ExprKind::Name) out.insert(e->name);
  for (const auto& a : e->args) names_read(a.get(), out);
  for (const auto& k : e->keywords) names_read(k.value.get(), out);
  for (const Comprehension& g : e->generators) {  // a comprehension reads what it iterates over
    names_read(g.iter.get(), out);
    for (const auto& c : g.ifs) names_read(c.get(), out);
  }
  if (e->fn)
    for (const auto& b : e->fn->body) names_read(*b, out);
}

void names_read(const Stmt& s, std::set<std::string>& out) {
  for (const auto& t : s.targets)
    if (t->kind != ExprKind::Name || s.kind == StmtKind::AugAssign) names_read(t.get(), out);  // x[i] = v reads x
  names_read(s.value.get(), out);
  names_read(s.test.get(), out);
  for (const auto& b : s.body) names_read(*b, out);
  for (const auto& b : s.orelse) names_read(*b, out);
  for (const WithItem& w : s.items) names_read(w.context.get(), out);
  for (const ExceptHandler& h : s.handlers)
    for (const auto& b : h.body) names_read(*b, out);
  for (const auto& b : s.finalbody) names_read(*b, out);
}

// What the constructs lowering refuses bind (assigned_names, which loops use, never meets them): `:=`
// targets, `with ... as v`, `except ... as e` and a try's handlers and finally, global names, a nested def
// or class; a failed statement poisons these too, so a statement reading them is skipped.
void construct_names(const Expr* e, std::set<std::string>& out) {
  if (!e) return;
  if (e->kind == ExprKind::NamedExpr && e->args[0]->kind == ExprKind::Name) out.insert(e->args[0]->name);
  for (const auto& a : e->args) construct_names(a.get(), out);
  for (const auto& k : e->keywords) construct_names(k.value.get(), out);
}

void construct_names(const Stmt& s, std::set<std::string>& out) {
  construct_names(s.value.get(), out);
  construct_names(s.test.get(), out);
  for (const WithItem& w : s.items)
    if (w.vars && w.vars->kind == ExprKind::Name) out.insert(w.vars->name);
  for (const Alias& a : s.names)
    if (s.kind == StmtKind::Global || s.kind == StmtKind::Nonlocal) out.insert(a.name);
  if (s.fn) out.insert(s.fn->name);
  if (s.cls) out.insert(s.cls->name);
  auto block = [&](const std::vector<StmtPtr>& b) {
    for (const auto& x : b) {
      for (const auto& t : x->targets)
        if (t->kind == ExprKind::Name) out.insert(t->name);
      construct_names(*x, out);
    }
  };
  block(s.body);
  block(s.orelse);
  block(s.finalbody);
  for (const ExceptHandler& h : s.handlers) {
    if (!h.name.empty()) out.insert(h.name);
    block(h.body);
  }
}

}  // namespace

// Lowers the statements after the failed one of a block (of the function's own body or an inlined one's) for
// their errors alone (the graph is discarded): each from the state its block's statements start in (`at`),
// skipped when it reads a name that a failed or skipped statement assigns, since its errors would be the first
// one's consequences. A block inside an if or a loop recovers so first, then the block around it.
void Lowerer::recover_after(const std::vector<StmtPtr>& body, size_t failed, const Resume& at) {
  std::set<std::string> poisoned;
  auto poison = [&](size_t i) {
    assigned_names(*body[i], poisoned);
    construct_names(*body[i], poisoned);
  };
  poison(failed);
  for (size_t i = failed + 1; i < body.size(); ++i) {
    const Stmt& s = *body[i - 1];
    if (s.kind == StmtKind::Return || s.kind == StmtKind::Break || s.kind == StmtKind::Continue || s.kind == StmtKind::Raise)
      return;  // the rest is unreachable, as block() leaves it
    std::set<std::string> reads;
    names_read(*body[i], reads);
    bool tainted = std::any_of(reads.begin(), reads.end(), [&](const std::string& n) { return poisoned.count(n); });
    if (!tainted) {
      resume(at);
      const size_t mark = later_errors_.size();
      try {
        stmt(*body[i]);
        continue;
      } catch (const RecursionError&) {
      } catch (const UntypedParameter&) {
        throw;
      } catch (const Error& e) {
        note_later_error(e.what(), mark);  // before the errors its own blocks noted, which come after it
      }
    }
    poison(i);
  }
}

// The return paths of a body that holds a construct kiln does not lower (a try returning from both
// branches) are that construct's consequence: the constructs are the errors, every one of them.
void Lowerer::fail_return_paths(const FunctionDef& f, const std::string& message) {
  raise_all(unsupported_constructs(*src_, f.body));
  fail(f.loc, message);
}

Lowerer::Resume Lowerer::resume_point() const {
  return Resume{loops_, loop_depth_, branch_depth_, inlining_.size(), frames_.size(), g_->insert_point(), param_of_};
}

void Lowerer::resume(const Resume& at) {
  // drop what the failed statement left half done (inlined frames, loop state, alias chains, whose rebinding a
  // half-done write may have left circular); the statements checked then see names only, which can miss an
  // aliasing error but never invent one
  while (frames_.size() > at.frames) frames_.pop_back();
  loops_ = at.loops;
  loop_depth_ = at.loop_depth;
  branch_depth_ = at.branch_depth;
  inlining_.resize(at.inlining);
  param_of_ = at.param_of;
  views_.clear();
  g_->set_insert_point(at.insert);
}

void Lowerer::note_later_error(const std::string& e, size_t at) {
  // a loop over a ModuleList lowers its body once per module: its errors are noted once
  if (e != first_error_ && std::find(later_errors_.begin(), later_errors_.end(), e) == later_errors_.end())
    later_errors_.insert(later_errors_.begin() + long(std::min(at, later_errors_.size())), e);
}

// ---------------------------------------------------------------- statements

void Lowerer::block(const std::vector<StmtPtr>& body, size_t from) {
  for (size_t i = from; i < body.size(); ++i) {
    const Stmt& s = *body[i];
    if (&body == top_body_) top_index_ = i;
    if (&body == top_body_) {
      stmt(s);
    } else {
      // a statement inside an if or a loop, or of an inlined function's body (a helper forward calls): its
      // failure leaves the block's later statements to be checked too, before the block around it (or the
      // caller's) checks its own
      Resume at = resume_point();
      on_code_error([&] { stmt(s); },
                    [&](const Error& e) {
                      if (first_error_.empty()) first_error_ = e.what();
                      recover_after(body, i, at);
                      throw;
                    });
    }
    if (i + 1 == body.size()) return;
    if (s.kind == StmtKind::Return || s.kind == StmtKind::Break || s.kind == StmtKind::Continue ||
        s.kind == StmtKind::Raise || (s.kind == StmtKind::If && always_exits(s.body) && always_exits(s.orelse)))
      return;  // the rest is unreachable, as Python would never run it
    unsigned f = exits(s);
    if (!f) continue;
    // The rest of the block runs only when s did not exit: guard it with the exit flags.
    loc_ = body[i + 1]->loc;
    Value* exited = exit_condition(f);
    if (!exited) continue;
    // An exit folded while lowering (an `if` on constants that returned): the rest is unreachable.
    if (exited->node()->prim() == Prim::Constant && !exited->node()->tensor().defined())
      for (const auto& [k, a] : exited->node()->attrs().items())
        if (k == "value" && std::holds_alternative<bool>(a)) {
          if (std::get<bool>(a)) return;
          exited = nullptr;
        }
    if (!exited) continue;
    branch(exited, [] {}, [&] { block(body, i + 1); }, true, false, body[i + 1]->loc);
    return;
  }
}

void Lowerer::stmt(const Stmt& s) {
  loc_ = s.loc;
  // what kiln does not lower fails the statement, each construct of it reported (clang reports every
  // independent one), before any error of the code around them
  raise_all(unsupported_constructs(*src_, s));
  switch (s.kind) {
    case StmtKind::Expr: {
      if (s.value->kind == ExprKind::String || s.value->kind == ExprKind::Ellipsis) return;  // docstring
      expr(*s.value);
      return;
    }
    case StmtKind::Assign: {
      if (s.targets.size() == 1 && s.targets[0]->kind == ExprKind::Subscript)
        return write_inplace(*s.targets[0], std::nullopt, *s.value, s.loc);
      if (s.targets.size() == 1) return assign_from_expr(*s.targets[0], *s.value);
      Value* v = expr(*s.value);
      for (const auto& t : s.targets) assign(*t, v, t->loc);
      return;
    }
    case StmtKind::AugAssign: {
      if (s.targets[0]->kind == ExprKind::Subscript) return write_inplace(*s.targets[0], s.op, *s.value, s.loc);
      if (s.targets[0]->kind != ExprKind::Name) return assign(*s.targets[0], nullptr, s.targets[0]->loc);
      Value* cur = name(*s.targets[0]);
      // On a tensor, torch updates it in place: names sharing its memory see the change.
      if (cur->type().is_tensor()) return write_inplace(*s.targets[0], s.op, *s.value, s.loc);
      Value* rhs = expr(*s.value);
      loc_ = s.loc;
      return assign(*s.targets[0], binary(s.op, cur, rhs, s.loc), s.loc);
    }
    case StmtKind::AnnAssign: {
      if (!s.value) fail(s.loc, "an annotated name needs a value in kiln script");
      return assign(*s.targets[0], annotated(s.annotation, *s.value, fmt::format("the annotation of '{}'", s.targets[0]->name)), s.loc);
    }
    case StmtKind::If: return if_stmt(s);
    case StmtKind::While:
      if (!s.orelse.empty()) fail(s.loc, "while ... else is not supported in kiln script");
      return while_stmt(s);
    case StmtKind::For:
      if (!s.orelse.empty()) fail(s.loc, "for ... else is not supported in kiln script");
      return for_stmt(s);
    case StmtKind::Return: return return_stmt(s);
    case StmtKind::Break:
    case StmtKind::Continue: {
      bool brk = s.kind == StmtKind::Break;
      if (loops_.empty()) fail(s.loc, fmt::format("'{}' outside a loop", brk ? "break" : "continue"));
      const std::string& flag = brk ? loops_.back().brk : loops_.back().cont;
      frame().env[flag] = constant(true);
      return;
    }
    case StmtKind::Pass: return;
    case StmtKind::Assert: return assert_stmt(s);
    case StmtKind::FunctionDef:
      fail(s.loc, "nested functions are not supported in kiln script; define it at the top level");
    case StmtKind::ClassDef: fail(s.loc, "nested classes are not supported in kiln script; define it at the top level");
    case StmtKind::Import:
    case StmtKind::ImportFrom: fail(s.loc, "imports are only allowed at the top level of a kiln script");
    case StmtKind::AsyncFor:
    case StmtKind::Try:
    case StmtKind::TryStar:
    case StmtKind::With:
    case StmtKind::AsyncWith:
    case StmtKind::Global:
    case StmtKind::Nonlocal:
    case StmtKind::Delete:
    case StmtKind::Match: fail(s.loc, fmt::format("{} not supported in kiln script{}", unsupported_construct(s.kind), torchscript_accepts(s.kind)));
    case StmtKind::Raise: return raise_stmt(s);
  }
}

void Lowerer::assign_from_expr(const Expr& target, const Expr& value) {
  // `a, b = b, a`: element-wise, without building a tuple.
  if ((target.kind == ExprKind::Tuple || target.kind == ExprKind::List) && value.kind == ExprKind::Tuple &&
      target.args.size() == value.args.size()) {
    std::vector<Value*> vs;
    for (const auto& e : value.args) vs.push_back(expr(*e));
    for (size_t i = 0; i < vs.size(); ++i) assign(*target.args[i], vs[i], target.args[i]->loc);
    return;
  }
  // `layer = self.layers[0]`: the name stands for the module from here on.
  if (target.kind == ExprKind::Name)
    if (const Object* o = static_object(value)) {
      frame().modules[target.name] = o;
      frame().env.erase(target.name);
      return;
    }
  const Expr* saved_call = unpack_call_;
  size_t saved_count = unpack_count_;
  if ((target.kind == ExprKind::Tuple || target.kind == ExprKind::List) && value.kind == ExprKind::Call) {
    unpack_call_ = &value;
    unpack_count_ = target.args.size();
  }
  Value* v;
  try {
    v = expr(value);
  } catch (...) {
    unpack_call_ = saved_call, unpack_count_ = saved_count;
    throw;
  }
  unpack_call_ = saved_call, unpack_count_ = saved_count;
  loc_ = target.loc;
  assign(target, v, target.loc);
}

void Lowerer::assign(const Expr& target, Value* v, SourceLoc loc) {
  if (target.kind == ExprKind::Name) {
    if (target.name == "torch" || target.name == "True" || target.name == "False" || target.name == "self")
      fail(loc, fmt::format("cannot assign to '{}'", target.name));
    if (v->name().empty() && v->node()->prim() != Prim::Param) v->set_name(target.name);
    frame().modules.erase(target.name);
    frame().functions.erase(target.name);
    frame().env[target.name] = v;
    frame().partial.erase(target.name);
    return;
  }
  if (target.kind == ExprKind::Tuple || target.kind == ExprKind::List) {
    const Type& t = v->type();
    size_t n = target.args.size();
    if (t.kind == TypeKind::Tuple) {
      if (t.elems.size() != n)
        fail(loc, fmt::format("cannot unpack {} into {} names", t.str(), n));
      if (v->node()->prim() == Prim::TupleConstruct) {
        for (size_t i = 0; i < n; ++i) assign(*target.args[i], v->node()->input(i), target.args[i]->loc);
        return;
      }
      Node* u = g_->create(Prim::TupleUnpack, n);
      u->add_input(v);
      for (size_t i = 0; i < n; ++i) u->output(i)->set_type(t.elems[i]);
      emit(u);
      for (size_t i = 0; i < n; ++i) assign(*target.args[i], u->output(i), target.args[i]->loc);
      return;
    }
    if (t.kind == TypeKind::List) {
      Node* u = g_->create(Prim::ListUnpack, n);
      u->add_input(v);
      for (size_t i = 0; i < n; ++i) u->output(i)->set_type(t.elems[0]);
      emit(u);
      for (size_t i = 0; i < n; ++i) assign(*target.args[i], u->output(i), target.args[i]->loc);
      return;
    }
    fail(loc, fmt::format("cannot unpack {} into {} names", t.str(), n));
  }
  if (target.kind == ExprKind::Attribute)
    fail(loc, fmt::format("cannot assign to attribute '{}' outside __init__ (a scripted module's attributes are fixed "
                          "when it is built)",
                          target.name));
  if (target.kind == ExprKind::Subscript)
    fail(loc, "assignment to an element or slice is supported only as a statement of its own (x[i] = v), not in "
              "unpacking or chained assignment");
  fail(loc, "cannot assign to this expression");
}

void Lowerer::branch(Value* cond, const std::function<void()>& then_fn, const std::function<void()>& else_fn,
                     bool then_exits, bool else_exits, SourceLoc loc) {
  Node* n = emit(g_->create(Prim::If, 0));
  n->line = loc.line;
  Block* blocks[2] = {n->add_block(), n->add_block()};
  n->add_input(cond);
  std::map<std::string, Value*> before = frame().env;
  std::set<std::string> partial_before = frame().partial;
  std::map<std::string, Value*> envs[2];
  std::set<std::string> partial_after = partial_before;
  const std::function<void()>* fns[2] = {&then_fn, &else_fn};
  {
    ir::InsertPointGuard guard(*g_);
    struct Depth {
      int& d;
      explicit Depth(int& x) : d(++x) {}
      ~Depth() { --d; }
    } depth(branch_depth_);
    for (int b = 0; b < 2; ++b) {
      g_->set_insert_point(blocks[b]);
      frame().env = before;
      frame().partial = partial_before;
      (*fns[b])();
      envs[b] = frame().env;
      partial_after.insert(frame().partial.begin(), frame().partial.end());
    }
  }
  // A buffer updated in one branch only keeps its value before the if in the other.
  for (int b = 0; b < 2; ++b)
    for (auto& [k, v] : envs[1 - b])
      if (k.rfind("$buf:", 0) == 0 && !envs[b].count(k)) envs[b][k] = before.count(k) ? before.at(k) : buffer_input(k);
  bool exits_b[2] = {then_exits, else_exits};
  std::map<std::string, Value*> merged;
  std::set<std::string> names;
  for (int b = 0; b < 2; ++b)
    for (auto& [k, v] : envs[b]) names.insert(k);
  std::vector<std::pair<std::string, Value*[2]>> outs;
  for (const std::string& k : names) {
    Value* v[2] = {nullptr, nullptr};
    for (int b = 0; b < 2; ++b) {
      auto it = envs[b].find(k);
      if (it != envs[b].end()) v[b] = it->second;
    }
    auto bt = before.find(k);
    // An `is not None` refinement that ended unchanged is the original optional value.
    for (int b = 0; b < 2; ++b)
      if (bt != before.end() && v[b] && v[b] != bt->second && v[b]->node()->prim() == Prim::Unwrap &&
          v[b]->node()->input() == bt->second && v[1 - b] == bt->second)
        v[b] = bt->second;
    if (v[0] && v[0] == v[1]) {
      merged[k] = v[0];
      continue;
    }
    for (int b = 0; b < 2; ++b)
      if (!v[b] && exits_b[b] && v[1 - b]) {
        ir::InsertPointGuard guard(*g_);
        g_->set_insert_point(blocks[b]);
        v[b] = placeholder(v[1 - b]->type());
      }
    if (!v[0] || !v[1]) {
      partial_after.insert(k);
      continue;
    }
    // A function returning Optional[T]: None on one path and a T on another merge into an Optional[T].
    const Type& rt = frame().ret_type;
    bool optional_ret = k == kRetValue && rt.kind == TypeKind::Optional;
    auto fits = [&](const Type& t) {
      return t.kind == TypeKind::None || t.kind == TypeKind::Optional || same_type(t, rt.elems[0]);
    };
    if (optional_ret && !same_type(v[0]->type(), v[1]->type()) && fits(v[0]->type()) && fits(v[1]->type())) {
      blocks[0]->register_output(v[0]);
      blocks[1]->register_output(v[1]);
      Value* o = n->add_output(rt);
      o->set_name(ir_name(k));
      merged[k] = o;
      continue;
    }
    // A variable None on one path and a T (or Optional[T]) on the other (nanoGPT's `loss = None` when there
    // are no targets): an Optional[T], tested later with `is not None`, as TorchScript types it.
    if (k != kRetValue && !same_type(v[0]->type(), v[1]->type())) {
      auto inner = [](const Type& t) -> const Type* {
        if (t.kind == TypeKind::None) return nullptr;
        return t.kind == TypeKind::Optional ? &t.elems[0] : &t;
      };
      const Type* a = inner(v[0]->type());
      const Type* b = inner(v[1]->type());
      const Type* t = a ? a : b;
      if (t && t->kind != TypeKind::None && (!a || !b || same_type(*a, *b))) {
        blocks[0]->register_output(v[0]);
        blocks[1]->register_output(v[1]);
        Value* o = n->add_output(Type::optional(t->is_tensor() ? Type::tensor() : *t));
        o->set_name(ir_name(k));
        merged[k] = o;
        continue;
      }
    }
    if (!same_type(v[0]->type(), v[1]->type())) {
      // A refined optional against its original: the merged value stays optional.
      if (k == kRetValue)
        fail(loc, fmt::format("the returns of this function give {} and {}; kiln script cannot merge them into one "
                              "value yet (return the same type on every path)",
                              v[0]->type().str(), v[1]->type().str()));
      fail(loc, fmt::format("variable '{}' is {} in the if branch and {} in the else branch", k, v[0]->type().str(),
                            v[1]->type().str()));
    }
    blocks[0]->register_output(v[0]);
    blocks[1]->register_output(v[1]);
    Value* o = n->add_output(v[0]->type().is_tensor() ? Type::tensor() : v[0]->type());
    o->set_name(ir_name(k));
    merge_dict(o, v[0], v[1], k, loc, "if");
    merged[k] = o;
  }
  mark_merged_aliases(before, merged, loc, "code before the if");
  for (int b = 0; b < 2; ++b) mark_merged_aliases(envs[b], merged, loc, b ? "else branch of the if" : "if branch of the if");
  frame().env = std::move(merged);
  for (auto& [k, v] : frame().env) partial_after.erase(k);
  frame().partial = std::move(partial_after);
}

Value* Lowerer::if_value(Value* cond, const std::function<Value*()>& then_fn, const std::function<Value*()>& else_fn,
                         SourceLoc loc) {
  Node* n = emit(g_->create(Prim::If, 0));
  n->add_input(cond);
  Value* vs[2];
  Block* blocks[2] = {n->add_block(), n->add_block()};
  {
    ir::InsertPointGuard guard(*g_);
    g_->set_insert_point(blocks[0]);
    vs[0] = then_fn();
    g_->set_insert_point(blocks[1]);
    vs[1] = else_fn();
  }
  if (!same_type(vs[0]->type(), vs[1]->type())) {
    bool nums = is_number(vs[0]->type()) && is_number(vs[1]->type());
    if (!nums) fail(loc, fmt::format("the two branches have different types: {} and {}", vs[0]->type().str(), vs[1]->type().str()));
    // int and float: float, as Python's arithmetic would give downstream
    for (int b = 0; b < 2; ++b)
      if (vs[b]->type().kind != TypeKind::Float) {
        ir::InsertPointGuard guard(*g_);
        g_->set_insert_point(blocks[b]);
        vs[b] = prim(Prim::ToFloat, {vs[b]}, Type::scalar(TypeKind::Float));
      }
  }
  blocks[0]->register_output(vs[0]);
  blocks[1]->register_output(vs[1]);
  return n->add_output(vs[0]->type().is_tensor() ? Type::tensor() : vs[0]->type());
}

std::optional<Value*> Lowerer::refine_none(const Expr& test, bool then_branch) {
  if (test.kind != ExprKind::Compare || test.ops.size() != 1) return std::nullopt;
  if (test.ops[0] != PyOp::Is && test.ops[0] != PyOp::IsNot) return std::nullopt;
  if (test.args[0]->kind != ExprKind::Name || test.args[1]->kind != ExprKind::None) return std::nullopt;
  bool not_none_here = (test.ops[0] == PyOp::IsNot) == then_branch;
  if (!not_none_here) return std::nullopt;
  auto it = frame().env.find(test.args[0]->name);
  if (it == frame().env.end() || it->second->type().kind != TypeKind::Optional) return std::nullopt;
  return it->second;
}

void Lowerer::if_stmt(const Stmt& s) {
  // A condition on the module's configuration (`self.downsample is not None`, `self.training`) is
  // decided now, as TorchScript does: the other branch may not even type-check for this module.
  if (std::optional<bool> known = static_condition(*s.test)) return block(*known ? s.body : s.orelse);
  if (std::optional<bool> known = dict_condition(*s.test)) return block(*known ? s.body : s.orelse);
  Value* c = to_condition(expr(*s.test), s.test->loc);
  auto run = [&](const std::vector<StmtPtr>& body, bool then_branch) {
    if (auto opt = refine_none(*s.test, then_branch)) {
      loc_ = s.test->loc;
      frame().env[s.test->args[0]->name] = prim(Prim::Unwrap, {*opt}, (*opt)->type().elems[0]);
    }
    block(body);
  };
  // A condition known at lowering time (`x is None` on a non-optional) still lowers both branches, so
  // both are type-checked; the interpreter takes the right one. An error of the then block leaves the else
  // block to be checked too.
  const Resume at = resume_point();
  const std::map<std::string, Value*> env = frame().env;
  bool in_else = false;
  on_code_error([&] {
    branch(c, [&] { run(s.body, true); }, [&] { in_else = true; run(s.orelse, false); }, always_exits(s.body),
           always_exits(s.orelse), s.loc);
  }, [&](const Error& e) {
    if (in_else || s.orelse.empty()) throw;
    if (first_error_.empty()) first_error_ = e.what();
    resume(at);
    frame().env = env;
    ++branch_depth_;
    const size_t mark = later_errors_.size();
    try {
      run(s.orelse, false);
    } catch (const UntypedParameter&) {
      throw;
    } catch (const Error& other) {
      note_later_error(other.what(), mark);
    }
    throw;
  });
}

void Lowerer::loop(Value* trip, Value* cond, const std::vector<StmtPtr>& body, const std::set<std::string>& assigned,
                   const BodyFn& prologue, const std::function<Value*()>& next_cond, SourceLoc loc) {
  Frame& F = frame();
  std::vector<std::string> carried;
  for (const std::string& k : assigned)
    if (F.env.count(k)) carried.push_back(k);
  for (auto& [k, v] : F.env)
    if (k.rfind("$buf:", 0) == 0) carried.push_back(k);
  LoopCtx ctx;
  unsigned flags = exits(body) & (kBrk | kCont);
  ++loop_depth_;
  if (flags & kBrk) {
    ctx.brk = fmt::format("$broke{}", loop_depth_);
    F.env[ctx.brk] = constant(false);
    F.env[ctx.brk]->set_name("broke");
    carried.push_back(ctx.brk);
  }
  if (flags & kCont) ctx.cont = fmt::format("$continued{}", loop_depth_);
  if ((exits(body) & kRet) && F.flag_returns && !std::count(carried.begin(), carried.end(), std::string(kReturned))) {
    carried.push_back(kReturned);
    carried.push_back(kRetValue);
  }
  Node* n = emit(g_->create(Prim::Loop, 0));
  n->line = loc.line;
  n->add_input(trip);
  n->add_input(cond);
  Block* b = n->add_block();
  Value* iter = b->add_input(Type::scalar(TypeKind::Int), "iter");
  std::map<std::string, Value*> before = F.env;
  std::vector<Type> types;
  for (const std::string& k : carried) {
    Value* init = F.env.at(k);
    n->add_input(init);
    types.push_back(init->type().is_tensor() ? Type::tensor() : init->type());
    F.env[k] = b->add_input(types.back(), ir_name(k));
    if (const auto* keys = dict_keys(init)) dict_keys_[F.env[k]] = *keys;
    if (init->type().kind == TypeKind::List)
      for (const auto& [o, v] : before)
        if (o[0] != '$' && o != k && v == init) shared_list_[F.env[k]] = o;
  }
  mark_merged_aliases(before, F.env, loc, "code before the loop");
  std::map<std::string, Value*> body_env;
  std::set<std::string> partial_before = F.partial;
  loops_.push_back(ctx);
  {
    ir::InsertPointGuard guard(*g_);
    g_->set_insert_point(b);
    if (!ctx.cont.empty()) {
      frame().env[ctx.cont] = constant(false);
      frame().env[ctx.cont]->set_name("continued");
    }
    prologue(iter);
    block(body);
    loc_ = loc;
    Value* c = next_cond();
    b->register_output(c);
    for (auto& [k, v] : frame().env)
      if (k.rfind("$buf:", 0) == 0 && !std::count(carried.begin(), carried.end(), k))
        fail(loc, "a batch norm in training mode runs inside this loop, which kiln script supports only when the same "
                  "buffer was updated before the loop; unroll it (for over a ModuleList) or move it out");
    for (size_t i = 0; i < carried.size(); ++i) {
      Value* v = frame().env.count(carried[i]) ? frame().env.at(carried[i]) : nullptr;
      if (!v)
        fail(loc, fmt::format("variable '{}' is not defined on every path through the loop body", carried[i]));
      bool optional_ret = carried[i] == kRetValue && types[i].kind == TypeKind::Optional &&
                          (v->type().kind == TypeKind::None || same_type(v->type(), types[i].elems[0]));
      if (!same_type(v->type(), types[i]) && !optional_ret)
        fail(loc, fmt::format("variable '{}' is {} before the loop and {} after an iteration; a loop must keep each "
                              "variable's type",
                              carried[i], types[i].str(), v->type().str()));
      b->register_output(v);
    }
    body_env = frame().env;
  }
  loops_.pop_back();
  --loop_depth_;
  Frame& F2 = frame();
  std::set<std::string> inner;
  for (auto& [k, v] : F2.env)
    if (!before.count(k)) inner.insert(k);
  F2.env = before;
  for (size_t i = 0; i < carried.size(); ++i) {
    Value* o = n->add_output(types[i].is_tensor() ? Type::tensor() : types[i]);
    o->set_name(ir_name(carried[i]));
    merge_dict(o, n->input(i + 2), body_env.at(carried[i]), carried[i], loc, "loop");
    F2.env[carried[i]] = o;
  }
  mark_merged_aliases(before, F2.env, loc, "code before the loop");
  mark_merged_aliases(body_env, F2.env, loc, "loop body");
  if (!ctx.brk.empty()) F2.env.erase(ctx.brk);
  if (!ctx.cont.empty()) F2.env.erase(ctx.cont);
  F2.partial = partial_before;
  for (const std::string& k : inner)
    if (k[0] != '$') F2.partial.insert(k);
}

// The loop continues while no break or return happened in this iteration, and `more` (a while
// condition) holds; `more` is evaluated only then, as Python would.
static Value* no_exit_and(Lowerer& L, Value* exited, const std::function<Value*()>& more, SourceLoc loc) {
  if (!exited) return more ? more() : L.constant(true);
  return L.if_value(exited, [&] { return L.constant(false); }, [&] { return more ? more() : L.constant(true); }, loc);
}

void Lowerer::while_stmt(const Stmt& s) {
  Value* c0 = to_condition(expr(*s.test), s.test->loc);
  std::set<std::string> assigned;
  assigned_names(s.body, assigned);
  Value* trip = constant(int64_t(INT64_MAX));
  loop(trip, c0, s.body, assigned, [](Value*) {},
       [&] {
         Value* exited = loops_.empty() ? nullptr : exit_condition(kRet | kBrk);
         return no_exit_and(*this, exited, [&] { return to_condition(expr(*s.test), s.test->loc); }, s.loc);
       },
       s.loc);
}

void Lowerer::for_stmt(const Stmt& s) {
  const Expr& it = *s.value;
  const Expr& target = *s.targets[0];
  std::set<std::string> assigned;
  assigned_names(s.body, assigned);
  auto next = [&] {
    Value* exited = exit_condition(kRet | kBrk);
    return no_exit_and(*this, exited, nullptr, s.loc);
  };
  if (it.kind == ExprKind::Call && it.args[0]->kind == ExprKind::Name && it.args[0]->name == "range" &&
      !frame().env.count("range")) {
    size_t n = it.args.size() - 1;
    if (n < 1 || n > 3 || !it.keywords.empty())
      fail(it.loc, fmt::format("range() takes 1 to 3 positional arguments, got {}", n + it.keywords.size()));
    if (target.kind != ExprKind::Name) fail(target.loc, "a for over range() needs one name as its target");
    std::vector<Value*> a;
    for (size_t i = 1; i <= n; ++i) {
      Value* v = expr(*it.args[i]);
      if (v->type().kind != TypeKind::Int && v->type().kind != TypeKind::Bool)
        fail(it.args[i]->loc, fmt::format("range() takes int arguments, got {}", v->type().str()));
      a.push_back(v);
    }
    loc_ = it.loc;
    Value* start = n >= 2 ? a[0] : nullptr;
    Value* stop = n >= 2 ? a[1] : a[0];
    int64_t step = 1;
    if (n == 3) {
      Arg sa{it.args[3].get(), nullptr, it.args[3]->loc};
      auto st = const_int(sa);
      if (!st) fail(it.args[3]->loc, "the step of range() must be an int constant in kiln script");
      if (*st == 0) fail(it.args[3]->loc, "range() step must not be zero");
      step = *st;
    }
    Type int_t = Type::scalar(TypeKind::Int);
    // trip = max(0, ceil((stop - start) / step))
    Value* span = start ? prim(Prim::NumSub, {stop, start}, int_t) : stop;
    Value* trip = span;
    if (step > 0 && step != 1)
      trip = prim(Prim::NumFloorDiv, {prim(Prim::NumAdd, {span, constant(step - 1)}, int_t), constant(step)}, int_t);
    if (step < 0)
      trip = prim(Prim::NumFloorDiv, {prim(Prim::NumSub, {constant(-step - 1), span}, int_t), constant(-step)}, int_t);
    trip = prim(Prim::Max, {trip, constant(int64_t(0))}, int_t);
    trip->set_name("trip");
    loop(trip, constant(true), s.body, assigned,
         [&](Value* iter) {
           Value* i = iter;
           if (step != 1) i = prim(Prim::NumMul, {i, constant(step)}, int_t);
           if (start) i = prim(Prim::NumAdd, {i, start}, int_t);
           assign(target, i, target.loc);
         },
         next, s.loc);
    return;
  }
  if (dict_for(s)) return;
  if (function_for(s)) return;
  // A tuple written in the for header is unrolled from its elements, without building the tuple.
  Value* seq = nullptr;
  if (it.kind == ExprKind::Tuple && !it.args.empty()) {
    std::vector<Value*> es;
    for (const auto& a : it.args) es.push_back(expr(*a));
    return unrolled_for(s, es.size(), [&](size_t k) { assign(target, es[k], target.loc); });
  }
  // `for name, layer in self.items()` over a class deriving from nn.ModuleDict (densenet's _DenseBlock):
  // unrolled in insertion order, the name a string constant.
  if (it.kind == ExprKind::Call && it.args.size() == 1 && it.keywords.empty() && it.args[0]->kind == ExprKind::Attribute) {
    const std::string& how = it.args[0]->name;
    const Object* o = static_object(*it.args[0]->args[0]);
    if (o && o->def && o->def->root()->torch_base == "ModuleDict" && (how == "items" || how == "values" || how == "keys")) {
      bool pairs = how == "items";
      if (pairs && (target.kind != ExprKind::Tuple || target.args.size() != 2))
        fail(target.loc, "a for over items() needs two names as its target: for name, module in self.items()");
      const Expr& module_target = pairs ? *target.args[1] : target;
      if (how != "keys" && module_target.kind != ExprKind::Name)
        fail(module_target.loc, "a for over modules needs one name as its target");
      return unrolled_for(s, o->items.size(), [&, o](size_t k) {
        if (how == "keys") return assign(target, g_->insert_constant(o->item_names[k]), target.loc);
        frame().modules[module_target.name] = o->items[k].get();
        frame().env.erase(module_target.name);
        if (pairs) assign(*target.args[0], g_->insert_constant(o->item_names[k]), target.args[0]->loc);
      });
    }
  }
  // A ModuleList or Sequential: unrolled, the target naming each module in turn (enumerate gives
  // the index too), as TorchScript does.
  {
    const Expr* seq_expr = &it;
    const Expr* index_target = nullptr;
    const Expr* module_target = &target;
    bool enumerated = it.kind == ExprKind::Call && it.args[0]->kind == ExprKind::Name && it.args[0]->name == "enumerate" &&
                      it.args.size() == 2 && !frame().env.count("enumerate");
    if (enumerated) {
      seq_expr = it.args[1].get();
      if (target.kind != ExprKind::Tuple || target.args.size() != 2)
        fail(target.loc, "a for over enumerate() needs two names as its target: for i, x in enumerate(...)");
      index_target = target.args[0].get();
      module_target = target.args[1].get();
    }
    if (const Object* o = static_object(*seq_expr)) {
      if (o->layer != Layer::ModuleList && o->layer != Layer::Sequential)
        fail(seq_expr->loc, fmt::format("cannot iterate over {} (a module); only ModuleList and Sequential are iterable", o->cls));
      if (module_target->kind != ExprKind::Name) fail(module_target->loc, "a for over modules needs one name as its target");
      return unrolled_for(s, o->items.size(), [&, o](size_t k) {
        frame().modules[module_target->name] = o->items[k].get();
        frame().env.erase(module_target->name);
        if (index_target) assign(*index_target, constant(int64_t(k)), index_target->loc);
      });
    }
    if (enumerated) fail(it.loc, "enumerate() is supported over a ModuleList or Sequential in kiln script");
  }
  seq = expr(it);
  loc_ = it.loc;
  const Type& t = seq->type();
  if (t.kind == TypeKind::List || t.kind == TypeKind::Tensor) {
    Value* trip = prim(Prim::Len, {seq}, Type::scalar(TypeKind::Int));
    loop(trip, constant(true), s.body, assigned,
         [&](Value* iter) {
           Value* e = t.kind == TypeKind::List ? prim(Prim::ListIndex, {seq, iter}, t.elems[0])
                                               : select_dynamic(seq, 0, iter);
           // torch's rows are views of the tensor iterated over; the loop does not carry it, so a write
           // through one cannot be followed.
           if (t.kind == TypeKind::Tensor)
             opaque_[e] = "it is a row of the tensor the for loop iterates over, which kiln script does not write "
                          "back; index it instead (for i in range(len(x)): x[i] += ...)";
           assign(target, e, target.loc);
         },
         next, s.loc);
    return;
  }
  if (t.kind == TypeKind::Tuple) {
    std::vector<Value*> elems;
    bool direct = seq->node()->prim() == Prim::TupleConstruct;
    for (size_t i = 0; i < t.elems.size(); ++i) {
      if (direct) {
        elems.push_back(seq->node()->input(i));
      } else {
        Node* ix = g_->create(Prim::TupleIndex, 1);
        ix->add_input(seq);
        ix->attrs().set("index", int64_t(i));
        ix->output()->set_type(t.elems[i]);
        elems.push_back(emit(ix)->output());
      }
    }
    return unrolled_for(s, elems.size(), [&](size_t k) { assign(target, elems[k], target.loc); });
  }
  fail(it.loc, fmt::format("cannot iterate over {}; kiln script loops over range(), tuples, lists and tensors",
                           t.str()));
}

// Unrolled: a tuple's elements may differ in type. Break, continue and return work through the same
// flags, guarding the iterations after one that may exit.
// Unrolled: a tuple's elements may differ in type, and a ModuleList's modules are different code.
// Break, continue and return work through the same flags, guarding the iterations after one that may
// exit.
void Lowerer::unrolled_for(const Stmt& s, size_t n, const std::function<void(size_t)>& bind) {
  if (n > 256 && (exits(s.body) & (kRet | kBrk)))
    fail(s.value->loc, "a for over a tuple of more than 256 elements cannot break or return (it is unrolled)");
  LoopCtx ctx;
  ++loop_depth_;
  unsigned flags = exits(s.body);
  if (flags & kBrk) {
    ctx.brk = fmt::format("$broke{}", loop_depth_);
    frame().env[ctx.brk] = constant(false);
  }
  if (flags & kCont) ctx.cont = fmt::format("$continued{}", loop_depth_);
  loops_.push_back(ctx);
  bool may_exit = exits(s.body) & (kRet | kBrk);
  std::function<void(size_t)> unroll = [&](size_t from) {
    for (size_t k = from; k < n; ++k) {
      if (!loops_.back().cont.empty()) frame().env[loops_.back().cont] = constant(false);
      bind(k);
      block(s.body);
      if (k + 1 == n || !may_exit) continue;
      // The iterations after one that may break or return run only when it did not.
      loc_ = s.loc;
      Value* exited = exit_condition(kRet | kBrk);
      branch(exited, [] {}, [&] { unroll(k + 1); }, true, false, s.loc);
      return;
    }
  };
  unroll(0);
  loops_.pop_back();
  --loop_depth_;
  if (!ctx.brk.empty()) frame().env.erase(ctx.brk);
  if (!ctx.cont.empty()) frame().env.erase(ctx.cont);
}

void Lowerer::return_stmt(const Stmt& s) {
  Value* v = nullptr;
  if (s.value) {
    v = expr(*s.value);
    loc_ = s.loc;
  } else {
    v = g_->insert_none();
  }
  Frame& F = frame();
  SourceLoc at = s.value ? s.value->loc : s.loc;
  if (F.infer_ret) {
    F.ret_type = v->type().is_tensor() ? Type::tensor() : v->type();
    F.infer_ret = false;
  }
  if (!fits_declared(v->type(), F.ret_type))
    fail(at, fmt::format("function '{}' is declared to return {} but returns {}", F.def->name, F.ret_type.str(),
                         v->type().str()));
  v = coerce(v, F.ret_type, at, "return");
  if (!frame().flag_returns) {
    frame().final_return = v;
    return;
  }
  frame().env[kRetValue] = v;
  frame().env[kReturned] = constant(true);
}

void Lowerer::assert_stmt(const Stmt& s) { check_assert(*s.test, s.value.get(), "AssertionError", s.loc); }

// `assert test, message` and torch._assert(test, message): a raise with `what` and the message where test is false.
void Lowerer::check_assert(const Expr& test, const Expr* message, const std::string& what, SourceLoc at) {
  Value* c = to_condition(expr(test), test.loc);
  std::string msg = what;
  if (message) {
    msg = what + ": " + raise_message(*message);
  }
  loc_ = at;
  Node* n = emit(g_->create(Prim::If, 0));
  n->add_input(c);
  n->add_block();
  Block* no = n->add_block();
  ir::InsertPointGuard guard(*g_);
  g_->set_insert_point(no);
  Node* r = g_->create(Prim::Raise, 0);
  r->attrs().set("message", fmt::format("{}:{}: {}", src_->name, at.line, msg));
  emit(r);
}

// ---------------------------------------------------------------- entry

namespace {
// A function inlined into others fails in each: its error is reported once.
void report_once(std::vector<std::string>& errors, const std::string& e) {
  if (std::find(errors.begin(), errors.end(), e) == errors.end()) errors.push_back(e);
}

// One function's graph (null when it failed), its errors appended to errors once each.
std::shared_ptr<ir::Graph> lower_reporting(const Source& src, const FileAst& m, const FunctionDef& f, std::vector<std::string>& errors,
                                           std::set<RecursionError::Cycle>* cycles, std::shared_ptr<const File> file = nullptr) {
  auto report = [&](const std::string& e) { report_once(errors, e); };
  Lowerer L(src, m);
  L.set_file(std::move(file));
  std::shared_ptr<ir::Graph> g;
  try {
    g = L.lower_function(f);
  } catch (const RecursionError& e) {
    if (!cycles || cycles->insert(e.cycle).second) report(e.what());
  } catch (const Error& e) {
    report(e.what());
  }
  for (const std::string& e : L.later_errors()) report(e);
  return g;
}
}  // namespace

std::shared_ptr<ir::Graph> lower_one(const Source& src, const FileAst& m, const FunctionDef& f, std::vector<std::string>& errors,
                                     std::shared_ptr<const File> file) {
  return lower_reporting(src, m, f, errors, nullptr, std::move(file));
}

std::map<std::string, std::shared_ptr<ir::Graph>> lower(const Source& src, const FileAst& m, std::vector<std::string>& errors,
                                                         const std::function<bool(const FunctionDef&)>& which,
                                                         std::shared_ptr<const File> file) {
  std::map<std::string, std::shared_ptr<ir::Graph>> out;
  std::set<RecursionError::Cycle> cycles;  // each reported once, whichever function meets it first
  for (const auto& f : m.functions) {
    // A dict-taking function is lowered where a function of the file calls it (ScriptFile::function
    // says so); an ignored or unused one never.
    if (dict_param(*f) || jit_mark(*f) == JitMark::Ignore || jit_mark(*f) == JitMark::Unused || (which && !which(*f))) {
      out.erase(f->name);
      continue;
    }
    out[f->name] = lower_reporting(src, m, *f, errors, &cycles, file);
  }
  return out;
}

std::map<std::string, std::shared_ptr<ir::Graph>> lower(const Source& src, const FileAst& m) {
  std::vector<std::string> errors;
  auto out = lower(src, m, errors);
  raise_all(errors);
  return out;
}

}  // namespace kiln::script
