#pragma once
// torch.nn's classes by name, with the torch module each lives in. Internal to script_frontend.
#include <string>

namespace kiln::script {

// "torch.nn.modules.linear" for "Linear"; null when torch.nn has no such class kiln knows.
const std::string* torch_nn_module_of(const std::string& name);

}  // namespace kiln::script
