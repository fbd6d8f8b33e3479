// The kiln module from a parsed file: its torch imports, top-level functions and nn.Module classes
// with their methods and class attributes. Reading a file never fails for what kiln cannot use, as
// TorchScript never compiles what nothing asks for: other imports, module-level code (not run) and
// classes kiln does not build bind names that are unavailable, with the reason, and code that kiln
// evaluates or lowers fails naming it only where it uses one. `if __name__ == "__main__":` blocks do
// not run when the file is imported either.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "eager/nn/registry.h"
#include "script_frontend/parser.h"

namespace kiln::script {

namespace {

bool is_main_guard(const Stmt& s) {
  if (s.kind != StmtKind::If || s.test->kind != ExprKind::Compare || s.test->ops.size() != 1 || s.test->ops[0] != PyOp::Eq)
    return false;
  const Expr& a = *s.test->args[0];
  const Expr& b = *s.test->args[1];
  auto is = [](const Expr& n, const Expr& v) {
    return n.kind == ExprKind::Name && n.name == "__name__" && v.kind == ExprKind::String && v.name == "__main__";
  };
  return is(a, b) || is(b, a);
}

bool is_docstring(const Stmt& s) {
  return s.kind == StmtKind::Expr && (s.value->kind == ExprKind::String || s.value->kind == ExprKind::Ellipsis);
}

class Collector {
 public:
  Collector(const Source& src, FileAst& m) : src_(src), m_(m) {}

  void top_level(const StmtPtr& s) {
    switch (s->kind) {
      case StmtKind::Import: return import_stmt(*s);
      case StmtKind::ImportFrom: return from_import(*s);
      case StmtKind::FunctionDef:
        for (const auto& f : m_.functions)
          if (f->name == s->fn->name) src_.fail(s->fn->loc, fmt::format("function '{}' is defined twice", f->name));
        m_.functions.push_back(s->fn);
        return;
      case StmtKind::ClassDef:
        if (collect_namedtuple(src_, m_, *s)) {
          unavailable(s->cls->name, fmt::format("'{}' is a NamedTuple class (line {}), which kiln script uses in lowered code only",
                                                s->cls->name, s->loc.line));
          return;
        }
        return class_def(*s);
      case StmtKind::Expr:
        if (is_docstring(*s)) return;
        break;
      case StmtKind::If:
        if (is_main_guard(*s)) return;
        break;
      case StmtKind::Assign:
        collect_namedtuple(src_, m_, *s);  // module-level code all the same: __init__ does not read one
        break;
      case StmtKind::AugAssign:
      case StmtKind::AnnAssign:
      case StmtKind::While:
      case StmtKind::For:
      case StmtKind::Return:
      case StmtKind::Break:
      case StmtKind::Continue:
      case StmtKind::Pass:
      case StmtKind::Assert:
      case StmtKind::AsyncFor:
      case StmtKind::Try:
      case StmtKind::TryStar:
      case StmtKind::With:
      case StmtKind::AsyncWith:
      case StmtKind::Raise:
      case StmtKind::Global:
      case StmtKind::Nonlocal:
      case StmtKind::Delete:
      case StmtKind::Match: break;
    }
    // Module-level code (`__all__ = [...]`, a `try:` around an import): not run, so what it binds has
    // no value for lowered code; __init__ may still read a plain `NAME = value` (evaluated then).
    not_run(*s, s->loc);
    if ((s->kind == StmtKind::Assign || s->kind == StmtKind::AnnAssign) && s->value)
      for (const auto& t : s->targets) {
        if (t->kind == ExprKind::Name) m_.constants[t->name] = s->value.get();
        else if (unpackable(*t)) bind_unpacked(*t, *t, *s->value);
      }
  }

 private:
  void unavailable(const std::string& name, std::string why) { m_.unavailable.emplace(name, std::move(why)); }

