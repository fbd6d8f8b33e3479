// kiln: the command-line face of script() and of kiln::load.
//
//   kiln run FILE.py FUNC ARG... [-o OUT.npy]... [--backend interp|x86]
//                                  run FUNC; each ARG a .npy path (Tensor), a literal, or --randn SHAPE;
//                                  x86: through the JIT
//   kiln run MODEL.kiln ARG... [-o OUT.npy]... [--backend interp|x86]
//                                  the same for a function saved with kiln::save
//   kiln ir FILE.py FUNC [--after PASS]   print FUNC's IR (after the JIT pipeline up to PASS)
//   kiln ir MODEL.kiln [--after PASS]     the same for a saved function
//   kiln dot FILE.py FUNC [--after PASS] [-o GRAPH.svg]  the same as Graphviz (rendered to .svg/.png/.pdf
//                                  by Graphviz's dot when -o names one)
//   kiln check FILE.py [CLASS ARGS...]    report errors only: of the script functions and of each class that
//                                  builds with its defaults, or of CLASS built from ARGS
//   kiln profile FILE.py FUNC ARG... [--trace OUT.json] [--warmup N]
//                                  run FUNC under kiln::Profiler after N unprofiled runs (default 1);
//                                  print ops, FLOPs, time and memory
//
// A FILE is read as a saved function when its name ends in .kiln or it starts with the magic "KILN".
//
// Options are parsed into one struct before any command runs.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>


#include "backends/x86/isa.h"
#include "core/format.h"
#include "core/ir/dot.h"
#include "eager/autograd/graph.h"
#include "eager/io.h"
#include "eager/ops.h"
#include "eager/profiler/profiler.h"
#include "jit/compiled_function.h"
#include "jit/kiln_file.h"
#include "jit/pass_manager.h"
#include "jit/serialize.h"
#include "script_frontend/cli/cli_args.h"
#include "script_frontend/cli/graphviz.h"
#include "script_frontend/lowerer.h"
#include "script_frontend/script.h"

namespace {

constexpr const char* kUsage =
    "usage: kiln run FILE.py FUNC ARG... [-o OUT.npy]... [--backend interp|x86]\n"
    "       kiln run MODEL.kiln ARG... [-o OUT.npy]... [--backend interp|x86]\n"
    "       kiln ir FILE.py FUNC [--after PASS]    (or MODEL.kiln)\n"
    "       kiln dot FILE.py FUNC [--after PASS] [-o GRAPH.svg|.png|.pdf|.dot]   (or MODEL.kiln)\n"
    "       kiln check FILE.py [CLASS ARG... NAME=ARG...]   (ARG: 3, 0.5, True, None, 2,2,2,2 for a list, or Python\n"
    "                                  over the file's names: BasicBlock, [2, 2, 2, 2], nn.BatchNorm2d, make_layers(cfgs['A']);\n"
    "                                  a word the file does not bind is a string: act=GELU)\n"
    "       kiln profile FILE.py FUNC ARG... [--trace OUT.json] [--warmup N]   (or MODEL.kiln ARG...)\n"
    "ARG: a .npy file (a tensor), a literal (int, float, bool, None, a,b,c for a list), or --randn 64x784\n";

// A command-line argument for a parameter: its text, or the shape of a --randn tensor.
struct Arg {
  std::string text;
  bool randn = false;
};

struct Options {
  std::string command;
  std::string file;
  bool saved = false;                // file is a .kiln file from kiln::save
  std::string function;
  std::vector<Arg> args;             // run: one per parameter
  std::vector<std::string> outputs;  // run: -o paths, one per returned tensor
  std::string backend = "interp";    // run: interp (the reference interpreter) or x86 (the JIT)
  std::string after;                 // ir, dot: run the JIT pipeline up to this pass first
  std::string trace;                 // profile: write a Chrome trace here
  std::string warmup = "1";          // profile: unprofiled runs first (BLAS start-up, allocator cache)
};

bool is_saved_function(const std::string& file) {
  return (file.size() > 5 && file.compare(file.size() - 5, 5, ".kiln") == 0) || kiln::jit::has_kiln_magic(file);
}

Options parse_options(int argc, char** argv) {
  Options o;
  std::vector<Arg> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-o") {
      if (i + 1 >= argc) kiln::fail("kiln: -o needs a file name");
      o.outputs.push_back(argv[++i]);
    } else if (a == "--backend" || a == "--after" || a == "--trace" || a == "--warmup") {
      if (i + 1 >= argc) kiln::fail("kiln: {} needs a value", a);
      (a == "--backend" ? o.backend : a == "--after" ? o.after : a == "--trace" ? o.trace : o.warmup) = argv[++i];
    } else if (a == "--randn") {
      if (i + 1 >= argc) kiln::fail("kiln: --randn needs a shape, e.g. --randn 64x784");
      positional.push_back({argv[++i], true});
    } else if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a.size() > 1 && a[0] == '-' && a[1] == '-') {
      kiln::fail("kiln: unknown option {}", a);
    } else {
      positional.push_back({a});
    }
  }
  // The command, the file and FUNC are plain words; --randn stands only for an argument.
  size_t words = 0;
  while (words < positional.size() && !positional[words].randn) ++words;
  if (words == 0) kiln::fail("kiln: missing command\n{}", kUsage);
  o.command = positional[0].text;
  if (o.command != "run" && o.command != "ir" && o.command != "dot" && o.command != "check" && o.command != "profile")
    kiln::fail("kiln: unknown command '{}'\n{}", o.command, kUsage);
  if (words < 2) kiln::fail("kiln {}: missing FILE.py or MODEL.kiln\n{}", o.command, kUsage);
  o.file = positional[1].text;
  o.saved = o.command != "check" && is_saved_function(o.file);
  size_t first_arg = 2;
  if (!o.saved && words >= 3) o.function = positional[first_arg++].text;
  o.args.assign(positional.begin() + std::min(first_arg, positional.size()), positional.end());
  bool needs_fn = o.command != "check" && !o.saved;
  if (needs_fn && o.function.empty()) kiln::fail("kiln {}: missing FUNC\n{}", o.command, kUsage);
  if (o.command != "run" && o.command != "profile" && o.command != "check" && !o.args.empty())
    kiln::fail("kiln {}: unexpected argument '{}'", o.command, o.args[0].randn ? "--randn" : o.args[0].text);
  if (o.command != "run" && o.command != "dot" && !o.outputs.empty())
    kiln::fail("kiln {}: -o is only for kiln run and kiln dot", o.command);
  if (o.command == "dot" && o.outputs.size() > 1) kiln::fail("kiln dot: one -o file, got {}", o.outputs.size());
  if (o.backend != "interp" && o.backend != "x86") kiln::fail("kiln: unknown backend '{}' (interp, x86)", o.backend);
  if (o.command != "run" && o.backend != "interp") kiln::fail("kiln {}: --backend is only for kiln run", o.command);
  if (o.command != "ir" && o.command != "dot" && !o.after.empty())
    kiln::fail("kiln {}: --after is only for kiln ir and kiln dot", o.command);
  if (o.command != "profile" && !o.trace.empty()) kiln::fail("kiln {}: --trace is only for kiln profile", o.command);
  if (o.warmup.empty() || o.warmup.find_first_not_of("0123456789") != std::string::npos)
    kiln::fail("kiln: --warmup expects a count, got '{}'", o.warmup);
  if (!o.after.empty()) kiln::jit::find_pass(o.after);  // raises listing the passes
  return o;
}

