// The unpickler is a stack machine over the opcodes Python's pickle emits at protocol 2 for dicts,
// lists, tuples, numbers, strings and torch's tensor reductions. It never imports anything: the few
// callables torch's files name are recognised by name and everything else is refused, which is what
// makes loading a file from elsewhere safe. Objects are built as an internal tree first (a dict is
// filled after it is memoised), then converted to IValues with a depth limit, so no input can recurse
// without bound or blow up through shared references.
#include "eager/torch_pickle.h"

#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>

namespace kiln::torch_pickle {
namespace {

struct Obj;
using P = std::shared_ptr<Obj>;

struct Obj {
  enum Kind { None, Bool, Int, Float, Str, Bytes, Tuple, List, Dict, Global, Storage, Tensor } kind = None;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;         // Str, Bytes; Global: "module.name"
  std::vector<P> items;  // Tuple, List; Dict: key, value, key, value, ...
  kiln::Tensor t;        // Storage (the whole storage, 1-D), Tensor
};


struct StorageType {
  const char* name;
  DType dtype;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", DType::Float32}, {"DoubleStorage", DType::Float64}, {"HalfStorage", DType::Float16},
    {"BFloat16Storage", DType::BFloat16}, {"LongStorage", DType::Int64}, {"IntStorage", DType::Int32},
    {"BoolStorage", DType::Bool}};
// Storages torch has and kiln has no dtype for: named in the refusal.
constexpr const char* kUnheldStorages[] = {"ByteStorage", "CharStorage", "ShortStorage", "ComplexFloatStorage",
                                           "ComplexDoubleStorage", "QInt8Storage", "QUInt8Storage"};

class Unpickler {
 public:
  Unpickler(std::string_view b, const std::function<kiln::Tensor(const StorageRef&)>& load, const std::string& where)
      : b_(b), load_(load), where_(where) {}
  // Cutting every edge first frees cycles (a list appended to itself) and deep chains without recursion.
  ~Unpickler() {
    for (auto& o : all_) o->items.clear();
  }

  P run();

 private:
  P make(Obj::Kind k) {
    auto o = std::make_shared<Obj>();
    o->kind = k;
    all_.push_back(o);
    return o;
  }
  template <class... A>
  [[noreturn]] void bad(fmt::format_string<A...> f, A&&... a) {
    fail("{}: {}", where_, fmt::format(f, std::forward<A>(a)...));
  }
  const char* take(size_t n) {
    if (b_.size() - at_ < n) bad("truncated pickle: {} bytes wanted at offset {}", n, at_);
    const char* p = b_.data() + at_;
    at_ += n;
    return p;
  }
  uint64_t le(size_t n) {
    const char* p = take(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= uint64_t(uint8_t(p[k])) << (8 * k);
    return v;
  }
  std::string line() {
    size_t e = b_.find('\n', at_);
    if (e == std::string_view::npos) bad("truncated pickle: a line at offset {} has no end", at_);
    std::string s(b_.substr(at_, e - at_));
    at_ = e + 1;
    return s;
  }
  P pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) bad("corrupt pickle: stack underflow at offset {}", at_);
    P p = std::move(stack_.back());
    stack_.pop_back();
    return p;
  }
  P& top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) bad("corrupt pickle: stack underflow at offset {}", at_);
    return stack_.back();
  }
  std::vector<P> pop_mark() {
    if (marks_.empty()) bad("corrupt pickle: no mark at offset {}", at_);
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<P> out(std::make_move_iterator(stack_.begin() + long(m)), std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return out;
  }
  P str(std::string s, Obj::Kind k = Obj::Str) {
    P o = make(k);
    o->s = std::move(s);
    return o;
  }
  P integer(int64_t v) {
    P o = make(Obj::Int);
    o->i = v;
    return o;
  }
  void push_global(const std::string& module, const std::string& name);
  P reduce(const P& fn, const P& args);
  P persistent(const P& pid);
  P rebuild_tensor(const std::vector<P>& a);
  std::vector<int64_t> ints(const P& tuple, const char* what);

  std::string_view b_;
  size_t at_ = 0;
  const std::function<kiln::Tensor(const StorageRef&)>& load_;
  const std::string& where_;
  std::vector<P> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, P> memo_;
  std::map<std::string, P> storages_;
  std::vector<P> all_;
};