  // `A, B = 3, 4` / `(H, W), C = SIZE, 3` / `A, *B = SIZES`: names only, nested as the evaluator unpacks them
  static bool unpackable(const Expr& t) {
    if (t.kind == ExprKind::Name) return true;
    if (t.kind == ExprKind::Starred) return t.args[0]->kind == ExprKind::Name;
    if (t.kind != ExprKind::Tuple && t.kind != ExprKind::List) return false;
    return std::all_of(t.args.begin(), t.args.end(), [](const ExprPtr& a) { return unpackable(*a); });
  }
  void bind_unpacked(const Expr& t, const Expr& whole, const Expr& value) {
    if (t.kind == ExprKind::Name) {
      m_.constants[t.name] = &value;
      m_.unpacked[t.name] = &whole;
      return;
    }
    for (const auto& a : t.args) bind_unpacked(*a, whole, value);
  }

  // The names a statement of module-level code binds, each unavailable for the reason of `top`.
  void not_run(const Stmt& s, SourceLoc top) {
    auto bind = [&](const std::string& name) {
      unavailable(name, fmt::format("'{}' is bound by module-level code (line {}), which kiln does not run", name, top.line));
    };
    std::function<void(const Expr&)> target = [&](const Expr& t) {
      if (t.kind == ExprKind::Name) bind(t.name);
      if (t.kind == ExprKind::Tuple || t.kind == ExprKind::List || t.kind == ExprKind::Starred)
        for (const auto& a : t.args) target(*a);
    };
    for (const auto& t : s.targets) target(*t);
    for (const Alias& a : s.names) bind(a.asname.empty() ? a.name.substr(0, a.name.find('.')) : a.asname);
    if (s.fn) bind(s.fn->name);
    if (s.cls) bind(s.cls->name);
    for (const auto* block : {&s.body, &s.orelse, &s.finalbody})
      for (const StmtPtr& b : *block) not_run(*b, top);
    for (const auto& h : s.handlers)
      for (const StmtPtr& b : h.body) not_run(*b, top);
  }

  void import_stmt(const Stmt& s) {
    for (const Alias& a : s.names) {
      const std::string& mod = a.name;
      const std::string& as = a.asname;
      if (as.empty() && mod == "collections") m_.namedtuple_makers["collections.namedtuple"] = "collections.namedtuple";
      if (as.empty() && mod == "typing") m_.namedtuple_makers["typing.NamedTuple"] = "typing.NamedTuple";
      if (mod == "torch" && as.empty()) {
        m_.imported.insert("torch");
      } else if (mod == "math" && as.empty()) {
        m_.imported.insert("math");
      } else if (mod == "torch.nn" || mod == "torch.nn.functional") {
        // `import torch.nn` binds torch, as Python does; `import torch.nn as nn` binds the alias only.
        std::set<std::string>& names = mod == "torch.nn" ? m_.nn_names : m_.functional_names;
        if (as.empty()) {
          m_.imported.insert("torch");
          names.insert(mod);
        } else {
          names.insert(as);
        }
      } else if ((mod == "torch.nn.init" && !as.empty()) || (mod == "numpy" && as == "np") ||
                 (as.empty() && (mod == "warnings" || mod == "functools" || mod == "collections" || mod == "copy"))) {
        std::string bound = as.empty() ? mod : as;
        m_.aliases[bound] = mod;
        unavailable(bound, fmt::format("'{}' comes from `import {}{}` (line {}), which kiln script reads in __init__ only", bound, mod,
                                       as.empty() ? "" : " as " + as, s.loc.line));
      } else {
        std::string bound = as.empty() ? mod.substr(0, mod.find('.')) : as;
        std::string stmt = as.empty() ? "import " + mod : fmt::format("import {} as {}", mod, as);
        unavailable(bound, fmt::format("'{}' comes from `{}` (line {}), which kiln cannot read{}", bound, stmt, s.loc.line,
                                       mod == "torch" || mod == "math" ? fmt::format(" (write `import {}`)", mod) : ""));
      }
    }
  }

