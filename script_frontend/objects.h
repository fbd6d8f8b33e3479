#pragma once
// What a class's __init__ builds, as lowering sees `self`: a tree of module objects, each holding its
// attributes (numbers, strings, lists, submodules, parameters and buffers) and the kiln nn::Module
// that owns its tensors. Internal to script_frontend.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/ir/ivalue.h"
#include "core/tensor.h"
#include "eager/nn/module.h"
#include "script_frontend/ast.h"
#include "script_frontend/source.h"

namespace kiln {
class ScriptedModule;
namespace nn {
struct LayerSpec;
}
}

namespace kiln::script {

// A parsed file kept alive by every module built from it (its methods are lowered on first call).
struct File {
  Source src;
  FileAst ast;
};

struct Object;
using ObjectPtr = std::shared_ptr<Object>;

// A value __init__ computes. Tensors are parameters, buffers or plain tensor attributes.
struct Static {
  // Class, Function, Partial and Namespace are what published __init__s pass around as values
  // (`block=BasicBlock`, `norm_layer=nn.BatchNorm2d`, `partial(nn.LayerNorm, eps=1e-6)`, `nn`).
  // Exception: what `except E as e` binds, the class's name in s and its args in elems.
  enum class Kind : uint8_t { None, Int, Float, Bool, Str, Tuple, List, Dict, Module, Tensor, Class, Function, Partial, Namespace, Exception };
  Kind kind = Kind::None;
  int64_t i = 0;
  double f = 0;
  // Str: the text. Class: a torch.nn layer's name (cls null). Function: a builtin's name (fn null).
  // Namespace: the module's dotted name ("torch.nn", "torch.nn.init", "warnings").
  std::string s;
  // Tuple, List: the elements. Dict: (key, value) tuples in insertion order. Partial: the callee, then
  // the bound positional arguments, then the values of `keys`.
  std::vector<Static> elems;
  std::vector<std::string> keys;  // Partial: the bound keyword arguments' names
  ObjectPtr obj;
  Tensor tensor;
  const ClassDef* cls = nullptr;     // Class: a class of a file
  const FunctionDef* fn = nullptr;   // Function: a function of a file
  bool parameter = false;  // a Tensor wrapped in nn.Parameter (registered when assigned to self)
  const Expr* annotation = nullptr;  // List: the type torch.jit.annotate gave it (an empty one is typed by it)

  static Static none() { return {}; }
  static Static integer(int64_t v) {
    Static x;
    x.kind = Kind::Int;
    x.i = v;
    return x;
  }
  static Static number(double v) {
    Static x;
    x.kind = Kind::Float;
    x.f = v;
    return x;
  }
  static Static boolean(bool v) {
    Static x;
    x.kind = Kind::Bool;
    x.i = v;
    return x;
  }
  static Static str(std::string v) {
    Static x;
    x.kind = Kind::Str;
    x.s = std::move(v);
    return x;
  }
  static Static seq(Kind k, std::vector<Static> es) {
    Static x;
    x.kind = k;
    x.elems = std::move(es);
    return x;
  }
  static Static module(ObjectPtr o) {
    Static x;
    x.kind = Kind::Module;
    x.obj = std::move(o);
    return x;
  }
  static Static of_tensor(Tensor t, bool parameter) {
    Static x;
    x.kind = Kind::Tensor;
    x.tensor = std::move(t);
    x.parameter = parameter;
    return x;
  }
  static Static named(Kind k, std::string name) {
    Static x;
    x.kind = k;
    x.s = std::move(name);
    return x;
  }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  double as_double() const { return kind == Kind::Float ? f : double(i); }
  std::string type_name() const;  // "int", "List[int]", "Linear", ...
};

// What a module object is: a class of the file (User), a layer of eager's registry (Registered: built and
// lowered from its nn::LayerSpec), or a torch.nn layer the frontend builds itself.
// A class of the file deriving from nn.Sequential without a forward of its own is a Sequential whose
// __init__ is the class's (torchvision's Conv2dNormActivation): `def` is set and lowering calls its items.
// A ModuleDict holds its modules as items named by its keys, read as attributes (`self.transformer.wte`).
enum class Layer : uint8_t { User, Registered, Sequential, ModuleList, ModuleDict };

struct Object {
  Layer layer = Layer::User;
  const nn::LayerSpec* spec = nullptr;  // Layer::Registered
  std::string cls;                // "Net", "Linear", ...
  const ClassDef* def = nullptr;  // Layer::User
  nn::Module* module = nullptr;   // owned by the parent module's children (the caller owns the root)
  // User classes: what __init__ assigned to self, by name. Layers: their constructor arguments.
  std::map<std::string, Static> attrs;
  std::vector<ObjectPtr> items;  // Sequential / ModuleList, in order
  std::vector<std::string> item_names;  // their state_dict names: "0", "1", ... or an OrderedDict's keys
  std::string path;              // its state_dict prefix: "", "features", "layers.0"
  std::shared_ptr<const File> file;  // the file of its class (methods are lowered in that file's names)
  // A registered layer's parameters that __init__ replaced (`self.transformer.wte.weight = self.lm_head.weight`):
  // (the tensor the layer's lowering reads, the tensor it now is).
  std::vector<std::pair<Tensor, Tensor>> tied;
  bool plain = false;  // an instance of a plain class or @dataclass: a config object, not a submodule
  // The root's: every file __init__ read, kept while the module lives (a class value from one may be an
  // attribute without a module of that file in the tree).
  std::vector<std::shared_ptr<const File>> imports;

