#pragma once
// The lowering state shared by the statement/expression lowering (lower.cpp) and the table of torch
// functions and tensor methods (builtins.cpp). Internal to script_frontend.
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/ir/graph.h"
#include "script_frontend/ast.h"
#include "script_frontend/objects.h"
#include "script_frontend/source.h"

namespace kiln::script {

// A value known while lowering, without emitting nodes: a literal, an inlined constant, a module's attribute.
using KnownValue = std::variant<bool, int64_t, double, std::string>;

using ir::Type;
using ir::TypeKind;
using ir::Value;

// One argument of a builtin call as the caller wrote it: the expression (lowered on demand, so
// attribute arguments can be read as constants) or, for a method's self, the lowered value.
struct Arg {
  const Expr* expr = nullptr;
  Value* value = nullptr;
  SourceLoc loc;
  bool present() const { return expr || value; }
};

// A call cycle among the file's functions (they are inlined, so recursion cannot be lowered); the
// cycle lets a file with one report it once.
struct RecursionError : Error {
  using Cycle = std::set<const FunctionDef*>;
  RecursionError(const std::string& msg, Cycle c) : Error(msg), cycle(std::move(c)) {}
  Cycle cycle;
};

// A method of a module object lowered to a graph: its inputs are the method's parameters, then the
// parameters and buffers it reads (`bound`, in that order); in training mode its trailing outputs are
// the new values of buffers it updates (batch norm's running statistics), one per writeback.
struct MethodGraph {
  std::shared_ptr<ir::Graph> graph;
  std::vector<Tensor> bound;
  std::vector<std::pair<size_t, size_t>> writebacks;  // (graph input, graph output)
};

class Lowerer {
 public:
  Lowerer(const Source& src, const FileAst& m);
  std::shared_ptr<ir::Graph> lower_function(const FunctionDef& f);
  // arg_types: for a method called with known arguments (ScriptedModule::call), the type of each
  // argument after self; an unannotated parameter takes it (an int, a float, None) instead of Tensor.
  MethodGraph lower_method(const FunctionDef& f, const Object& self, const std::vector<Type>& arg_types = {});
  // After lower_function raised: the errors of the function's later top-level statements that do not
  // read a name a failed statement assigns (clang-style: independent mistakes all reported, no cascades).
  const std::vector<std::string>& later_errors() const { return later_errors_; }

  // ---- used by builtins.cpp ----
  const Source& src() const { return *src_; }
  [[noreturn]] void fail(SourceLoc loc, std::string_view msg) const { src_->fail(loc, msg); }
  ir::Graph& graph() { return *g_; }
  Value* expr(const Expr& e);
  Value* value_of(const Arg& a) { return a.value ? a.value : expr(*a.expr); }
  // The argument as a tensor; numbers become wrapped 0-d tensors (prim::tensor) when numbers_ok.
  Value* tensor_arg(const Arg& a, std::string_view what, bool numbers_ok = false);
  Value* number_to_tensor(Value* v);
  // Compile-time constants for op attributes: literals or names bound to constants.
  std::optional<int64_t> const_int(const Arg& a);
  std::optional<double> const_float(const Arg& a);
  std::optional<bool> const_bool(const Arg& a);
  std::optional<std::string> const_str(const Arg& a);
  // An int or a tuple/list of ints.
  std::optional<std::vector<int64_t>> const_ints(const Arg& a);
  int64_t need_int(const Arg& a, std::string_view what);
  bool need_bool(const Arg& a, std::string_view what);
  std::vector<int64_t> need_ints(const Arg& a, std::string_view what);
  // Graph building at the current insertion point; nodes get the current source line.
  ir::Node* emit(ir::Node* n);
  Value* op(OpId id, const std::vector<Value*>& inputs, Attrs attrs = {});
  Value* prim(ir::Prim p, const std::vector<Value*>& inputs, Type out);
  Value* constant(int64_t v);
  Value* constant(double v);
  Value* constant(bool v);
  Value* tuple(const std::vector<Value*>& elems);
  // torch.return_types.<fn> (topk, sort, max, min, median, kthvalue): (values, indices), also read by name
  Value* values_indices(const std::string& fn, Value* values, Value* indices);
  // x[i] along dim with i a runtime int (negative counts from the end).
  Value* select_dynamic(Value* x, int64_t dim, Value* index);
  // If(cond) with a value from each branch, which must have the same type.
  Value* if_value(Value* cond, const std::function<Value*()>& then_fn, const std::function<Value*()>& else_fn,
                  SourceLoc loc);
  Value* to_condition(Value* v, SourceLoc loc);
  SourceLoc loc() const { return loc_; }
  // x.device: a value only factories' device= takes (a graph makes its tensors where it runs), typed None
  // so that nothing else can compute with it.
  Value* device_value() {
    Value* v = g_->insert_none();
    devices_.insert(v);
    return v;
  }
  bool is_device(Value* v) const { return devices_.count(v) != 0; }
  // A dtype as a value: torch.float16 (an int constant) or x.dtype (prim::dtype, known when the graph runs),
  // both kiln's DType code, so `x.dtype == torch.float16` compares ints; a factory's dtype= and Tensor.to
  // take either (a runtime one through prim::cast).
  Value* dtype_value(Value* code) {
    dtypes_.insert(code);
    return code;
  }
  bool is_dtype(Value* v) const { return dtypes_.count(v) != 0; }
  // The number of names a call's result is unpacked into (`q, k, v = x.split(n, dim=2)`), or 0: what
  // torch decides from the size at run time, the lowering takes from the names.
  size_t unpack_count(const Expr& call) const { return &call == unpack_call_ ? unpack_count_ : 0; }
  const FileAst& module() const { return *m_; }
  // The File that src() and module() belong to, for module-level names lowered code reads.
  void set_file(std::shared_ptr<const File> f) { file_ = std::move(f); }