  void from_import(const Stmt& s) {
    std::string mod = std::string(size_t(s.level), '.') + s.module;
    if (mod == "__future__") return;  // `annotations` and friends change nothing kiln reads
    for (const Alias& a : s.names) {
      const std::string& name = a.name;
      std::string as = a.asname.empty() ? name : a.asname;
      if ((mod == "collections" && name == "namedtuple") || (mod == "typing" && name == "NamedTuple"))
        m_.namedtuple_makers[as] = mod + "." + name;
      bool typing = mod == "typing" && (name == "List" || name == "Tuple" || name == "Optional" || name == "Dict");
      if (mod == "torch" && name == "nn") {
        m_.nn_names.insert(as);
      } else if (mod == "torch.nn.utils.rnn") {
        m_.rnn_utils_names[as] = name;
      } else if ((mod == "torch.nn" && name == "functional") || (mod == "torch" && name == "functional")) {
        m_.functional_names.insert(as);
      } else if (mod == "torch.nn" && name == "Module" && as == name) {
        m_.imported.insert("Module");
      } else if (((mod == "torch" && name == "Tensor") || typing) && as == name) {
        m_.imported.insert(name);
      } else if (name == "_log_api_usage_once") {
        m_.no_op_calls.insert(as);
      } else if (mod == "torch.nn" || mod == "torch.nn.functional") {
        // `from torch.nn import Linear, GELU`: the name is the namespace's attribute, as nn.Linear is
        m_.aliases[as] = "attr:" + mod + ":" + name;
        // lowered code calls an F function by it (exprs.cpp); any other use there says this
        unavailable(as, fmt::format("'{}' comes from `from {} import {}` (line {}), which lowered code reads only as "
                                    "a call of an F function (write `{}.{}`)", as, mod, name, s.loc.line,
                                    mod == "torch.nn" ? "nn" : "F", name));
      } else if ((mod == "functools" && name == "partial") || ((mod == "collections" || mod == "typing") && name == "OrderedDict") ||
                 (mod == "typing" && (name == "cast" || name == "Sequence")) || (mod == "torch.nn" && name == "init")) {
        m_.aliases[as] = mod + "." + name;
        unavailable(as, fmt::format("'{}' comes from `from {} import {}` (line {}), which kiln script reads in __init__ only", as, mod,
                                    name, s.loc.line));
      } else {
        // A relative import, or an absolute one of the file's own package (maxvit.py's `from torchvision.ops.misc
        // import ...`): __init__ reads the name from the package's file when it first uses it.
        static const std::set<std::string> kOther = {"torch", "typing", "collections", "functools", "math", "numpy",
                                                     "dataclasses", "enum", "warnings", "copy", "re", "os", "sys"};
        std::string top = s.module.substr(0, s.module.find('.'));
        if (s.level) m_.aliases[as] = fmt::format("import:{}:{}:{}", s.level, s.module, name);
        else if (!kOther.count(top)) m_.aliases[as] = fmt::format("import:0:{}:{}", s.module, name);
        unavailable(as, fmt::format("'{}' comes from `from {} import {}{}` (line {}), which kiln {}", as, mod, name,
                                    as == name ? "" : " as " + as, s.loc.line,
                                    s.level ? "follows in __init__ only (lowered code cannot use it yet)" : "cannot read"));
      }
    }
  }

  // An nn.Module class kiln builds, or a class it keeps unavailable with the reason (its first problem).
  void class_def(const Stmt& s) {
    try {
      module_class(s);
    } catch (const Rejected& r) {
      unavailable(s.cls->name, fmt::format("{} (it is defined at line {})", r.msg, s.cls->loc.line));
      m_.unbuilt.emplace(s.cls->name, std::make_pair(r.loc, r.msg));
    }
  }

  struct Rejected {
    SourceLoc loc;
    std::string msg;
  };
  [[noreturn]] static void reject(SourceLoc loc, std::string msg) { throw Rejected{loc, std::move(msg)}; }