void Unpickler::push_global(const std::string& module, const std::string& name) {
  std::string full = module + "." + name;
  bool known = full == "collections.OrderedDict" || full == "torch._utils._rebuild_tensor_v2" ||
               full == "torch._utils._rebuild_parameter";
  if (module == "torch") {
    for (auto& st : kStorageTypes) known |= name == st.name;
    for (auto* n : kUnheldStorages)
      if (name == n) bad("tensors of {} have no kiln dtype (kiln holds float32/64, float16, bfloat16, int64/32, bool)", full);
  }
  if (!known)
    bad("refused global '{}': kiln builds only tensors, OrderedDicts and plain values from a pickle, never other "
        "objects or calls",
        full);
  stack_.push_back(str(full, Obj::Global));
}

std::vector<int64_t> Unpickler::ints(const P& tuple, const char* what) {
  if (tuple->kind != Obj::Tuple) bad("a tensor's {} is not a tuple", what);
  std::vector<int64_t> out;
  for (auto& e : tuple->items) {
    if (e->kind != Obj::Int) bad("a tensor's {} holds a non-integer", what);
    out.push_back(e->i);
  }
  return out;
}

P Unpickler::persistent(const P& pid) {
  if (pid->kind != Obj::Tuple || pid->items.size() != 5 || pid->items[0]->kind != Obj::Str ||
      pid->items[0]->s != "storage" || pid->items[1]->kind != Obj::Global || pid->items[2]->kind != Obj::Str ||
      pid->items[4]->kind != Obj::Int)
    bad("unsupported persistent id: expected ('storage', type, key, location, numel)");
  std::string type = pid->items[1]->s, key = pid->items[2]->s;
  int64_t numel = pid->items[4]->i;
  const StorageType* st = nullptr;
  for (auto& s : kStorageTypes)
    if (type == std::string("torch.") + s.name) st = &s;
  if (!st) bad("persistent id names '{}', not a storage type", type);
  if (numel < 0) bad("storage '{}' has a negative size {}", key, numel);
  if (auto it = storages_.find(key); it != storages_.end()) {
    if (it->second->t.dtype() != st->dtype || it->second->t.numel() != numel)
      bad("storage '{}' is referred to as two different storages", key);
    return it->second;
  }
  P o = make(Obj::Storage);
  o->t = load_({key, st->dtype, numel});
  storages_[key] = o;
  return o;
}

P Unpickler::rebuild_tensor(const std::vector<P>& a) {
  // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  if (a.size() < 4 || a[0]->kind != Obj::Storage || a[1]->kind != Obj::Int)
    bad("_rebuild_tensor_v2 called with unexpected arguments");
  std::vector<int64_t> sizes = ints(a[2], "size"), strides = ints(a[3], "stride");
  if (sizes.size() != strides.size()) bad("a tensor has {} sizes but {} strides", sizes.size(), strides.size());
  const kiln::Tensor& base = a[0]->t;
  int64_t offset = a[1]->i, n = base.numel();
  // The last element's index, checked against the storage without overflow.
  bool empty = false;
  int64_t nonzero = 1;  // kept finite, so that no later product of the sizes overflows
  for (int64_t s : sizes) {
    if (s < 0) bad("a tensor has a negative size in {}", shape_str(sizes));
    empty |= s == 0;
    if (s && __builtin_mul_overflow(nonzero, s, &nonzero)) bad("a tensor's size {} overflows", shape_str(sizes));
  }
  if (offset < 0 || offset > n) bad("a tensor's storage offset {} is outside its storage of {} elements", offset, n);
  if (!empty) {
    int64_t last = offset;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (strides[d] < 0) bad("a tensor has a negative stride in {}", shape_str(strides));
      if (strides[d] && sizes[d] - 1 > (n - 1 - last) / strides[d])
        bad("a tensor of size {} and stride {} at offset {} runs past its storage of {} elements", shape_str(sizes),
            shape_str(strides), offset, n);
      last += (sizes[d] - 1) * strides[d];
    }
    if (last >= n)
      bad("a tensor of size {} at offset {} runs past its storage of {} elements", shape_str(sizes), offset, n);
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->sizes = sizes;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  P o = make(Obj::Tensor);
  o->t = kiln::Tensor(std::move(impl));
  return o;
}