  // ---- module objects (used by layers.cpp)
  // A parameter, buffer or tensor attribute of a module: its graph input (added on first use) or,
  // for a buffer updated earlier in this graph, its current value.
  Value* tensor_of(const Static& t, const std::string& name);
  // A buffer's new value from here on (written back after each call).
  void update_buffer(const Tensor& t, Value* v);
  // The module object an expression names at lowering time (self, self.fc, self.layers[2], a loop
  // variable over a ModuleList), or null.
  const Object* static_object(const Expr& e);
  Value* call_object(const Object& o, const Expr& call);
  // Arguments already lowered: a call of a module or method with values (Sequential's chain).
  struct CallArgs {
    struct Kw {
      std::string name;
      Value* value;
      SourceLoc loc;
    };
    std::vector<Value*> pos;
    std::vector<SourceLoc> pos_locs;
    std::vector<Kw> kw;
  };
  Value* call_object(const Object& o, const CallArgs& a, SourceLoc loc);
  // x[i0, i1] with index tensors on adjacent dims (exprs.cpp): `lowered` holds the index values already lowered
  Value* index_tensors(Value* x, const Expr& e, const std::vector<size_t>& tensors, const std::map<const Expr*, Value*>& lowered);
  // A method's unannotated parameter typed Tensor by default (no call's argument typed it).
  bool untyped_parameter(Value* v) const { return untyped_params_.count(v) != 0; }
  // An error that a Tensor in an untyped parameter caused (an LSTM state that must be a tuple): module()
  // leaves forward to be typed by its first call's arguments instead of failing.
  struct UntypedParameter : Error {
    using Error::Error;
  };
  // nn.parallel.data_parallel(module, inputs, ...): the module called on the inputs (data_parallel.cpp)
  bool is_data_parallel(const Expr& fn);
  Value* data_parallel(const Expr& call);
  // A runtime check: raises `message` (with the file and line) when cond is false.
  void check(Value* cond, const std::string& message);
  // packed_sequences.cpp: a torch.nn.utils.rnn PackedSequence as lowered code keeps it (padded steps [T, N, *]
  // time-major, lengths int64 [N]), and its two parts; nullopt for a value that is not one. `enforce_sorted`: it was
  // packed so (its sorted_indices and unsorted_indices are None, as torch's).
  Value* packed_value(Value* padded, Value* lengths, bool enforce_sorted);
  std::optional<std::pair<Value*, Value*>> packed_parts(Value* v);
  bool packed_enforce_sorted(Value* v) const { return packed_.at(v); }