  void module_class(const Stmt& s) {
    ClassDef& c = *s.cls;
    bool dataclass = c.decorators.size() == 1 && (dotted(*c.decorators[0]) == "dataclass" || dotted(*c.decorators[0]) == "dataclasses.dataclass");
    if (!c.decorators.empty() && !dataclass)
      reject(c.decorators[0]->loc, fmt::format("class '{}' has a decorator, which kiln script does not support (@dataclass aside)", c.name));
    if (c.bases.empty() || (c.bases.size() == 1 && dotted(*c.bases[0]) == "object")) {
      // A plain class or a @dataclass: a config object __init__ builds and reads (lowered code cannot use one).
      c.torch_base = dataclass ? "dataclass" : "";
      // lowered code cannot use one (TorchScript's classes are not kiln's yet)
      unavailable(c.name, fmt::format("class '{}' must derive from nn.Module in kiln script (it is defined at line {})", c.name, c.loc.line));
      return class_body(c, s);
    }
    if (dataclass) reject(c.decorators[0]->loc, fmt::format("a @dataclass deriving from another class ('{}') is not supported", c.name));
    if (c.bases.size() == 1 && (dotted(*c.bases[0]) == "enum.Enum" || dotted(*c.bases[0]) == "enum.EnumMeta")) {
      // torchvision's `class StrEnum(enum.Enum, metaclass=StrEnumMeta)` under its weight enums: a plain class, its
      // class attributes the members; its metaclass (torchvision's StrEnumMeta(enum.EnumMeta)) a plain class whose
      // methods the enum's class attributes fall back to (from_str, for a weight named by a string)
      for (const auto& k : c.keywords)
        if (k.name != "metaclass") reject(k.loc, fmt::format("class keyword '{}' is not supported in kiln script", k.name));
      c.torch_base = "";
      unavailable(c.name, fmt::format("class '{}' must derive from nn.Module in kiln script (it is defined at line {})", c.name, c.loc.line));
      return class_body(c, s);
    }
    if (!c.keywords.empty())
      reject(c.keywords[0].loc, fmt::format("class keywords are not supported in kiln script ('{}' derives from nn.Module only)", c.name));
    const Expr& b = *c.bases[0];
    std::string base = dotted(b);
    size_t dot = base.rfind('.');
    std::string owner = dot == std::string::npos ? "" : base.substr(0, dot);
    std::string last = base.substr(dot + 1);
    bool torch_nn = m_.nn_names.count(owner) != 0 || (owner == "torch.nn" && m_.imported.count("torch"));
    for (const auto& earlier : m_.classes)
      if (c.bases.size() == 1 && earlier->name == base) c.parent = earlier.get();
    if (auto a = m_.aliases.find(base); !c.parent && c.bases.size() == 1 && a != m_.aliases.end() && a->second.rfind("import:", 0) == 0) {
      c.base_import = base;
      return class_body(c, s);
    }
    bool ok = c.bases.size() == 1 && (c.parent || (base == "Module" && m_.imported.count("Module")) ||
                                      ((last == "Module" || last == "Sequential" || last == "ModuleDict") && torch_nn) ||
                                      (torch_nn && nn::find_layer(last)));
    if (!ok)
      reject(b.loc, fmt::format("class '{}' must derive from nn.Module, nn.Sequential, nn.ModuleDict, a layer kiln has (imported as torch.nn) or a class "
                                "of the file in kiln script, not '{}'",
                                c.name, c.bases.size() == 1 ? base : "several bases"));
    if (!c.parent) c.torch_base = last;
    class_body(c, s);
  }

  void class_body(ClassDef& c, const Stmt& s) {
    bool plain = c.root()->torch_base.empty() || c.root()->torch_base == "dataclass";
    std::vector<std::shared_ptr<FunctionDef>> pending;  // overload declarations not yet matched to their def
    for (const StmtPtr& st : c.body) {
      if (st->kind == StmtKind::FunctionDef) {
        // @torch.jit._overload_method: a typed declaration for TorchScript; the def that follows is the body.
        bool overload = false;
        for (const ExprPtr& d : st->fn->decorators) overload = overload || dotted(*d) == "torch.jit._overload_method";
        if (overload) {
          pending.push_back(st->fn);
          continue;
        }
        for (const auto& m : c.methods)
          if (m->name == st->fn->name)
            reject(st->fn->loc, fmt::format("method '{}' is defined twice in class '{}'", m->name, c.name));
        for (const auto& o : pending)
          if (o->name == st->fn->name) st->fn->overloads.push_back(o);
        c.methods.push_back(st->fn);
      } else if (is_docstring(*st) || st->kind == StmtKind::Pass) {
      } else if ((st->kind == StmtKind::Assign || st->kind == StmtKind::AnnAssign) && st->targets.size() == 1 &&
                 st->targets[0]->kind == ExprKind::Name && st->targets[0]->name == "__constants__") {
        // TorchScript's list of constant attributes: kiln treats every int/float/bool attribute as one.
      } else if (st->kind == StmtKind::AnnAssign && c.torch_base == "dataclass" && st->targets[0]->kind == ExprKind::Name) {
        c.fields.emplace_back(st->targets[0]->name, st->value.get());  // a field of the generated __init__
      } else if (st->kind == StmtKind::Assign || st->kind == StmtKind::AnnAssign) {
        // A class-level attribute (`expansion = 1`): a constant every instance starts with.
        if (st->targets.size() != 1 || st->targets[0]->kind != ExprKind::Name || !st->value)
          reject(st->loc, "a class-level attribute in kiln script is `name = value`");
        c.attrs.emplace_back(st->targets[0]->name, st->value.get());
      } else {
        reject(st->loc, "a class body in kiln script holds methods (def), class attributes (name = value), a "
                           "docstring and __constants__");
      }
    }
    m_.classes.push_back(s.cls);
    // torch raises only when such a module is called: a base class without forward (an abstract block) is still
    // one to derive from, while building it alone reports this
    if (!c.method("forward") && c.root()->torch_base != "Sequential" && !plain && c.root()->base_import.empty())
      reject(c.loc, fmt::format("class '{}' has no forward method", c.name));
  }