P Unpickler::reduce(const P& fn, const P& args) {
  if (fn->kind != Obj::Global || args->kind != Obj::Tuple) bad("corrupt pickle: REDUCE of a non-callable");
  const auto& a = args->items;
  if (fn->s == "collections.OrderedDict") {
    if (!a.empty()) bad("OrderedDict called with arguments");
    return make(Obj::Dict);
  }
  if (fn->s == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(a);
  if (fn->s == "torch._utils._rebuild_parameter") {
    if (a.size() < 2 || a[0]->kind != Obj::Tensor || a[1]->kind != Obj::Bool)
      bad("_rebuild_parameter called with unexpected arguments");
    if (a[1]->b && is_floating(a[0]->t.dtype())) a[0]->t.requires_grad_(true);
    return a[0];
  }
  bad("'{}' cannot be called", fn->s);
}

P Unpickler::run() {
  for (;;) {
    uint8_t op = uint8_t(*take(1));
    switch (op) {
      case 0x80: take(1); break;                        // PROTO
      case 0x95: take(8); break;                        // FRAME
      case '.': {                                       // STOP
        P r = pop();
        if (!stack_.empty() || !marks_.empty()) bad("corrupt pickle: values left on the stack at STOP");
        return r;
      }
      case '(': marks_.push_back(stack_.size()); break;  // MARK
      case '0': pop(); break;                            // POP
      case '1': pop_mark(); break;                       // POP_MARK
      case '2': {                                        // DUP
        P d = top();
        stack_.push_back(d);
        break;
      }
      case 'N': stack_.push_back(make(Obj::None)); break;
      case 0x88: case 0x89: {                            // NEWTRUE, NEWFALSE
        P o = make(Obj::Bool);
        o->b = op == 0x88;
        stack_.push_back(o);
        break;
      }
      case 'K': stack_.push_back(integer(int64_t(le(1)))); break;           // BININT1
      case 'M': stack_.push_back(integer(int64_t(le(2)))); break;           // BININT2
      case 'J': stack_.push_back(integer(int64_t(int32_t(le(4))))); break;  // BININT
      case 0x8a: {                                                         // LONG1
        size_t n = uint8_t(*take(1));
        if (n > 8) bad("integer of {} bytes does not fit in 64 bits", n);
        uint64_t v = le(n);
        if (n && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t(0) << (8 * n);  // sign-extend
        stack_.push_back(integer(int64_t(v)));
        break;
      }
      case 'G': {  // BINFLOAT, big-endian
        uint64_t v = 0;
        const char* p = take(8);
        for (int k = 0; k < 8; ++k) v = v << 8 | uint8_t(p[k]);
        P o = make(Obj::Float);
        o->f = std::bit_cast<double>(v);
        stack_.push_back(o);
        break;
      }
      case 'X': case 0x8c: case 0x8d: case 'T': case 'U': case 'B': case 'C': case 0x8e: {
        // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, BINSTRING, SHORT_BINSTRING, BINBYTES, SHORT_BINBYTES, BINBYTES8
        size_t w = (op == 0x8c || op == 'U' || op == 'C') ? 1 : (op == 0x8d || op == 0x8e) ? 8 : 4;
        uint64_t n = le(w);
        if (n > b_.size() - at_) bad("truncated pickle: a string of {} bytes at offset {}", n, at_);
        stack_.push_back(str(std::string(take(n), n), (op == 'B' || op == 'C' || op == 0x8e) ? Obj::Bytes : Obj::Str));
        break;
      }
      case ')': stack_.push_back(make(Obj::Tuple)); break;  // EMPTY_TUPLE
      case ']': stack_.push_back(make(Obj::List)); break;   // EMPTY_LIST
      case '}': stack_.push_back(make(Obj::Dict)); break;   // EMPTY_DICT
      case 't': {                                           // TUPLE
        P o = make(Obj::Tuple);
        o->items = pop_mark();
        stack_.push_back(o);
        break;
      }
      case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
        P o = make(Obj::Tuple);
        o->items.resize(op - 0x84);
        for (size_t k = o->items.size(); k-- > 0;) o->items[k] = pop();
        stack_.push_back(o);
        break;
      }
      case 'l': {  // LIST
        P o = make(Obj::List);
        o->items = pop_mark();
        stack_.push_back(o);
        break;
      }
      case 'd': {  // DICT
        P o = make(Obj::Dict);
        o->items = pop_mark();
        if (o->items.size() % 2) bad("corrupt pickle: DICT with an odd number of items");
        stack_.push_back(o);
        break;
      }
      case 'a': {  // APPEND
        P v = pop();
        if (top()->kind != Obj::List) bad("corrupt pickle: APPEND to a non-list");
        top()->items.push_back(v);
        break;
      }
      case 'e': {  // APPENDS
        std::vector<P> vs = pop_mark();
        if (top()->kind != Obj::List) bad("corrupt pickle: APPENDS to a non-list");
        for (auto& v : vs) top()->items.push_back(v);
        break;
      }
      case 's': {  // SETITEM
        P v = pop(), k = pop();
        if (top()->kind != Obj::Dict) bad("corrupt pickle: SETITEM on a non-dict");
        top()->items.push_back(k);
        top()->items.push_back(v);
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<P> kv = pop_mark();
        if (kv.size() % 2 || top()->kind != Obj::Dict) bad("corrupt pickle: malformed SETITEMS");
        for (auto& x : kv) top()->items.push_back(x);
        break;
      }
      case 'q': memo_[le(1)] = top(); break;  // BINPUT
      case 'r': memo_[le(4)] = top(); break;  // LONG_BINPUT
      case 0x94: memo_[memo_.size()] = top(); break;  // MEMOIZE
      case 'h': case 'j': {                   // BINGET, LONG_BINGET
        uint64_t k = le(op == 'h' ? 1 : 4);
        auto it = memo_.find(k);
        if (it == memo_.end()) bad("corrupt pickle: memo entry {} is missing", k);
        stack_.push_back(it->second);
        break;
      }
      case 'c': {  // GLOBAL
        std::string module = line(), name = line();
        push_global(module, name);
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        P name = pop(), module = pop();
        if (name->kind != Obj::Str || module->kind != Obj::Str) bad("corrupt pickle: STACK_GLOBAL of non-strings");
        push_global(module->s, name->s);
        break;
      }
      case 'R': {  // REDUCE
        P args = pop(), fn = pop();
        stack_.push_back(reduce(fn, args));
        break;
      }
      case 'Q': stack_.push_back(persistent(pop())); break;  // BINPERSID
      case 'b': {  // BUILD
        // A state_dict is an OrderedDict with a `_metadata` attribute (module versions): attributes of a
        // dict are dropped. Other objects may only receive an empty state.
        P state = pop();
        bool empty = state->kind == Obj::None || ((state->kind == Obj::Dict || state->kind == Obj::Tuple) && state->items.empty());
        if (!empty && !(top()->kind == Obj::Dict && state->kind == Obj::Dict))
          bad("refused BUILD with a state: objects with state are not built");
        break;
      }
      default: bad("unsupported pickle opcode 0x{:02x} at offset {}", op, at_ - 1);
    }
  }
}

// Deep enough for any checkpoint, shallow enough for any thread's stack.
constexpr int kMaxDepth = 200;

IValue convert(const P& o, std::unordered_map<const Obj*, IValue>& done, int depth, const std::string& where) {
  if (depth > kMaxDepth) fail("{}: values nested deeper than {} levels (or a reference cycle)", where, kMaxDepth);
  if (auto it = done.find(o.get()); it != done.end()) return it->second;
  IValue r;
  switch (o->kind) {
    case Obj::None: break;
    case Obj::Bool: r = o->b; break;
    case Obj::Int: r = o->i; break;
    case Obj::Float: r = o->f; break;
    case Obj::Str: r = o->s; break;
    case Obj::Bytes: fail("{}: bytes values are not supported", where);
    case Obj::Tensor: r = o->t; break;
    case Obj::Global: fail("{}: '{}' appears as a value; kiln builds no classes", where, o->s);
    case Obj::Storage: fail("{}: a bare storage appears as a value; kiln loads storages only inside tensors", where);
    case Obj::Tuple: case Obj::List: {
      std::vector<IValue> es;
      for (auto& e : o->items) es.push_back(convert(e, done, depth + 1, where));
      r = o->kind == Obj::Tuple ? IValue::tuple(std::move(es)) : IValue::list(std::move(es));
      break;
    }
    case Obj::Dict: {
      std::vector<std::pair<IValue, IValue>> kv;
      for (size_t k = 0; k + 1 < o->items.size(); k += 2)
        kv.emplace_back(convert(o->items[k], done, depth + 1, where), convert(o->items[k + 1], done, depth + 1, where));
      r = IValue::dict(std::move(kv));
      break;
    }
  }
  done[o.get()] = r;
  return r;
}

// ---------------------------------------------------------------------------------------------------
// Writing

class Pickler {
 public:
  Pickler(std::vector<std::pair<std::string, kiln::Tensor>>& storages, const std::string& where)
      : storages_(storages), where_(where) {}
  std::string out;
  void value(const IValue& v, int depth);

 private:
  void u8(uint8_t c) { out += char(c); }
  void u32(uint32_t v) {
    for (int k = 0; k < 4; ++k) out += char(v >> (8 * k));
  }
  void integer(int64_t v) {
    if (v >= 0 && v < 256) u8('K'), u8(uint8_t(v));
    else if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) u8('J'), u32(uint32_t(v));
    else {
      u8(0x8a), u8(8);
      for (int k = 0; k < 8; ++k) out += char(uint64_t(v) >> (8 * k));
    }
  }
  void string(const std::string& s) {
    u8('X'), u32(uint32_t(s.size()));
    out += s;
  }
  void global(const char* module, const std::string& name) { out += std::string("c") + module + "\n" + name + "\n"; }
  void tensor(const kiln::Tensor& t);

  std::vector<std::pair<std::string, kiln::Tensor>>& storages_;
  const std::string& where_;
  std::map<std::pair<const Storage*, DType>, std::string> keys_;
};