  // ---- writes through views (inplace.cpp)
  // How an indexing view was made from its base, so a write to it can be scattered back.
  struct ViewStep {
    enum Kind : uint8_t { Select, Slice, Unsqueeze } kind = Select;
    int64_t dim = 0;
    Value* index = nullptr;              // Select: an int value
    Value *start = nullptr, *end = nullptr;  // Slice: int values, null when absent
    int64_t step = 1;
  };
  // Records that `view` is base[step] (tensor_index calls it for every index it applies).
  void record_view(Value* view, Value* base, const ViewStep& step);
  // `target op= rhs` (op empty: plain `target[...] = rhs`) for a tensor target: the new value is
  // written through every name that shares its memory, as torch's in-place ops are seen.
  void write_inplace(const Expr& target, std::optional<PyOp> op, const Expr& rhs, SourceLoc loc);
  // x.add_(y), x.relu_(), ...: the out-of-place result cast to x's dtype, written through x.
  Value* inplace_method(const Expr& call, Value* self, const std::string& name);

 private:
  // A function being lowered (the top one or an inlined callee): its variables and exit flags.
  struct Frame {
    const FunctionDef* def;
    Type ret_type;
    const Object* self = nullptr;                  // methods: the module object
    std::map<std::string, const Object*> modules;  // names bound to module objects
    // names bound to lambdas kept in a list on self (a for over it), with the module that keeps them
    std::map<std::string, std::pair<const Static*, const Object*>> functions;
    bool infer_ret = false;                        // no return annotation: the type of the return
    bool flag_returns = false;  // returns other than a final one: lowered with returned/ret_value
    std::map<std::string, Value*> env;
    std::set<std::string> partial;  // names defined on some paths only, for a precise error
    Value* final_return = nullptr;  // the value of the one final return (flag_returns false)
  };
  struct LoopCtx {
    std::string brk, cont;  // flag variable names, empty when the body has no break / continue
  };
  enum Flag : unsigned { kRet = 1, kBrk = 2, kCont = 4 };