  const Source& src_;
  FileAst& m_;
};

}  // namespace

void collect(const Source& src, FileAst& m, std::vector<std::string>& errors) {
  Collector c(src, m);
  for (const StmtPtr& s : m.body) {
    try {
      c.top_level(s);
    } catch (const Error& e) {
      errors.push_back(e.what());
    }
  }
}

namespace {

// The constructs of code kiln does not evaluate or lower, in source order: each is reported once (one inside
// another only as the outer one), before anything about the code around it (a return-path or type error
// would hide the real reason). Raising at the first (found == nullptr) or collecting every one; shallow
// checks a statement's own expressions and leaves the statements of its blocks to be checked as they are
// lowered, so that a failed one leaves its block's later statements to the recovery (Lowerer::recover_after).
class SupportCheck {
 public:
  SupportCheck(const Source& src, std::string_view where, std::vector<std::string>* found = nullptr, bool shallow = false)
      : src_(src), where_(where), found_(found), shallow_(shallow) {}

  void body(const std::vector<StmtPtr>& b) {
    for (const auto& s : b) stmt(*s);
  }

  void stmt(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::FunctionDef:
        if (where_ == "__init__") return body(s.fn->body);  // the evaluator runs a nested helper as a closure
        return report(s.loc, "nested functions are not supported in {}; define it at the top level");
      case StmtKind::ClassDef: return report(s.loc, "nested classes are not supported in {}; define it at the top level");
      case StmtKind::Import:
      case StmtKind::ImportFrom: return report(s.loc, "imports are only allowed at the top level of a kiln script");
      case StmtKind::While:
      case StmtKind::For:
        if (!s.orelse.empty())
          return report(s.loc, s.kind == StmtKind::For ? "for ... else is not supported in {}" : "while ... else is not supported in {}");
        break;
      case StmtKind::AnnAssign:
        if (!s.value && !evaluated()) return report(s.loc, "an annotated name needs a value in {}");
        break;
      case StmtKind::Raise:
        // __init__ raises as Python does (a kiln::Error with Python's message); lowered code raises when the
        // graph runs, its message formatted while lowering (raise.cpp reads the exception expression itself)
        if (evaluated()) break;
        return;
      case StmtKind::AsyncFor:
      case StmtKind::Try:
      case StmtKind::TryStar:
      case StmtKind::With:
      case StmtKind::AsyncWith:
      case StmtKind::Delete:
        if (evaluated()) break;  // __init__ unbinds local names as Python does
        return unsupported(s.loc, s.kind);
      case StmtKind::Global:
      case StmtKind::Nonlocal:
      case StmtKind::Match: return unsupported(s.loc, s.kind);
      case StmtKind::Expr:
      case StmtKind::Assign:
      case StmtKind::AugAssign:
      case StmtKind::If:
      case StmtKind::Return:
      case StmtKind::Break:
      case StmtKind::Continue:
      case StmtKind::Pass:
      case StmtKind::Assert: break;
    }
    for (const auto& t : s.targets) {
      starred_target(*t);
      expr(t.get());
    }
    expr(s.test.get());
    // an assert's f-string message is written out when lowering (Lowerer::raise_message)
    if (s.kind == StmtKind::Assert && s.value && s.value->kind == ExprKind::FString) {
      for (const ExprPtr& part : s.value->args)
        if (part->kind == ExprKind::FormattedValue) expr(part->args[0].get());
    } else {
      expr(s.value.get());
    }
    if (shallow_) return;
    body(s.body);
    body(s.orelse);
    for (const ExceptHandler& h : s.handlers) {
      expr(h.type.get());
      body(h.body);
    }
    body(s.finalbody);
  }

