#pragma once
// PyTorch's own checkpoint files, as torch.save writes them (the zip format of PyTorch 1.6 and later):
// torch_load returns the saved object as IValues (dicts, OrderedDicts, lists, tuples, ints, floats, bools,
// None, strings, tensors); torch_save writes a file that torch.load(path, weights_only=True) reads.
//
// Loading never runs code from the file: the pickle may build tensors and OrderedDicts and nothing
// else, and any other global it names (os.system, an unknown class) raises kiln::Error naming it.
// Tensors keep their storage offsets and strides, and tensors that shared a storage when saved share
// it again. Refused with a message naming the file: the legacy format (_use_new_zipfile_serialization=
// False), compressed entries, big-endian files, dtypes kiln lacks (int8, uint8, int16, complex); torch_save
// refuses to write an archive over 4 GiB (it writes no zip64 records). Corrupt or truncated files raise;
// they never crash.
#include <map>
#include <string>

#include "core/ir/ivalue.h"

namespace kiln {

IValue torch_load(const std::string& path);
void torch_save(const std::string& path, const IValue& value);

// A state_dict as a dict of tensors, and back; tensor_dict raises, naming `what`, on a non-tensor value.
IValue to_ivalue(const std::map<std::string, Tensor>& state);
std::map<std::string, Tensor> tensor_dict(const IValue& dict, const std::string& what);

}  // namespace kiln
