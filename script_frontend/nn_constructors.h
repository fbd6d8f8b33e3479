#pragma once
// torch.nn's module constructors as __init__ calls them (nn.Linear(...), nn.Sequential(...), nn.ModuleDict(...),
// nn.Parameter(...)): each builds kiln's eager nn::Module and the module object lowering reads as it. The
// evaluator of __init__ (construct.cpp) derives from it and gives what calling them takes of Python: errors in
// the running file, binding arguments, iterating. Internal to script_frontend.
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "script_frontend/objects.h"

namespace kiln {
class ScriptedModule;
}

namespace kiln::script {

// Bound arguments of a call by parameter name; absent optional ones hold their default.
using Bound = std::map<std::string, Static>;

struct Signature {
  std::vector<std::string> params;
  size_t required;
  std::vector<Static> defaults;  // for params[required..]
  bool varargs = false;           // nn.Sequential(*modules), nn.Identity(*args)
};

class NnConstructors {
 public:
  virtual ~NnConstructors() = default;

 protected:
  virtual const Source& source() const = 0;  // the file whose code runs now, where errors point
  [[noreturn]] void fail(SourceLoc loc, std::string_view msg) const { source().fail(loc, msg); }
  virtual Bound bind(const std::string& what, const Signature& sig, std::vector<Static> args, const Bound& kwargs,
                     SourceLoc loc, std::vector<Static>* rest = nullptr) = 0;
  virtual std::vector<Static> iterate(const Static& seq, SourceLoc loc) = 0;
  virtual bool need_bool(const Static& v, SourceLoc loc, std::string_view what) = 0;

  Static layer(const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc);
  Static registered_layer(const nn::LayerSpec& spec, std::vector<Static>& a, const Bound& kw, SourceLoc loc);
  Static activation_name(const nn::LayerSpec& spec, const Static& v, SourceLoc loc);
  void add_item(Object& container, const Static& m, SourceLoc loc, std::string name = "");
  void add_items(Object& container, const std::vector<Static>& mods, SourceLoc loc);

  // nn.ParameterList / nn.ParameterDict as __init__ holds them: a List / Dict of parameters whose s names the class
  Static parameter_container(const std::string& name, std::vector<Static>& a, const Bound& kw, SourceLoc loc);
  Static as_parameter(const Static& v, const std::string& container, SourceLoc loc);
  void parameter_dict_set(Static& d, const Static& key, const Static& v, SourceLoc loc);

  static ScriptedModule& module_of(const Object& o);
  static std::string prefix(const Object& o);
  static void set_path(Object& o, const std::string& p);

  std::map<const Object*, std::shared_ptr<nn::Module>> owned_;  // modules built and not yet attached
  std::map<const nn::Module*, ObjectPtr> objs_;  // every module object built, by its nn::Module (modules())
  Static make(Layer l, const std::string& cls, std::shared_ptr<nn::Module> m, Bound attrs);

 private:
  IValue ivalue_of(const Static& v, SourceLoc loc, const std::string& what);
};

}  // namespace kiln::script