  void expr(const Expr* e) {
    if (!e) return;
    switch (e->kind) {
      case ExprKind::FString:
      case ExprKind::FormattedValue:
      case ExprKind::ListComp:
      case ExprKind::GeneratorExp:
      case ExprKind::SetComp:
      case ExprKind::DictComp:
        if (evaluated()) {  // __init__ formats and comprehends as Python does
          for (const Comprehension& g : e->generators) {
            expr(g.target.get());
            expr(g.iter.get());
            for (const ExprPtr& c : g.ifs) expr(c.get());
          }
          break;
        }
        return unsupported(e->loc, e->kind);
      case ExprKind::BigInt:
      case ExprKind::Imaginary:
      case ExprKind::Set:
      case ExprKind::NamedExpr:
        if (evaluated()) break;
        return unsupported(e->loc, e->kind);
      case ExprKind::Lambda:
        if (evaluated()) {  // the evaluator calls it as Python does: its defaults and body are __init__ code
          for (const Param& p : e->fn->params) expr(p.default_value.get());
          body(e->fn->body);
          break;
        }
        return unsupported(e->loc, e->kind);
      case ExprKind::Bytes:
      case ExprKind::Yield:
      case ExprKind::YieldFrom:
      case ExprKind::Await: return unsupported(e->loc, e->kind);
      case ExprKind::Dict:
        for (size_t i = 0; i + 1 < e->args.size(); i += 2)
          if (!e->args[i] && !evaluated()) report(e->args[i + 1]->loc, "dict unpacking (**) is not supported in {}");
        break;
      case ExprKind::Call:
        for (const Keyword& k : e->keywords)
          if (k.name.empty() && !evaluated()) report(k.loc, "**kwargs are not supported in {}");
        // torch._assert(cond, f"..."): the message is written out as an assert's (Lowerer::raise_message)
        if (!evaluated() && e->args.size() == 3 && dotted(*e->args[0]) == "torch._assert" && e->args[2]->kind == ExprKind::FString) {
          expr(e->args[1].get());
          for (const ExprPtr& part : e->args[2]->args)
            if (part->kind == ExprKind::FormattedValue) expr(part->args[0].get());
          return;
        }
        break;
      case ExprKind::Name:
      case ExprKind::Int:
      case ExprKind::Float:
      case ExprKind::Bool:
      case ExprKind::None:
      case ExprKind::String:
      case ExprKind::Ellipsis:
      case ExprKind::Tuple:
      case ExprKind::List:
      case ExprKind::Attribute:
      case ExprKind::Subscript:
      case ExprKind::Slice:
      case ExprKind::Unary:
      case ExprKind::Binary:
      case ExprKind::BoolOp:
      case ExprKind::Compare:
      case ExprKind::IfExp:
      case ExprKind::Starred: break;
    }
    for (const auto& a : e->args) expr(a.get());
    for (const Keyword& k : e->keywords) expr(k.value.get());
  }

 private:
  bool evaluated() const { return where_ == "__init__"; }

  // `a, *rest = xs`: lowering unpacks a fixed number of names (__init__'s evaluator takes starred names).
  void starred_target(const Expr& t) {
    if (evaluated()) return;
    if (t.kind == ExprKind::Starred) return report(t.loc, "starred assignment targets are not supported in {}");
    if (t.kind == ExprKind::Tuple || t.kind == ExprKind::List)
      for (const auto& a : t.args) starred_target(*a);
  }

  template <class Kind>
  void unsupported(SourceLoc loc, Kind k) {
    report(loc, std::string(unsupported_construct(k)) + " not supported in {}" + torchscript_accepts(k));
  }