// The function a run, ir or dot command works on: FUNC of the script, or the saved function.
kiln::Function function_of(const Options& o) {
  if (o.saved) return kiln::load(o.file);
  return kiln::script_file(o.file).function(o.function);
}

void flatten(const kiln::IValue& v, std::vector<kiln::IValue>& out) {
  if (v.is_tuple() || v.is_list())
    for (const kiln::IValue& e : v.elements()) flatten(e, out);
  else out.push_back(v);
}

// FUNC's arguments from their command-line texts, by the parameter types.
std::vector<kiln::IValue> call_args(const Options& o, const kiln::Function& f) {
  std::vector<kiln::ir::Type> types = f.input_types();
  if (o.args.size() != types.size())
    kiln::fail("kiln {}: {} takes {} arguments, got {}", o.command, f.name(), types.size(), o.args.size());
  kiln::manual_seed(0);  // --randn inputs are the same on every run
  std::vector<kiln::IValue> ins;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string& param = f.graph().inputs()[i]->name();
    ins.push_back(o.args[i].randn ? kiln::cli::random_arg(o.args[i].text, types[i], param)
                                  : kiln::cli::parse_arg(o.args[i].text, types[i], param));
  }
  return ins;
}

int run(const Options& o) {
  // Inference: a saved model's parameters require grad, which would send compiled calls down the
  // training path (a forward that keeps activations for a backward that never comes).
  kiln::NoGradGuard no_grad;
  kiln::Function f = function_of(o);
  if (o.backend == "x86") {
    if (kiln::x86::best_isa() == kiln::x86::Isa::None) kiln::fail("kiln run: --backend x86 needs a CPU with AVX2");
    f = kiln::compile(f);
  }
  std::vector<kiln::IValue> ins = call_args(o, f);
  std::vector<kiln::IValue> flat;
  for (const kiln::IValue& v : f.call(ins)) flatten(v, flat);
  size_t tensors = 0;
  for (const kiln::IValue& v : flat) tensors += v.is_tensor();
  if (!o.outputs.empty() && o.outputs.size() != tensors)
    kiln::fail("kiln run: {} returns {} tensors but {} -o files were given", f.name(), tensors, o.outputs.size());
  size_t next = 0;
  for (const kiln::IValue& v : flat) {
    if (v.is_tensor() && !o.outputs.empty()) kiln::save_npy(o.outputs[next++], v.to_tensor());
    else if (v.is_tensor()) std::cout << v.to_tensor() << "\n";
    else std::cout << v.repr() << "\n";
  }
  return 0;
}