  // statements
  void block(const std::vector<StmtPtr>& body, size_t from = 0);
  void stmt(const Stmt& s);
  void assign(const Expr& target, Value* v, SourceLoc loc);
  void assign_from_expr(const Expr& target, const Expr& value);
  void if_stmt(const Stmt& s);
  void while_stmt(const Stmt& s);
  void for_stmt(const Stmt& s);
  void unrolled_for(const Stmt& s, size_t n, const std::function<void(size_t)>& bind);
  std::shared_ptr<ir::Graph> lower_top(const FunctionDef& f, const Object* self);
  Frame new_frame(const FunctionDef& f, const Object* self);
  // A condition decided now (static_conditions.cpp): the one evaluator of values known while lowering.
  std::optional<bool> static_condition(const Expr& test);
  std::optional<KnownValue> known_value(const Expr& e);
  std::optional<bool> none_test(const Expr& test);
  Value* object_attribute(const Object& o, const std::string& attr, SourceLoc loc);
  Value* static_value(const Static& v, const std::string& name, SourceLoc loc);
  Value* buffer_input(const std::string& var);
  void return_stmt(const Stmt& s);
  void assert_stmt(const Stmt& s);
  void check_assert(const Expr& test, const Expr* message, const std::string& what, SourceLoc at);
  void raise_stmt(const Stmt& s);
  std::string raise_message(const Expr& e);
  std::optional<bool> isinstance_known(const Expr& call);
  Value* list_repeat(Value* xs, Value* n);
  Value* list_binary(PyOp op, Value* a, Value* b);  // null when not list + list, list * int
  // Lowers an If whose branches run then_fn / else_fn on copies of the environment and merges the
  // variables they assign into the If's outputs.
  void branch(Value* cond, const std::function<void()>& then_fn, const std::function<void()>& else_fn,
              bool then_exits, bool else_exits, SourceLoc loc);
  using BodyFn = std::function<void(Value* iter)>;
  void loop(Value* trip, Value* cond, const std::vector<StmtPtr>& body, const std::set<std::string>& assigned,
            const BodyFn& prologue, const std::function<Value*()>& next_cond, SourceLoc loc);
  unsigned exits(const Stmt& s) const;  // the flags s may set (break/continue of this loop only)
  unsigned exits(const std::vector<StmtPtr>& b) const;
  bool always_exits(const std::vector<StmtPtr>& b) const;
  bool always_returns(const std::vector<StmtPtr>& b) const;
  // Whether b returns only at its end once its ifs on the module's configuration are decided (methods.cpp).
  bool returns_at_end(const std::vector<StmtPtr>& b);
  Value* exit_condition(unsigned flags);
  void assigned_names(const std::vector<StmtPtr>& b, std::set<std::string>& out) const;
  void assigned_names(const Stmt& s, std::set<std::string>& out) const;
  void target_names(const Expr& t, std::set<std::string>& out) const;
  // Where a statement of a block starts: what checking the statements after a failed one restores (a failed
  // statement can stop anywhere, inside an inlined call or a loop it lowers).
  struct Resume {
    std::vector<LoopCtx> loops;
    int loop_depth = 0, branch_depth = 0;
    size_t inlining = 1;
    size_t frames = 1;  // the frame of the block that recovers: the function's own, or an inlined call's
    ir::Node* insert = nullptr;
    std::map<Value*, std::string> param_of;
  };
  Resume resume_point() const;
  void resume(const Resume& at);
  void recover_after(const std::vector<StmtPtr>& body, size_t failed, const Resume& at);
  [[noreturn]] void fail_return_paths(const FunctionDef& f, const std::string& message);
  // Runs lower; an error of the code goes to on_error (which may note it and rethrow). What is not an error of
  // the code passes through: an UntypedParameter (the caller lowers the function again, typed by a call) and
  // a RecursionError (reported once per cycle by check_all).
  template <class Lower, class OnError>
  void on_code_error(Lower&& lower, OnError&& on_error) {
    try {
      lower();
    } catch (const UntypedParameter&) {
      throw;
    } catch (const RecursionError&) {
      throw;
    } catch (const Error& e) {
      on_error(e);
    }
  }
  void note_later_error(const std::string& e, size_t at);  // at: its place among the later errors (file order)
  // Before a list mutation rebinds every name of the list: refused inside an if or a loop when another
  // name shares it, since the branch's merge would unlink the names without a word.
  void check_list_shared(Value* xs, const std::string& name, SourceLoc loc);
  // dicts.cpp: a dict is a tuple of its values; dict_keys_ holds its keys
  const std::vector<std::string>* dict_keys(Value* v) const;
  Value* make_dict(const std::vector<std::string>& keys, const std::vector<Value*>& values);
  std::vector<Value*> dict_values(Value* d);
  std::string dict_key(const Expr& key);
  Value* dict_literal(const Expr& e);
  Value* dict_get(Value* d, const Expr& key);
  void dict_store(const Expr& target, std::optional<PyOp> op, const Expr& rhs, SourceLoc loc);
  Value* dict_argument(const Param& p, const FunctionDef& f, Value* arg, SourceLoc loc);
  // list_store.cpp: xs[i] = v
  void list_store(const Expr& target, std::optional<PyOp> op, const Expr& rhs, SourceLoc loc);
  bool dict_for(const Stmt& s);  // false when s does not loop over a dict
  // `"k" in d` / `not in` as an if's test: decided now (a branch may add the key, changing d's type).
  std::optional<bool> dict_condition(const Expr& test);
  // An If or Loop output `out` merging a and b: it is a dict when they are, with the same keys.
  void merge_dict(Value* out, Value* a, Value* b, const std::string& var, SourceLoc loc, const char* where);
  Value* list_contains(Value* list, Value* x, SourceLoc loc);
  // inplace.cpp
  // Scatters `updated` (the view's new value; `fresh` when made for this write, so it stays a view
  // of the new base) up to the root and rebinds every name aliasing it; the new value of `view`.
  Value* write_through(Value* view, Value* updated, SourceLoc loc, const std::string& what, bool fresh);
  Value* copy_into(Value* self, Value* src);  // self.copy_(src): src broadcast and cast to self
  std::string described(const Expr& target) const;
  Value* alias_root(Value* v) const;  // following indexing views and the view ops
  // After an If or Loop merges `names`, their new values lose the aliasing the old ones had: a later
  // write through them is refused (`opaque_`) where that aliasing could be seen.
  void mark_merged_aliases(const std::map<std::string, Value*>& env, const std::map<std::string, Value*>& merged,
                           SourceLoc loc, const char* where);