  void report(SourceLoc loc, const std::string& pattern) const {
    std::string message = fmt::format(fmt::runtime(pattern), where_);
    if (!found_) src_.fail(loc, message);
    found_->push_back(format_source_error(src_.name, src_.text, loc, message));
  }

  const Source& src_;
  std::string_view where_;
  std::vector<std::string>* found_;
  bool shallow_;
};

}  // namespace

namespace {
// `@torch.jit.ignore` or `@torch.jit.ignore(drop=True)`, also through `from torch import jit`
JitMark mark_of(const Expr& d) {
  std::string name = dotted(d.kind == ExprKind::Call ? *d.args[0] : d);
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  if (name == "jit.export") return JitMark::Export;
  if (name == "jit.ignore") return JitMark::Ignore;
  if (name == "jit.unused") return JitMark::Unused;
  return JitMark::None;
}
}  // namespace

JitMark jit_mark(const FunctionDef& f) {
  for (const ExprPtr& d : f.decorators)
    if (JitMark m = mark_of(*d); m != JitMark::None) return m;
  return JitMark::None;
}

namespace {
bool no_grad_decorator(const Expr& d) {
  std::string n = dotted(d.kind == ExprKind::Call ? *d.args[0] : d);
  return n == "torch.no_grad" || n == "torch.inference_mode";
}
}  // namespace

bool runs_without_grad(const FunctionDef& f) {
  for (const ExprPtr& d : f.decorators)
    if (no_grad_decorator(*d)) return true;
  return false;
}

const char* jit_mark_name(JitMark m) {
  switch (m) {
    case JitMark::None: return "";
    case JitMark::Export: return "export";
    case JitMark::Ignore: return "ignore";
    case JitMark::Unused: return "unused";
  }
  return "";
}

bool looks_scripted(const FunctionDef& f) {
  for (const ExprPtr& d : f.decorators)
    if (mark_of(*d) != JitMark::Export) return false;
  if (f.is_async || f.kwarg || !f.has_returns) return false;
  static const std::set<std::string> kTypes = {"Tensor", "torch.Tensor", "int", "float", "bool", "str", "None", "Tuple",
                                               "tuple", "typing.Tuple", "List", "list", "typing.List", "Optional",
                                               "typing.Optional", "Dict", "dict", "typing.Dict"};
  return kTypes.count(f.returns.name) != 0;
}

// torchvision's builder decorators, evaluated as what they do for a call kiln can run: register_model()
// records the builder in torchvision's registry, and handle_legacy_interface(...) only maps the old
// `pretrained=` keyword to `weights=` (a `pretrained` argument then reaches the class, which refuses it).
bool builder_decorator(const Expr& d) {
  const Expr& callee = d.kind == ExprKind::Call ? *d.args[0] : d;
  std::string n = dotted(callee);
  return n == "register_model" || n == "handle_legacy_interface";
}

void check_def(const Source& src, const FunctionDef& f, bool method, std::string_view where) {
  for (const ExprPtr& d : f.decorators)
    if (mark_of(*d) != JitMark::Export && !(method && (no_grad_decorator(*d) || dotted(*d) == "property")) &&
        !(where == "__init__" && (dotted(*d) == "staticmethod" || dotted(*d) == "classmethod" || builder_decorator(*d))))
      src.fail(d->loc, fmt::format("decorators other than @torch.jit.export{} are not supported in {}",
                                   method ? ", @torch.no_grad() and @property" : "", where));
  if (f.is_async) src.fail(f.loc, fmt::format("async def is not supported in {}", where));
  bool evaluated = where == "__init__";  // the evaluator binds arguments as Python does
  if (evaluated) {
    SupportCheck check(src, where);
    for (const Param& p : f.params) check.expr(p.default_value.get());
    for (const Param& p : f.kwonly) check.expr(p.default_value.get());
    // every construct of the body at once: the evaluator stops at the first error it meets
    std::vector<std::string> found;
    SupportCheck(src, where, &found).body(f.body);
    raise_all(found);
    return;
  }
  if (f.vararg) src.fail(f.vararg->loc, fmt::format("*args and **kwargs are not supported in {}", where));
  if (f.kwarg) src.fail(f.kwarg->loc, fmt::format("*args and **kwargs are not supported in {}", where));
  if (!f.kwonly.empty()) src.fail(f.kwonly[0].loc, fmt::format("keyword-only parameters are not supported in {}", where));
  if (f.posonly) src.fail(f.params[f.posonly - 1].loc, fmt::format("positional-only parameters are not supported in {}", where));
  if (!method && where != "__init__")  // the evaluator of __init__ needs no types, as Python
    for (const Param& p : f.params)
      if (!p.has_type)
        src.fail(p.loc, fmt::format("parameter '{}' needs a type annotation (kiln script types every parameter)", p.name));
  SupportCheck check(src, where);
  for (const Param& p : f.params) check.expr(p.default_value.get());
  // the body's constructs are checked statement by statement as it is lowered (unsupported_constructs)
}

