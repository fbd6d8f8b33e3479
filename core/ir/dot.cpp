#include "core/ir/dot.h"

#include <fmt/format.h>

#include <unordered_map>

#include "core/ir/printer.h"

namespace kiln::ir {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

class DotWriter {
 public:
  explicit DotWriter(const Graph& g) : names_(print_graph(g).names) {}

  std::string run(const Graph& g, const std::string& title) {
    out_ = fmt::format("digraph \"{}\" {{\n  node [shape=box, fontname=\"monospace\"];\n", escape(title));
    for (Value* v : g.inputs()) {
      std::string id = fmt::format("in{}", defs_.size());
      out_ += fmt::format("  {} [shape=ellipse, label=\"{} : {}\"];\n", id, escape(names_[v]), escape(v->type().str()));
      defs_[v] = id;
    }
    block(*g.block(), 1);
    out_ += "  out [shape=ellipse, label=\"return\"];\n";
    edges_to("out", g.outputs());
    out_ += "}\n";
    return out_;
  }

 private:
  void edges_to(const std::string& id, const std::vector<Value*>& inputs) {
    for (Value* v : inputs) {
      auto it = defs_.find(v);
      if (it != defs_.end()) out_ += fmt::format("  {} -> {} [label=\"{}\"];\n", it->second, id, escape(names_[v]));
    }
  }

  void block(const Block& b, int depth) {
    for (Node* n : b.nodes()) {
      std::string id = fmt::format("n{}", counter_++);
      std::string label(n->kind_name());
      for (Value* v : n->outputs()) label += fmt::format("\\n{} : {}", escape(names_[v]), escape(v->type().str()));
      out_ += fmt::format("{:{}}{} [label=\"{}\"];\n", "", depth * 2, id, label);
      edges_to(id, n->inputs());
      for (size_t i = 0; i < n->blocks().size(); ++i) {
        const Block& sub = *n->blocks()[i];
        out_ += fmt::format("{:{}}subgraph cluster_{}_{} {{\n", "", depth * 2, id, i);
        out_ += fmt::format("{:{}}label=\"{} block{}\";\n", "", depth * 2 + 2, escape(std::string(n->kind_name())), i);
        for (Value* a : sub.inputs()) {
          std::string aid = fmt::format("a{}", counter_++);
          out_ += fmt::format("{:{}}{} [shape=ellipse, label=\"{}\"];\n", "", depth * 2 + 2, aid, escape(names_[a]));
          defs_[a] = aid;
        }
        block(sub, depth + 1);
        std::string rid = fmt::format("r{}", counter_++);
        out_ += fmt::format("{:{}}{} [shape=ellipse, label=\"->\"];\n", "", depth * 2 + 2, rid);
        edges_to(rid, sub.outputs());
        out_ += fmt::format("{:{}}}}\n", "", depth * 2);
      }
      for (Value* v : n->outputs()) defs_[v] = id;
    }
  }

  std::unordered_map<const Value*, std::string> names_;
  std::unordered_map<const Value*, std::string> defs_;
  std::string out_;
  int counter_ = 0;
};

}  // namespace

std::string to_dot(const Graph& g, const std::string& title) { return DotWriter(g).run(g, title); }

}  // namespace kiln::ir