// Runs FUNC once on the interpreter under the profiler (every op passes the dispatcher there).
int profile(const Options& o) {
  kiln::ScriptFile m = kiln::script_file(o.file);
  kiln::Function f = m.function(o.function);
  std::vector<kiln::IValue> ins = call_args(o, f);
  for (int i = 0; i < std::stoi(o.warmup); ++i) f.call(ins);
  kiln::Profiler prof;
  f.call(ins);
  prof.stop();
  std::cout << prof.table();
  if (!o.trace.empty()) prof.save_chrome_trace(o.trace);
  return 0;
}

// A constructor argument as written: an int, a float, True/False, None, or comma-separated values (a list).
kiln::IValue literal(const std::string& t) {
  if (t.find(',') != std::string::npos && t.find_first_of("[({'\"") == std::string::npos) {
    std::vector<kiln::IValue> es;
    size_t start = 0;
    for (size_t comma; (comma = t.find(',', start)) != std::string::npos; start = comma + 1)
      if (comma > start) es.push_back(literal(t.substr(start, comma - start)));
    if (start < t.size()) es.push_back(literal(t.substr(start)));
    return kiln::IValue::list(std::move(es));
  }
  if (t == "True" || t == "False") return kiln::IValue(t == "True");
  if (t == "None") return kiln::IValue();
  char* end = nullptr;
  long long i = std::strtoll(t.c_str(), &end, 10);
  if (!t.empty() && *end == '\0') return kiln::IValue(int64_t(i));
  double d = std::strtod(t.c_str(), &end);
  if (!t.empty() && *end == '\0') return kiln::IValue(d);
  return kiln::IValue(t);  // a string
}

// Without CLASS: every function kiln script could be asked for, and every nn.Module class that builds with
// its defaults (the others are named as skipped, on stdout); every error is reported and the exit status
// is 1 when there is one. With CLASS: the class built from the arguments (NAME=VALUE for keywords), its
// __init__ run, its forward and exports lowered.
int check(const Options& o) {
  if (o.function.empty()) {
    std::ifstream f(o.file, std::ios::binary);
    if (!f) kiln::fail("kiln check: cannot open {}", o.file);
    std::stringstream ss;
    ss << f.rdbuf();
    std::vector<std::string> skipped;
    std::vector<std::string> errors = kiln::script::check_all(ss.str(), o.file, skipped);
    for (const std::string& s : skipped) std::cout << s << "\n";
    for (const std::string& e : errors) std::cerr << e << "\n";
    return errors.empty() ? 0 : 1;
  }
  kiln::ScriptFile file = kiln::script_file(o.file);
  // A literal (3, 0.5, True, None, 2,2,2,2), or Python over the file's names: a word the file binds at its top
  // level (BasicBlock, make_layers, CFG, nn) or text with [ ( { ' " or . in it ([2, 2, 2, 2], nn.BatchNorm2d,
  // make_layers(cfgs['A'])). Any other word is a string (act=GELU where the file has no GELU: "GELU"), but for
  // a capitalised typo of a class of the file (BasicBlok), read as Python so that its error says which.
  std::vector<std::string> classes = file.class_names();
  auto value = [&](const std::string& t) -> kiln::ScriptValue {
    kiln::IValue v = literal(t);
    if (!v.is_string()) return v;
    bool misspelt = std::isupper((unsigned char)t[0]) && !kiln::script::did_you_mean(t, classes).empty();
    bool python = file.binds(t) || t.find_first_of("[({'\".") != std::string::npos || misspelt;
    return python ? file.value(t) : kiln::ScriptValue(v);
  };
  std::vector<kiln::ScriptValue> args;
  std::map<std::string, kiln::ScriptValue> kwargs;
  for (const Arg& a : o.args) {
    if (a.randn) kiln::fail("kiln check: --randn is not a constructor argument");
    size_t eq = a.text.find('=');
    bool keyword = eq != std::string::npos && eq > 0 && a.text.find_first_of("[('\"") > eq && a.text[eq + 1] != '=';
    if (keyword) kwargs.emplace(a.text.substr(0, eq), value(a.text.substr(eq + 1)));
    else args.push_back(value(a.text));
  }
  file.build(o.function, args, kwargs);
  return 0;
}

int dispatch(const Options& o) {
  if (o.command == "run") return run(o);
  if (o.command == "profile") return profile(o);
  if (o.command == "check") return check(o);
  if (o.command == "ir" || o.command == "dot") {
    kiln::Function f = function_of(o);
    std::unique_ptr<kiln::ir::Graph> g = f.graph().copy();
    if (!o.after.empty()) kiln::jit::run_pipeline(*g, {.stop_after = o.after});
    if (o.command == "ir") std::cout << g->str();
    else if (o.outputs.empty()) std::cout << kiln::ir::to_dot(*g, f.name());
    else kiln::cli::write_graph(kiln::ir::to_dot(*g, f.name()), o.outputs[0]);
    return 0;
  }
  kiln::fail("kiln: unknown command '{}'\n{}", o.command, kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return dispatch(parse_options(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