void Pickler::tensor(const kiln::Tensor& t0) {
  if (!t0.defined()) fail("{}: cannot save an undefined tensor", where_);
  kiln::Tensor t = t0.device().is_cpu() ? t0 : t0.detach().cpu();
  for (int64_t s : t.strides())
    if (s < 0) t = t.contiguous();
  const char* type = nullptr;
  for (auto& st : kStorageTypes)
    if (st.dtype == t.dtype()) type = st.name;
  auto key_of = std::make_pair(static_cast<const Storage*>(t.storage().get()), t.dtype());
  auto it = keys_.find(key_of);
  if (it == keys_.end()) {
    std::string key = std::to_string(storages_.size());
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = t.storage();
    impl->sizes = {int64_t(t.storage()->nbytes / itemsize(t.dtype()))};
    impl->strides = {1};
    impl->dtype = t.dtype();
    storages_.emplace_back(key, kiln::Tensor(std::move(impl)));
    it = keys_.emplace(key_of, key).first;
  }
  const kiln::Tensor& whole = storages_[std::stoul(it->second)].second;
  global("torch._utils", "_rebuild_tensor_v2");
  u8('(');
  u8('(');  // the persistent id
  string("storage");
  global("torch", type);
  string(it->second);
  string("cpu");
  integer(whole.numel());
  u8('t'), u8('Q');
  integer(t.storage_offset());
  u8('(');
  for (int64_t s : t.sizes()) integer(s);
  u8('t'), u8('(');
  for (int64_t s : t.strides()) integer(s);
  u8('t');
  u8(t0.requires_grad() ? 0x88 : 0x89);
  global("collections", "OrderedDict");
  u8(')'), u8('R');
  u8('t'), u8('R');
}

