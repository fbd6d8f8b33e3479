#pragma once
// `kiln dot ... -o FILE`: a DOT graph written as FILE's extension asks, rendered by Graphviz's `dot`.
#include <string>

namespace kiln::cli {

// .dot/.gv: the DOT text itself; .svg/.png/.pdf: rendered by `dot` found on PATH (no shell runs: the
// file name is never parsed). Raises kiln::Error naming the file when dot is missing or fails.
void write_graph(const std::string& dot_text, const std::string& path);

}  // namespace kiln::cli