  // expressions
  Value* name(const Expr& e);
  Value* binary(PyOp op, Value* a, Value* b, SourceLoc loc);
  Value* compare(PyOp op, const Expr& ea, Value* a, const Expr& eb, Value* b, SourceLoc loc);
  Value* unary(const Expr& e);
  Value* bool_op(const Expr& e, size_t from);
  Value* compare_chain(const Expr& e, size_t from, Value* left);
  Value* subscript(const Expr& e);
  // `as_colon`: one of e's indices read as ':' (a write's tensor index, put after the view the others make), the dim
  // it lands on in the result stored in *colon_dim (negative after '...')
  Value* tensor_index(Value* x, const Expr& e, const Expr* as_colon = nullptr, int64_t* colon_dim = nullptr);
  Value* call(const Expr& e);
  Value* attribute(const Expr& e);
  Value* square_subsequent_mask_call(const Expr& e);
  // file: the callee's file when it is not the caller's (its names are read there); closure: the values a
  // lambda captured, which its parameters shadow
  struct Closure {
    std::vector<std::pair<std::string, Value*>> values;
    std::map<std::string, const Object*> modules;  // `self` or a module local the lambda read
  };
  Value* inline_call(const FunctionDef& f, const Expr& call, const Object* self = nullptr, const File* file = nullptr,
                     const Closure* closure = nullptr);
  Value* inline_values(const FunctionDef& f, const CallArgs& a, SourceLoc call_loc, const Object* self,
                       const File* file = nullptr, const Closure* closure = nullptr);
  // module_globals.cpp: a module-level constant or relatively imported name the current file binds (null when
  // the name is neither), evaluated once per lowering; a function value (a def of another file, a lambda)
  // called: inlined in its file with what it captured
  const ModuleGlobal* module_global(const std::string& name, SourceLoc loc);
  const Static* global_static(const Expr& e);  // e a Name of a module-level value (not a local): that value
  // `helpers.NAME` where helpers is a module of the package (`from . import helpers`): NAME in its file
  const ModuleGlobal* module_attribute(const Expr& e);
  const ModuleGlobal* global_of(const std::shared_ptr<const File>& file, const std::string& name, SourceLoc loc, bool attribute);
  std::shared_ptr<const File> current_file() const;
  Value* call_function_value(const Static& fn, const Expr& call, const File* home, const std::string& name);
  // function_values.cpp: lambdas and functions kept in a list, tuple or dict on self (`self.post[0](x)`,
  // `self.scores[self.kind](x)`, `for f in self.post: x = f(x)`), picked while lowering and inlined
  const Static* kept_function(const Expr& callee, const Object** owner, std::string* name);
  bool function_for(const Stmt& s);
  Value* placeholder(const Type& t);
  // A call to a @torch.jit.unused / ignore function: a node raising at run time, and a stand-in result.
  Value* call_jit_marked(const FunctionDef& f, SourceLoc call_loc);
  Value* fold_ints(ir::Prim p, Value* a, Value* b);
  std::optional<int64_t> static_int(const Expr& e);
  Value* coerce(Value* v, const Type& want, SourceLoc loc, std::string_view what);
  std::optional<Value*> refine_none(const Expr& test, bool then_branch);
  // namedtuples.cpp: `Outputs(x, aux)` as a tuple of the declared field types, `out.logits`
  Type namedtuple_type(const NamedTupleDef& def);
  Value* construct_namedtuple(const NamedTupleDef& def, const Expr& call);
  std::optional<Value*> namedtuple_field(Value* x, const std::string& field, SourceLoc loc);
  void note_namedtuple(Value* v, const TypeExpr& annotation);  // a value annotated as one reads its fields by name
  // annotate.cpp: `value` typed by the annotation t (an empty list or dict takes it); `what` names it in errors
  Value* annotated(const TypeExpr& t, const Expr& value, const std::string& what);
  Value* jit_annotate(const Expr& call);  // torch.jit.annotate(T, x)

