// Builds a class of a model file as ScriptFile::build() does, loads a state_dict and takes SGD steps
// on cross_entropy, in training mode (batch norm on batch statistics, updating its running ones) or in
// eval mode (batch norm frozen on its running statistics, as fine-tuning does), or in training mode in float64
// (train64: the loaded weights and the input converted), then saves the state_dict: what tests/script/torchvision/check_torchvision_sgd.py compares with PyTorch's
// torch.optim.SGD on torchvision's installed model files.
//
//   script_train_tool FILE.py CLASS WEIGHTS.safetensors INPUT.npy TARGET.npy STEPS LR train|eval|train64 OUT.safetensors [ARG...]
//
// Each ARG is Python over the file's names, NAME=ARG for a keyword, as for script_module_tool. A
// kiln::Error is printed as `error: ...` on stderr with exit status 2.
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "eager/io.h"
#include "eager/losses.h"
#include "eager/optim/optimizer.h"
#include "script_frontend/script.h"
#include "script_tool_args.h"

int main(int argc, char** argv) {
  if (argc < 10) {
    std::cerr << "usage: script_train_tool FILE.py CLASS WEIGHTS.safetensors INPUT.npy TARGET.npy STEPS LR train|eval|train64 OUT.safetensors [ARG...]\n";
    return 1;
  }
  try {
    kiln::ScriptFile file = kiln::script_file(argv[1]);
    auto net = kiln::test::build_from_words(file, argv[2], argv + 10, argv + argc);
    net->load(argv[3]);
    std::string mode = argv[8];
    if (mode == "eval") net->eval();
    else net->train();
    if (mode == "train64") net->to(kiln::DType::Float64);
    kiln::Tensor x = kiln::load_npy(argv[4]);
    if (mode == "train64") x = x.to(kiln::DType::Float64);
    kiln::Tensor target = kiln::load_npy(argv[5]);
    int steps = std::stoi(argv[6]);
    kiln::optim::SGD opt(net->parameters(), {std::stod(argv[7])});
    for (int s = 0; s < steps; ++s) {
      kiln::Tensor loss = kiln::cross_entropy(net->forward(x), target);
      opt.zero_grad();
      loss.backward();
      opt.step();
    }
    net->save(argv[9]);
  } catch (const kiln::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
