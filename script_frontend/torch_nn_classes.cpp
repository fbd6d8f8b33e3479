// The classes of torch.nn kiln's __init__ knows by name, grouped by the torch module that defines them (torch
// 1.13's `cls.__module__`): whether `nn.X` names a class, and what `nn.X.__module__` and `type(m).__module__` give.
#include "script_frontend/torch_nn_classes.h"

#include <map>
#include <string_view>
#include <utility>

namespace kiln::script {

const std::string* torch_nn_module_of(const std::string& name) {
  static const std::map<std::string, std::string> modules = [] {
    static const std::pair<const char*, const char*> groups[] = {
      {"torch.nn.modules.activation",
       "CELU ELU GELU GLU Hardshrink Hardsigmoid Hardswish Hardtanh LeakyReLU LogSigmoid LogSoftmax Mish MultiheadAttention PReLU RReLU ReLU ReLU6 SELU SiLU Sigmoid Softmax Softmax2d Softmin Softplus Softshrink Softsign Tanh Tanhshrink Threshold"},
      {"torch.nn.modules.adaptive",
       "AdaptiveLogSoftmaxWithLoss"},
      {"torch.nn.modules.batchnorm",
       "BatchNorm1d BatchNorm2d BatchNorm3d LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d SyncBatchNorm"},
      {"torch.nn.modules.channelshuffle",
       "ChannelShuffle"},
      {"torch.nn.modules.container",
       "Container ModuleDict ModuleList ParameterDict ParameterList Sequential"},
      {"torch.nn.modules.conv",
       "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d"},
      {"torch.nn.modules.distance",
       "CosineSimilarity PairwiseDistance"},
      {"torch.nn.modules.dropout",
       "AlphaDropout Dropout Dropout1d Dropout2d Dropout3d FeatureAlphaDropout"},
      {"torch.nn.modules.flatten",
       "Flatten Unflatten"},
      {"torch.nn.modules.fold",
       "Fold Unfold"},
      {"torch.nn.modules.instancenorm",
       "InstanceNorm1d InstanceNorm2d InstanceNorm3d LazyInstanceNorm1d LazyInstanceNorm2d LazyInstanceNorm3d"},
      {"torch.nn.modules.linear",
       "Bilinear Identity LazyLinear Linear"},
      {"torch.nn.modules.loss",
       "BCELoss BCEWithLogitsLoss CTCLoss CosineEmbeddingLoss CrossEntropyLoss GaussianNLLLoss HingeEmbeddingLoss HuberLoss KLDivLoss L1Loss MSELoss MarginRankingLoss MultiLabelMarginLoss MultiLabelSoftMarginLoss MultiMarginLoss NLLLoss NLLLoss2d PoissonNLLLoss SmoothL1Loss SoftMarginLoss TripletMarginLoss TripletMarginWithDistanceLoss"},
      {"torch.nn.modules.module",
       "Module"},
      {"torch.nn.modules.normalization",
       "CrossMapLRN2d GroupNorm LayerNorm LocalResponseNorm"},
      {"torch.nn.modules.padding",
       "ConstantPad1d ConstantPad2d ConstantPad3d ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d ZeroPad2d"},
      {"torch.nn.modules.pixelshuffle",
       "PixelShuffle PixelUnshuffle"},
      {"torch.nn.modules.pooling",
       "AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d AvgPool1d AvgPool2d AvgPool3d FractionalMaxPool2d FractionalMaxPool3d LPPool1d LPPool2d MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d"},
      {"torch.nn.modules.rnn",
       "GRU GRUCell LSTM LSTMCell RNN RNNBase RNNCell RNNCellBase"},
      {"torch.nn.modules.sparse",
       "Embedding EmbeddingBag"},
      {"torch.nn.modules.transformer",
       "Transformer TransformerDecoder TransformerDecoderLayer TransformerEncoder TransformerEncoderLayer"},
      {"torch.nn.modules.upsampling",
       "Upsample UpsamplingBilinear2d UpsamplingNearest2d"},
      {"torch.nn.parallel.data_parallel",
       "DataParallel"},
      {"torch.nn.parameter",
       "Parameter UninitializedBuffer UninitializedParameter"},
    };
    std::map<std::string, std::string> out;
    for (auto [module, classes] : groups)
      for (std::string_view all = classes; !all.empty();) {
        size_t e = all.find(' ');
        out.emplace(std::string(all.substr(0, e)), module);
        all = e == std::string_view::npos ? std::string_view() : all.substr(e + 1);
      }
    return out;
  }();
  auto it = modules.find(name);
  return it == modules.end() ? nullptr : &it->second;
}

}  // namespace kiln::script