  const Source* src_;  // the file whose code is lowered now: the model's, or the file of an inlined method's class
  const FileAst* m_;
  std::shared_ptr<ir::Graph> g_;
  std::deque<Frame> frames_;  // a deque: inlining pushes frames while outer ones are referenced
  std::vector<LoopCtx> loops_;
  const std::vector<StmtPtr>* top_body_ = nullptr;  // the function's own body (not an inlined one's)
  size_t top_index_ = 0;                            // the top-level statement being lowered
  std::vector<std::string> later_errors_;
  std::string first_error_;  // the error that propagates (later ones equal to it are not noted again)
  std::vector<Tensor> bound_;                           // tensors read by this graph, in input order
  std::map<const TensorImpl*, Value*> bound_inputs_;    // their graph inputs
  const Expr* unpack_call_ = nullptr;
  size_t unpack_count_ = 0;
  std::set<Value*> devices_;                            // what x.device gave
  std::set<Value*> dtypes_;                             // dtype values (dtype_value)
  std::map<const TensorImpl*, Tensor> tied_;            // a layer's replaced parameters: the tensor now used
  std::map<const TensorImpl*, std::string> buffer_vars_;  // updated buffers: their env variable
  std::vector<std::pair<size_t, size_t>> writebacks_;
  std::vector<const FunctionDef*> inlining_;
  std::map<Value*, std::pair<Value*, ViewStep>> views_;  // indexing views: base and step
  std::map<Value*, std::string> opaque_;                // values a write must not go through: why
  std::map<Value*, std::string> param_of_;
  std::set<Value*> untyped_params_;
  std::vector<Type> arg_types_;  // lower_method's, for the method being lowered
  std::map<Value*, std::vector<std::string>> dict_keys_;              // function parameters' values: the function
  int loop_depth_ = 0;
  int branch_depth_ = 0;  // if blocks being lowered (written ones and the guards of early exits)
  std::map<const Value*, const NamedTupleDef*> named_tuples_;  // tuples whose elements have names
  std::map<Value*, bool> packed_;                               // PackedSequence values (packed_value): enforce_sorted
  std::map<Value*, std::string> shared_list_;  // a loop's carried list: a name that held it before the loop
  SourceLoc loc_;
  std::shared_ptr<const File> file_;
  std::map<std::pair<const FileAst*, std::string>, ModuleGlobal> globals_;  // module_global's answers
  std::vector<std::shared_ptr<const File>> files_;  // files their evaluation read (owning the inlined defs)

  Frame& frame() { return frames_.back(); }
  friend Value* call_builtin(Lowerer& L, const std::string& qualified, const Expr& call, Value* self);
};

// `torch.jit.is_scripting()` (methods.cpp): true in lowered code.
bool is_scripting_call(const Expr& e);
// `torch.jit.annotate(T, x)` (or `jit.annotate` after `from torch import jit`), in lowered code and __init__.
bool is_jit_annotate(const Expr& call);

// Type helpers (types.cpp)
// A namedtuple of the file (m.namedtuples) is the tuple of its field types.
Type type_from_annotation(const Source& src, const TypeExpr& t, const FileAst& m);
bool is_number(const Type& t);  // int, float, bool
bool same_type(const Type& a, const Type& b);  // tensors of any dtype/shape count as one type
// Edit-distance suggestion: "; did you mean X?" or "".
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

// builtins.cpp: torch.<name>(...) when self is null and qualified starts with "torch.",
// torch.nn.functional.<name> when it starts with "F.", a tensor method otherwise. Raises with a
// suggestion for unknown names.
Value* call_builtin(Lowerer& L, const std::string& qualified, const Expr& call, Value* self);
// packed_sequences.cpp: torch.nn.utils.rnn.<name>(...) (pack_padded_sequence, pad_packed_sequence).
Value* call_rnn_utils(Lowerer& L, const std::string& name, const Expr& call);
// layers.cpp: a torch.nn layer called on its arguments.
Value* call_layer(Lowerer& L, const Object& o, const Lowerer::CallArgs& a, SourceLoc loc);
// Composites for layers and functional calls (builtins.cpp); most are eager/composites.h's, lowered on a LoweringBuilder.
Value* softmax_of(Lowerer& L, Value* x, int64_t dim, bool log);
Value* dropout_of(Lowerer& L, Value* x, double p, bool training);
// nn.Transformer.generate_square_subsequent_mask(sz): float (sz, sz), -inf above the diagonal, sz read when the graph runs
Value* square_subsequent_mask_of(Lowerer& L, Value* sz);
Value* layer_norm_of(Lowerer& L, Value* x, const Shape& normalized_shape, Value* weight, Value* bias, double eps);
Value* linear_of(Lowerer& L, Value* x, Value* weight, Value* bias);
// x.<attr> for tensors (shape, T); nullopt when not an attribute.
std::optional<Value*> tensor_attribute(Lowerer& L, Value* x, const std::string& attr, SourceLoc loc);
// torch.float16 and the other dtype names as written (torch.<name>); nullopt for anything else.
std::optional<DType> torch_dtype(const Expr& e);
// Names of builtins (for suggestions).
std::vector<std::string> builtin_names(bool methods);
// Whether lowered code has torch.nn.functional.<name>.
bool functional_exists(const std::string& name);

}  // namespace kiln::script
