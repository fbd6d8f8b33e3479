#pragma once
// Building and taking apart prim::FusionGroup nodes: shared by vertical and horizontal fusion.
#include <vector>

#include "core/ir/graph.h"
#include "jit/group_kernel.h"

namespace kiln::jit {

// The backend whose rules shape fusion groups: `backend`, or for null the registry's default
// (backends::default_fusion_rules).
const Backend& rules_of(const Backend* backend);
// Whether n can live in a fusion group that backend compiles (Backend::can_fuse).
bool fusible(const ir::Node& n, bool reduction = false, const Backend* backend = nullptr);

// Replaces `members` (nodes of one block, in block order) by one FusionGroup placed where the last
// member was. Values read from outside become the group's inputs (0-d constants are copied in);
// member results read outside become its outputs. Returns the group.
ir::Node* make_group(ir::Graph& g, const std::vector<ir::Node*>& members);
// Groups copy the scalar constants they read; the originals left without a reader go (after a block
// is fused, so no pass holds a pointer to them). Returns how many went.
int64_t drop_unused_constants(ir::Block& b);
// The opposite: the group's nodes back into its block at its place.
std::vector<ir::Node*> inline_group(ir::Node* group);

}  // namespace kiln::jit
