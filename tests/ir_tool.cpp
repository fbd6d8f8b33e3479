// ir_tool: the driver of the golden IR tests (tests/ir/*.ir, run through FileCheck by meson test).
//
//   ir_tool roundtrip FILE   parse, verify, print; fails unless the print equals the file's IR text
//   ir_tool error FILE       expects parsing or verifying to fail; prints the error
//   ir_tool dot FILE         parse and print Graphviz
//   ir_tool run FILE         parse and run on the interpreter with the inputs named in `# INPUT:` lines
//   ir_tool pass NAME FILE   parse, run one JIT pass (or `pipeline` for all), print the graph
//   ir_tool trace NAME [FILE]  print the graph of a built-in traced sample (tests/ir_samples.cpp)
#include <fstream>
#include <iostream>
#include <sstream>

#include "kiln/kiln.h"
#include "ir_samples.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw kiln::Error("ir_tool: cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The file without comment and blank lines: what print(parse(file)) must reproduce.
std::string ir_text(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    size_t p = line.find_first_not_of(" \t");
    if (p == std::string::npos || line[p] == '#') continue;
    out += line + "\n";
  }
  return out;
}

// `# INPUT: 3` or `# INPUT: tensor f32 [2] 1 2`: the interpreter's inputs, in order.
std::vector<kiln::IValue> inputs_of(const std::string& text) {
  std::vector<kiln::IValue> ins;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t p = line.find("# INPUT:");
    if (p == std::string::npos) continue;
    std::istringstream ls(line.substr(p + 8));
    std::string kind;
    ls >> kind;
    if (kind == "int") {
      int64_t v;
      ls >> v;
      ins.emplace_back(v);
    } else if (kind == "float") {
      double v;
      ls >> v;
      ins.emplace_back(v);
    } else if (kind == "bool") {
      std::string v;
      ls >> v;
      ins.emplace_back(v == "true");
    } else {
      std::vector<double> vals;
      double v;
      while (ls >> v) vals.push_back(v);
      ins.emplace_back(kiln::tensor(vals));
    }
  }
  return ins;
}

int run(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: ir_tool roundtrip|error|dot|run FILE | ir_tool trace NAME\n";
    return 2;
  }
  std::string mode = argv[1], arg = argc > 3 ? argv[2] : "", path = argv[argc - 1];
  if (mode == "trace") {
    std::cout << kiln::test::traced_sample(argc > 3 ? arg : path).graph();
    return 0;
  }
  std::string text = read_file(path);
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (mode == "error") {
    try {
      auto g = kiln::ir::parse_ir(text, name);
      kiln::ir::verify(*g);
    } catch (const kiln::Error& e) {
      std::cout << e.what() << "\n";
      return 0;
    }
    std::cout << "ir_tool: expected an error, the graph is valid\n";
    return 1;
  }
  auto g = kiln::ir::parse_ir(text, name);
  kiln::ir::verify(*g);
  if (mode == "roundtrip") {
    std::string printed = g->str();
    std::cout << printed;
    if (printed != ir_text(text)) {
      std::cerr << "ir_tool: print(parse(text)) differs from the text:\n--- text\n" << ir_text(text) << "--- printed\n"
                << printed;
      return 1;
    }
    return 0;
  }
  if (mode == "pass") {
    if (arg == "pipeline") {
      for (const auto& st : kiln::jit::run_pipeline(*g)) std::cout << "# " << st.name << ": " << st.changes << (st.note.empty() ? "" : " (" + st.note + ")") << "\n";
    } else {
      auto r = kiln::jit::find_pass(arg).run(*g);
      kiln::ir::verify(*g);
      std::cout << "# " << arg << ": " << r.changes << " changes" << (r.note.empty() ? "" : "; " + r.note) << "\n";
    }
    std::cout << g->str();
    return 0;
  }
  if (mode == "dot") {
    std::cout << kiln::ir::to_dot(*g, name);
    return 0;
  }
  if (mode == "run") {
    for (const kiln::IValue& v : kiln::interp::run(*g, inputs_of(text))) {
      if (v.is_tensor()) std::cout << v.to_tensor() << "\n";
      else std::cout << v.repr() << "\n";
    }
    return 0;
  }
  std::cerr << "ir_tool: unknown mode " << mode << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const kiln::Error& e) {
    std::cout << e.what() << "\n";
    return 1;
  }
}
