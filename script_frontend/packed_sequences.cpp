// torch.nn.utils.rnn in lowered code: `pack_padded_sequence(x, lengths, ...)`, a recurrent layer called on
// the packed value, `pad_packed_sequence(out, ...)`, as published packed-sequence classifiers write them.
//
// A graph has no op whose output size is data (sum(lengths) packed rows), so a packed value here stays
// padded: a tuple (steps [T, N, *] time-major in the caller's batch order, lengths int64 [N]) that the lowerer
// remembers as packed. The rnn_layer node takes the lengths and runs each row its own number of steps in any
// order (eager/cpu/rnn.cpp), which gives torch's outputs and final states without sorting; pad_packed_sequence
// cuts the steps to the longest length, as torch's does. .data and .batch_sizes are computed from the padded steps
// when they are read (a bool mask of the steps each row has, sorted by length as torch sorts the batch), and
// .sorted_indices / .unsorted_indices from the lengths (None for a batch packed with enforce_sorted, as torch's).
// pad_sequence and pack_sequence take a list written out (its elements known when lowering).
#include "script_frontend/packed_sequences.h"

#include <fmt/format.h>

#include "eager/composites_tensor_ops.h"
#include "script_frontend/lowering_builder.h"

namespace kiln::script {

using ir::Prim;

namespace {

const Type kInt = Type::scalar(TypeKind::Int);
const Type kBool = Type::scalar(TypeKind::Bool);

// The call's arguments bound to `names` as Python binds them; unset ones have no expression.
std::vector<Arg> bind(Lowerer& L, const std::string& fn, const Expr& e, const std::vector<std::string>& names, size_t required) {
  std::vector<Arg> r(names.size());
  if (e.args.size() - 1 > names.size())
    L.fail(e.loc, fmt::format("{}() takes at most {} arguments, got {}", fn, names.size(), e.args.size() - 1));
  for (size_t i = 1; i < e.args.size(); ++i) r[i - 1] = Arg{e.args[i].get(), nullptr, e.args[i]->loc};
  for (const Keyword& k : e.keywords) {
    auto it = std::find(names.begin(), names.end(), k.name);
    if (it == names.end()) L.fail(k.loc, fmt::format("{}() got an unexpected keyword argument '{}'", fn, k.name));
    Arg& a = r[size_t(it - names.begin())];
    if (a.present()) L.fail(k.loc, fmt::format("{}() got multiple values for argument '{}'", fn, k.name));
    a = Arg{k.value.get(), nullptr, k.loc};
  }
  for (size_t i = 0; i < required; ++i)
    if (!r[i].present()) L.fail(e.loc, fmt::format("{}() is missing required argument '{}'", fn, names[i]));
  return r;
}

bool is_none(const Arg& a) { return !a.present() || (a.expr && a.expr->kind == ExprKind::None); }

// One int of a tensor's reduction, read when the graph runs.
Value* reduced_int(Lowerer& L, OpId op, Value* t) {
  return L.prim(Prim::ToInt, {L.op(op, {t}, Attrs().set("dims", Shape{}).set("keepdim", false))}, kInt);
}

// pack_padded_sequence's work, also pack_sequence's: x [T, N, *] (or [N, T, *] with batch_first), lengths [N]
Value* pack(Lowerer& L, const char* fn, Value* x, Value* lengths, bool batch_first, bool enforce_sorted) {
  if (batch_first) x = L.prim(Prim::Transpose, {x, L.constant(int64_t(0)), L.constant(int64_t(1))}, Type::tensor());
  lengths = L.op(OpId::Cast, {lengths}, Attrs().set("dtype", DType::Int64));
  // torch's checks, when the graph runs (the lengths are data)
  Value* n = L.prim(Prim::Size, {x, L.constant(int64_t(1))}, kInt);
  L.check(L.prim(Prim::NumEq, {L.prim(Prim::Size, {lengths, L.constant(int64_t(0))}, kInt), n}, kBool),
          fmt::format("{}: expected `len(lengths)` to be equal to batch_size", fn));
  L.check(L.prim(Prim::NumGt, {reduced_int(L, OpId::Amin, lengths), L.constant(int64_t(0))}, kBool),
          fmt::format("{}: length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0", fn));
  Value* steps = L.prim(Prim::Size, {x, L.constant(int64_t(0))}, kInt);
  L.check(L.prim(Prim::NumLe, {reduced_int(L, OpId::Amax, lengths), steps}, kBool),
          fmt::format("{}: a length is greater than the input's steps (dim {})", fn, batch_first ? 1 : 0));
  if (enforce_sorted) {  // no length greater than the one before it
    auto part = [&](int64_t start, std::optional<int64_t> end) {
      Attrs s = Attrs().set("dim", int64_t(0)).set("start", start).set("step", int64_t(1));
      if (end) s.set("end", *end);
      return L.op(OpId::Slice, {lengths}, s);
    };
    Value* rises = L.op(OpId::Cast, {L.op(OpId::Gt, {part(1, std::nullopt), part(0, -1)})}, Attrs().set("dtype", DType::Int64));
    L.check(L.prim(Prim::NumEq, {reduced_int(L, OpId::Sum, rises), L.constant(int64_t(0))}, kBool),
            fmt::format("{}: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True (pass "
                        "enforce_sorted=False to pack unsorted lengths)",
                        fn));
  }
  return L.packed_value(x, lengths, enforce_sorted);
}

Value* pack_padded(Lowerer& L, const Expr& e) {
  const char* fn = "pack_padded_sequence";
  std::vector<Arg> a = bind(L, fn, e, {"input", "lengths", "batch_first", "enforce_sorted"}, 2);
  Value* x = L.tensor_arg(a[0], "input");
  // `lengths.cpu()`, as torch asks: the rnn_layer node reads the lengths on the host whatever their device
  const Expr* len = a[1].expr;
  if (len && len->kind == ExprKind::Call && len->args.size() == 1 && len->keywords.empty() &&
      len->args[0]->kind == ExprKind::Attribute && len->args[0]->name == "cpu")
    a[1].expr = len->args[0]->args[0].get();
  Value* lengths = L.tensor_arg(a[1], "lengths");
  const bool batch_first = a[2].present() ? L.need_bool(a[2], "batch_first") : false;
  const bool enforce_sorted = a[3].present() ? L.need_bool(a[3], "enforce_sorted") : true;
  return pack(L, fn, x, lengths, batch_first, enforce_sorted);
}

// The tensors of a list or tuple written out in the call (`[a, b, c]`, or a name bound to one)
std::vector<Value*> listed_tensors(Lowerer& L, const char* fn, const Arg& a) {
  Value* v = L.value_of(a);
  ir::Node* n = v->node();
  if (!n || (n->prim() != Prim::ListConstruct && n->prim() != Prim::TupleConstruct) || n->inputs().empty())
    L.fail(a.loc, fmt::format("{}() takes a list of tensors written out in kiln script ([a, b, c]), got {}", fn, v->type().str()));
  std::vector<Value*> r(n->inputs().begin(), n->inputs().end());
  for (Value* t : r)
    if (!t->type().is_tensor()) L.fail(a.loc, fmt::format("{}() takes tensors, got {}", fn, t->type().str()));
  return r;
}

// batch_first and padding_value, which pad_sequence and pad_packed_sequence take alike (False and 0.0 unset); the
// value must be known when lowering, as it is written into the graph
std::pair<bool, double> padding_options(Lowerer& L, const char* fn, const Arg& batch_first, const Arg& padding_value) {
  std::pair<bool, double> r{batch_first.present() && L.need_bool(batch_first, "batch_first"), 0.0};
  if (padding_value.present()) {
    auto v = L.const_float(padding_value);
    if (!v) L.fail(padding_value.loc, fmt::format("{}(): padding_value must be a constant number in kiln script", fn));
    r.second = *v;
  }
  return r;
}

// torch's pad_sequence: each sequence [L_i, *] followed by rows of padding_value up to the longest, stacked on dim 1
// (dim 0 with batch_first); the lengths are read when the graph runs
Value* pad_listed(Lowerer& L, const std::vector<Value*>& seqs, bool batch_first, double padding_value) {
  Type li = Type::list(kInt);
  Value* longest = nullptr;
  for (Value* s : seqs) {
    Value* n = L.prim(Prim::Size, {s, L.constant(int64_t(0))}, kInt);
    longest = longest ? L.prim(Prim::Max, {longest, n}, kInt) : n;
  }
  std::vector<Value*> rows;
  for (Value* s : seqs) {
    Value* shape = L.prim(Prim::ListAdd,
                          {L.prim(Prim::ListConstruct, {L.prim(Prim::NumSub, {longest, L.prim(Prim::Size, {s, L.constant(int64_t(0))}, kInt)}, kInt)}, li),
                           L.prim(Prim::ListSlice, {L.prim(Prim::Shape, {s}, li), L.constant(int64_t(1)), L.constant(INT64_MAX)}, li)},
                          li);
    Value* fill = L.prim(Prim::CastTo, {L.prim(Prim::Full, {shape, L.constant(padding_value)}, Type::tensor()), L.prim(Prim::DTypeOf, {s}, kInt)},
                         Type::tensor());
    Value* row = L.prim(Prim::ListCat, {L.prim(Prim::ListConstruct, {s, fill}, Type::list(Type::tensor())), L.constant(int64_t(0))},
                        Type::tensor());
    rows.push_back(L.op(OpId::Unsqueeze, {row}, Attrs().set("dim", int64_t(batch_first ? 0 : 1))));
  }
  return L.prim(Prim::ListCat, {L.prim(Prim::ListConstruct, rows, Type::list(Type::tensor())), L.constant(int64_t(batch_first ? 0 : 1))},
                Type::tensor());
}

Value* pad_sequence(Lowerer& L, const Expr& e) {
  const char* fn = "pad_sequence";
  std::vector<Arg> a = bind(L, fn, e, {"sequences", "batch_first", "padding_value"}, 1);
  auto [batch_first, padding_value] = padding_options(L, fn, a[1], a[2]);
  return pad_listed(L, listed_tensors(L, fn, a[0]), batch_first, padding_value);
}

// torch's pack_sequence: pack_padded_sequence of pad_sequence(sequences) with their lengths
Value* pack_sequence(Lowerer& L, const Expr& e) {
  const char* fn = "pack_sequence";
  std::vector<Arg> a = bind(L, fn, e, {"sequences", "enforce_sorted"}, 1);
  const bool enforce_sorted = a[1].present() ? L.need_bool(a[1], "enforce_sorted") : true;
  std::vector<Value*> seqs = listed_tensors(L, fn, a[0]);
  std::vector<Value*> lengths;
  for (Value* s : seqs) {
    Value* n = L.prim(Prim::NumToTensor, {L.prim(Prim::Size, {s, L.constant(int64_t(0))}, kInt)}, Type::tensor());
    lengths.push_back(L.op(OpId::Unsqueeze, {n}, Attrs().set("dim", int64_t(0))));
  }
  Value* lens = L.prim(Prim::ListCat, {L.prim(Prim::ListConstruct, lengths, Type::list(Type::tensor())), L.constant(int64_t(0))}, Type::tensor());
  return pack(L, fn, pad_listed(L, seqs, false, 0.0), lens, false, enforce_sorted);
}

Value* pad_packed(Lowerer& L, const Expr& e) {
  const char* fn = "pad_packed_sequence";
  std::vector<Arg> a = bind(L, fn, e, {"sequence", "batch_first", "padding_value", "total_length"}, 1);
  Value* seq = L.value_of(a[0]);
  auto parts = L.packed_parts(seq);
  if (!parts) L.fail(a[0].loc, fmt::format("{}() expects a PackedSequence, got {}", fn, seq->type().str()));
  auto [padded, lengths] = *parts;
  auto [batch_first, padding_value] = padding_options(L, fn, a[1], a[2]);
  Value* longest = reduced_int(L, OpId::Amax, lengths);
  Value* steps = longest;
  if (!is_none(a[3])) {
    auto total = L.const_int(a[3]);
    if (!total) L.fail(a[3].loc, fmt::format("{}(): total_length must be a constant int in kiln script", fn));
    L.check(L.prim(Prim::NumGe, {L.constant(*total), longest}, kBool),
            fmt::format("{}: expected total_length to be at least the length of the longest sequence in input, but got "
                        "total_length={}",
                        fn, *total));
    steps = L.constant(*total);
  }
  // the steps up to the longest length (the layer's outputs are zero past each row's), then zeros to total_length
  Value* out = L.prim(Prim::Slice, {padded, L.constant(int64_t(0)), L.constant(int64_t(0)), longest, L.constant(int64_t(1))},
                      Type::tensor());
  if (steps != longest) {
    Type li = Type::list(kInt);
    Value* shape = L.prim(Prim::ListAdd,
                          {L.prim(Prim::ListConstruct, {L.prim(Prim::NumSub, {steps, longest}, kInt)}, li),
                           L.prim(Prim::ListSlice, {L.prim(Prim::Shape, {out}, li), L.constant(int64_t(1)), L.constant(INT64_MAX)}, li)},
                          li);
    Value* zeros = L.prim(Prim::Full, {shape, L.constant(0.0)}, Type::tensor());
    zeros = L.prim(Prim::CastTo, {zeros, L.prim(Prim::DTypeOf, {out}, kInt)}, Type::tensor());
    out = L.prim(Prim::ListCat, {L.prim(Prim::ListConstruct, {out, zeros}, Type::list(Type::tensor())), L.constant(int64_t(0))},
                 Type::tensor());
  }
  if (padding_value != 0.0) {  // step t of row n is padding where t >= lengths[n]
    ir::Node* r = L.graph().create(Prim::Arange, 1);
    r->add_input(L.constant(int64_t(0)));
    r->add_input(steps);
    r->add_input(L.constant(int64_t(1)));
    r->output()->set_type(Type::tensor());
    Value* t = L.op(OpId::Unsqueeze, {L.emit(r)->output()}, Attrs().set("dim", int64_t(1)));
    Value* pad = L.op(OpId::Ge, {t, L.op(OpId::Unsqueeze, {lengths}, Attrs().set("dim", int64_t(0)))});
    // [T, N] then a 1 for each further dim of out (its rank read when the graph runs)
    Type li = Type::list(kInt);
    Value* out_shape = L.prim(Prim::Shape, {out}, li);
    std::vector<Value*> ones(6, L.constant(int64_t(1)));
    Value* rest = L.prim(Prim::NumSub, {L.prim(Prim::Len, {out_shape}, kInt), L.constant(int64_t(2))}, kInt);
    Value* shape = L.prim(Prim::ListAdd,
                          {L.prim(Prim::ListSlice, {out_shape, L.constant(int64_t(0)), L.constant(int64_t(2))}, li),
                           L.prim(Prim::ListSlice, {L.prim(Prim::ListConstruct, ones, li), L.constant(int64_t(0)), rest}, li)},
                          li);
    pad = L.prim(Prim::Reshape, {pad, shape}, Type::tensor());
    Value* value = L.number_to_tensor(L.constant(padding_value));
    out = L.op(OpId::Where, {pad, value, out});
  }
  if (batch_first) out = L.prim(Prim::Transpose, {out, L.constant(int64_t(0)), L.constant(int64_t(1))}, Type::tensor());
  return L.tuple({out, lengths});
}

}  // namespace

Value* Lowerer::packed_value(Value* padded, Value* lengths, bool enforce_sorted) {
  Value* v = tuple({padded, lengths});
  packed_[v] = enforce_sorted;
  return v;
}

std::optional<std::pair<Value*, Value*>> Lowerer::packed_parts(Value* v) {
  if (!packed_.count(v)) return std::nullopt;
  return std::pair<Value*, Value*>{v->node()->input(0), v->node()->input(1)};
}

std::optional<Value*> packed_attribute(Lowerer& L, Value* packed, const std::string& name) {
  if (name != "data" && name != "batch_sizes" && name != "sorted_indices" && name != "unsorted_indices") return std::nullopt;
  auto [padded, lengths] = *L.packed_parts(packed);
  // torch packs the batch in order of decreasing length (a stable sort: sorted lengths keep their order)
  Value* order = L.op(OpId::Argsort, {lengths}, Attrs().set("dim", int64_t(0)).set("descending", true));
  if (name == "sorted_indices" || name == "unsorted_indices") {
    // torch keeps no order for a batch packed with enforce_sorted, and the inverse permutation for the other
    if (L.packed_enforce_sorted(packed)) return L.graph().insert_none();
    if (name == "sorted_indices") return order;
    return L.op(OpId::Argsort, {order}, Attrs().set("dim", int64_t(0)).set("descending", false));
  }
  Value* sorted = L.op(OpId::IndexSelect, {lengths, order}, Attrs().set("dim", int64_t(0)));
  ir::Node* r = L.graph().create(Prim::Arange, 1);
  r->add_input(L.constant(int64_t(0)));
  r->add_input(L.prim(Prim::Size, {padded, L.constant(int64_t(0))}, kInt));
  r->add_input(L.constant(int64_t(1)));
  r->output()->set_type(Type::tensor());
  Value* t = L.op(OpId::Unsqueeze, {L.emit(r)->output()}, Attrs().set("dim", int64_t(1)));
  Value* has = L.op(OpId::Lt, {t, L.op(OpId::Unsqueeze, {sorted}, Attrs().set("dim", int64_t(0)))});  // [T, N]: step t of row n
  if (name == "batch_sizes") {
    Value* counts = L.op(OpId::Sum, {L.op(OpId::Cast, {has}, Attrs().set("dtype", DType::Int64))}, Attrs().set("dims", Shape{1}));
    return L.prim(Prim::Slice, {counts, L.constant(int64_t(0)), L.constant(int64_t(0)), reduced_int(L, OpId::Amax, lengths), L.constant(int64_t(1))},
                  Type::tensor());
  }
  LoweringBuilder lb(L);
  return composite::masked_rows(lb, L.op(OpId::IndexSelect, {padded, order}, Attrs().set("dim", int64_t(1))), has);
}

Value* call_rnn_utils(Lowerer& L, const std::string& name, const Expr& e) {
  for (const Keyword& k : e.keywords)
    if (k.name.empty()) L.fail(k.loc, "**kwargs are not supported in kiln script");
  if (name == "pack_padded_sequence") return pack_padded(L, e);
  if (name == "pad_packed_sequence") return pad_packed(L, e);
  if (name == "pad_sequence") return pad_sequence(L, e);
  if (name == "pack_sequence") return pack_sequence(L, e);
  L.fail(e.args[0]->loc, fmt::format("torch.nn.utils.rnn.{} is not supported in kiln script (pack_padded_sequence, "
                                     "pad_packed_sequence, pad_sequence and pack_sequence are; the C++ API has every "
                                     "function of torch.nn.utils.rnn)",
                                     name));
}

}  // namespace kiln::script
