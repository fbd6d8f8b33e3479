#pragma once
// Parameter initialisers (torch.nn.init), in place and without recording.
#include <string>

#include "core/tensor.h"

namespace kiln::nn::init {

// fan_in and fan_out of a weight: [out, in] for linear, [out, in/groups, kh, kw] for conv.
std::pair<int64_t, int64_t> fans(const Tensor& w);
double calculate_gain(const std::string& nonlinearity, double param = 0.01);
void uniform_(Tensor& t, double lo, double hi);
void normal_(Tensor& t, double mean, double std);
void zeros_(Tensor& t);
void ones_(Tensor& t);
void kaiming_uniform_(Tensor& t, double a = 0, const std::string& mode = "fan_in",
                      const std::string& nonlinearity = "leaky_relu");
void kaiming_normal_(Tensor& t, double a = 0, const std::string& mode = "fan_in",
                     const std::string& nonlinearity = "leaky_relu");
void xavier_uniform_(Tensor& t, double gain = 1.0);
void xavier_normal_(Tensor& t, double gain = 1.0);

}  // namespace kiln::nn::init
