#pragma once
// PyTorch's data.pkl: the pickle (protocol 2) that torch.save writes, read by a restricted unpickler
// and written by a pickler that torch.load(weights_only=True) accepts. Tensors refer to storages by
// persistent id; the archive (eager/torch_checkpoint.cpp) holds the storages' bytes.
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/ir/ivalue.h"

namespace kiln::torch_pickle {

struct StorageRef {
  std::string key;  // the archive entry data/<key>
  DType dtype;
  int64_t numel;
};

// Builds tensors, OrderedDicts and plain values, nothing else: any other global raises naming it.
// load_storage returns a 1-D contiguous tensor of ref.numel elements of ref.dtype; it is called once per
// key, and tensors over the same key share that storage. `where` prefixes every message.
IValue unpickle(std::string_view bytes, const std::function<Tensor(const StorageRef&)>& load_storage,
                const std::string& where);

// The pickle of v, and the storages its tensors refer to (key, 1-D tensor over the whole storage):
// tensors sharing a CPU storage share one key, keeping their offsets and strides.
std::string pickle(const IValue& v, std::vector<std::pair<std::string, Tensor>>& storages, const std::string& where);

}  // namespace kiln::torch_pickle
