#pragma once
// kiln::save / kiln::load: a Function (traced, scripted or compiled) to one .kiln file and back, as
// torch.jit.save / torch.jit.load do for TorchScript.
//
//   kiln::save(compile(trace_module(net, ...)), "net.kiln");
//   kiln::Function f = kiln::load("net.kiln");   // in any process: f(inputs), compile(f)
//
// The file holds the graph as IR text and every tensor it needs (tensor constants, a traced module's
// parameters and buffers, guard values) as safetensors, plus the Function's binding (write-backs, exact
// shapes, guards); docs/serialization.md describes the format. A compiled function saves its graph,
// not its compiled code: the loaded one is plain and runs on the interpreter until compiled again.
// Tensors are saved from wherever they live and load on the CPU; loaded parameters keep requires_grad,
// so a loaded traced model trains as the original did.
//
// Every unreadable, corrupt, truncated or inconsistent file raises kiln::Error as `load: PATH: ...`
// (graph text errors as `PATH:line:col: error: ...`, lines counted in the graph text).
#include <string>

#include "backends/interp/function.h"

namespace kiln {

void save(const Function& fn, const std::string& path);
Function load(const std::string& path);

}  // namespace kiln