std::vector<std::string> unsupported_constructs(const Source& src, const Stmt& s) {
  std::vector<std::string> found;
  SupportCheck(src, "kiln script", &found, true).stmt(s);
  return found;
}

std::vector<std::string> unsupported_constructs(const Source& src, const std::vector<StmtPtr>& body) {
  std::vector<std::string> found;
  SupportCheck(src, "kiln script", &found).body(body);
  return found;
}

const char* unsupported_construct(ExprKind k) {
  switch (k) {
    case ExprKind::BigInt: return "integer literals beyond int64 are";
    case ExprKind::Imaginary: return "complex numbers are";
    case ExprKind::Bytes: return "bytes literals are";
    case ExprKind::FString:
    case ExprKind::FormattedValue: return "f-strings are";
    case ExprKind::Set: return "set literals are";
    case ExprKind::ListComp: return "list comprehensions are";
    case ExprKind::SetComp: return "set comprehensions are";
    case ExprKind::DictComp: return "dict comprehensions are";
    case ExprKind::GeneratorExp: return "generator expressions are";
    case ExprKind::Lambda: return "lambda is";
    case ExprKind::NamedExpr: return "assignment expressions (:=) are";
    case ExprKind::Yield:
    case ExprKind::YieldFrom: return "yield is";
    case ExprKind::Await: return "await is";
    case ExprKind::Name:
    case ExprKind::Int:
    case ExprKind::Float:
    case ExprKind::Bool:
    case ExprKind::None:
    case ExprKind::String:
    case ExprKind::Ellipsis:
    case ExprKind::Tuple:
    case ExprKind::List:
    case ExprKind::Attribute:
    case ExprKind::Call:
    case ExprKind::Subscript:
    case ExprKind::Slice:
    case ExprKind::Unary:
    case ExprKind::Binary:
    case ExprKind::BoolOp:
    case ExprKind::Compare:
    case ExprKind::IfExp:
    case ExprKind::Starred:
    case ExprKind::Dict: break;
  }
  return "this expression is";
}

const char* unsupported_construct(StmtKind k) {
  switch (k) {
    case StmtKind::FunctionDef: return "nested functions are";
    case StmtKind::ClassDef: return "nested classes are";
    case StmtKind::Import:
    case StmtKind::ImportFrom: return "imports inside a function are";
    case StmtKind::AsyncFor: return "async for is";
    case StmtKind::Try:
    case StmtKind::TryStar: return "try is";
    case StmtKind::With: return "with is";
    case StmtKind::AsyncWith: return "async with is";
    case StmtKind::Raise: return "raise is";
    case StmtKind::Global: return "global is";
    case StmtKind::Nonlocal: return "nonlocal is";
    case StmtKind::Delete: return "del is";
    case StmtKind::Match: return "match is";
    case StmtKind::Expr:
    case StmtKind::Assign:
    case StmtKind::AugAssign:
    case StmtKind::AnnAssign:
    case StmtKind::If:
    case StmtKind::While:
    case StmtKind::For:
    case StmtKind::Return:
    case StmtKind::Break:
    case StmtKind::Continue:
    case StmtKind::Pass:
    case StmtKind::Assert: break;
  }
  return "this statement is";
}

std::string dotted(const Expr& e) {
  if (e.kind == ExprKind::Name) return e.name;
  if (e.kind == ExprKind::Attribute) {
    std::string base = dotted(*e.args[0]);
    return base.empty() ? "" : base + "." + e.name;
  }
  return "";
}

}  // namespace kiln::script