  const Static* attr(const std::string& name) const {
    auto it = attrs.find(name);
    return it == attrs.end() ? nullptr : &it->second;
  }
  // A ModuleDict's module by key, or null.
  ObjectPtr item(const std::string& name) const {
    for (size_t i = 0; i < items.size(); ++i)
      if (item_names[i] == name) return items[i];
    return nullptr;
  }
  // Depth-first: this object, then its submodules (attributes and items), each once.
  void walk(const std::function<void(const Object&)>& f) const;
};

// Runs `cls.__init__(args, kwargs)`: builds the object tree and registers every submodule, parameter
// and buffer in the returned module under PyTorch's names. Raises kiln::Error at the first problem,
// pointing into the file.
std::shared_ptr<ScriptedModule> construct(const std::shared_ptr<const File>& file, const ClassDef& cls,
                                          const std::vector<Static>& args, const std::map<std::string, Static>& kwargs);
// A constructor argument: a value, or an expression of the file (`expr`, evaluated in the file's module
// scope when the class is built; its own Source for errors).
struct CtorArg {
  Static value;
  std::shared_ptr<const File> expr;
};
std::shared_ptr<ScriptedModule> construct(const std::shared_ptr<const File>& file, const ClassDef& cls,
                                          const std::vector<CtorArg>& args, const std::map<std::string, CtorArg>& kwargs);
// Runs a builder function of the file (`resnet18(weights=None)`) and returns the module it built.
std::shared_ptr<ScriptedModule> construct_by(const std::shared_ptr<const File>& file, const FunctionDef& builder,
                                             const std::vector<CtorArg>& args, const std::map<std::string, CtorArg>& kwargs);
// A module-level name of `file` that lowered code reads (module_globals.cpp): a constant, or what a relative
// import binds, evaluated as __init__ evaluates; `home` is the file of a function value, `files` every file the
// evaluation read (they own the definitions). nullopt when the file binds no such name.
struct ModuleGlobal {
  Static value;
  std::shared_ptr<const File> home;
  std::vector<std::shared_ptr<const File>> files;
};
// `attribute`: NAME read as `module.NAME` of a module the file is (`from . import helpers`, then `helpers.f`), so
// its functions and classes too.
std::optional<ModuleGlobal> module_global(const std::shared_ptr<const File>& file, const std::string& name, SourceLoc loc,
                                          const std::vector<std::shared_ptr<const File>>& known, bool attribute = false);
// A module of the model's package as a value (`from . import helpers`, `from .. import pkgmod`): a Namespace
// named by its file's path.
inline Static file_module(const std::string& path) { return Static::named(Static::Kind::Namespace, "file:" + path); }
inline bool is_file_module(const Static& v) { return v.kind == Static::Kind::Namespace && v.s.rfind("file:", 0) == 0; }
inline std::string file_module_path(const Static& v) { return v.s.substr(5); }
// The dotted name Python gives the module of file `path` (module_names.cpp), for messages.
std::string module_dotted_name(const std::string& path);
// An IValue given to module() as a constructor argument.
Static static_of(const IValue& v);

}  // namespace kiln::script
