#pragma once
// nn.init's structured fills as __init__ calls them: orthogonal_, eye_, dirac_ and sparse_. Each fills t in
// place (not recorded by autograd) from kiln's generator, so the values differ from torch's while the
// defining property holds; bad shapes raise kiln::Error with torch's words (Python's ValueError there).
// Internal to script_frontend.
#include <cstdint>

#include "core/tensor.h"

namespace kiln::script {

// t viewed as (size(0), numel / size(0)): orthonormal rows or columns, whichever are fewer, times gain
void init_orthogonal(Tensor& t, double gain);
// 2-D: the identity (ones on the main diagonal, as torch.eye of a rectangle)
void init_eye(Tensor& t);
// 3- to 5-D conv weights: the identity convolution per group (a one at each kernel's centre)
void init_dirac(Tensor& t, int64_t groups);
// 2-D: N(0, std), then ceil(sparsity * rows) entries of each column, chosen at random, set to zero
void init_sparse(Tensor& t, double sparsity, double std);

}  // namespace kiln::script