void Pickler::value(const IValue& v, int depth) {
  if (depth > kMaxDepth) fail("{}: values nested deeper than {} levels", where_, kMaxDepth);
  if (v.is_none()) u8('N');
  else if (v.is_bool()) u8(v.to_bool() ? 0x88 : 0x89);
  else if (v.is_int()) integer(v.to_int());
  else if (v.is_double()) {
    uint64_t b = std::bit_cast<uint64_t>(v.to_double());
    u8('G');
    for (int k = 7; k >= 0; --k) out += char(b >> (8 * k));
  } else if (v.is_string()) string(v.to_string());
  else if (v.is_tensor()) tensor(v.to_tensor());
  else if (v.is_tuple()) {
    u8('(');
    for (auto& e : v.elements()) value(e, depth + 1);
    u8('t');
  } else if (v.is_list()) {
    u8(']'), u8('(');
    for (auto& e : v.elements()) value(e, depth + 1);
    u8('e');
  } else if (v.is_dict()) {
    u8('}'), u8('(');
    for (auto& [k, e] : v.items()) value(k, depth + 1), value(e, depth + 1);
    u8('u');
  } else fail("{}: cannot save a value of type {}", where_, v.type_name());
}

}  // namespace

IValue unpickle(std::string_view bytes, const std::function<Tensor(const StorageRef&)>& load_storage,
                const std::string& where) {
  Unpickler u(bytes, load_storage, where);
  P root = u.run();
  std::unordered_map<const Obj*, IValue> done;
  return convert(root, done, 0, where);
}

std::string pickle(const IValue& v, std::vector<std::pair<std::string, Tensor>>& storages, const std::string& where) {
  Pickler p(storages, where);
  p.out = "\x80\x02";
  p.value(v, 0);
  p.out += '.';
  return std::move(p.out);
}

}  // namespace kiln::torch_pickle
