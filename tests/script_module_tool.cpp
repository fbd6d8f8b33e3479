// Builds a class of a model file as ScriptFile::build() does, loads a state_dict and runs forward in
// eval mode on the interpreter and through compile(): what tests/script/torchvision compares with
// PyTorch on torchvision's installed model files. A tuple result is saved as its first element.
//
//   script_module_tool FILE.py CLASS WEIGHTS.safetensors INPUT.npy OUT_INTERP.npy OUT_COMPILED.npy [ARG...]
//
// Each ARG is Python over the file's names (BasicBlock, [2, 2, 2, 2], make_layers(cfgs['A'])), NAME=ARG for
// a keyword. A kiln::Error is printed as `error: ...` on stderr with exit status 2.
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "eager/io.h"
#include "jit/compiled_function.h"
#include "script_frontend/script.h"
#include "script_tool_args.h"

int main(int argc, char** argv) {
  if (argc < 7) {
    std::cerr << "usage: script_module_tool FILE.py CLASS WEIGHTS.safetensors INPUT.npy OUT_INTERP.npy OUT_COMPILED.npy [ARG...]\n";
    return 1;
  }
  try {
    kiln::ScriptFile file = kiln::script_file(argv[1]);
    auto net = kiln::test::build_from_words(file, argv[2], argv + 7, argv + argc);
    net->load(argv[3]);
    net->eval();
    kiln::Tensor x = kiln::load_npy(argv[4]);
    // A forward that returns a namedtuple (GoogLeNetOutputs) gives its first field, the logits: what
    // torchvision's eager forward returns in eval mode.
    auto first = [](const kiln::IValue& v) { return v.is_tuple() ? v.elements().at(0).to_tensor() : v.to_tensor(); };
    kiln::save_npy(argv[5], first(net->call({x}).at(0)));
    kiln::Function compiled = kiln::compile(net->method());
    kiln::save_npy(argv[6], first(compiled.call({x}).at(0)));
  } catch (const kiln::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
