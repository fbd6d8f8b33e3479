// A torch.save archive: <name>/data.pkl (the pickled object), <name>/data/<key> (each storage's raw
// little-endian bytes), <name>/version and, since PyTorch 1.13, <name>/byteorder. <name> is whatever
// folder the first entry sits in; PyTorch writes "archive".
#include "eager/torch_checkpoint.h"

#include <cstdio>
#include <filesystem>

#include "eager/torch_pickle.h"
#include "eager/zip_archive.h"

namespace kiln {

IValue torch_load(const std::string& path) {
  constexpr std::string_view op = "torch_load";
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) fail("{}: {}: cannot open", op, path);
    unsigned char head[2] = {0, 0};
    size_t n = std::fread(head, 1, 2, f);
    std::fclose(f);
    if (n == 2 && head[0] == 0x80)
      fail("{}: {}: the legacy torch.save format (_use_new_zipfile_serialization=False) is not supported; save it "
           "again with torch.save's default zip format",
           op, path);
  }
  zip::Reader zip(op, path);
  std::string prefix;
  const zip::Entry* pkl = nullptr;
  for (const zip::Entry& e : zip.entries()) {
    auto slash = e.name.find('/');
    if (slash != std::string::npos && e.name.substr(slash + 1) == "data.pkl") {
      prefix = e.name.substr(0, slash + 1);
      pkl = &e;
      break;
    }
  }
  if (!pkl) fail("{}: {}: not a torch.save archive: it has no data.pkl", op, path);
  if (const zip::Entry* bo = zip.find(prefix + "byteorder")) {
    std::string order = zip.read(*bo);
    if (order != "little")
      fail("{}: {}: byteorder is '{}'; kiln reads only little-endian checkpoints", op, path, order.substr(0, 16));
  }
  std::string bytes = zip.read(*pkl);
  auto load_storage = [&](const torch_pickle::StorageRef& ref) {
    const zip::Entry* e = zip.find(prefix + "data/" + ref.key);
    if (!e) fail("{}: {}: the archive lacks storage '{}' that data.pkl refers to", op, path, ref.key);
    uint64_t want = uint64_t(ref.numel) * itemsize(ref.dtype);
    if (e->size / itemsize(ref.dtype) != uint64_t(ref.numel) || e->size != want)
      fail("{}: {}: storage '{}' has {} bytes, but {} elements of {} need {}", op, path, ref.key, e->size, ref.numel,
           dtype_name(ref.dtype), want);
    Tensor t = Tensor::empty({ref.numel}, ref.dtype);
    zip.read_into(*e, t.raw_data());
    return t;
  };
  return torch_pickle::unpickle(bytes, load_storage, fmt::format("{}: {}: data.pkl", op, path));
}

void torch_save(const std::string& path, const IValue& value) {
  constexpr std::string_view op = "torch_save";
  std::vector<std::pair<std::string, Tensor>> storages;
  std::string pkl = torch_pickle::pickle(value, storages, fmt::format("{}: {}", op, path));
  // Written beside the target and renamed, so a failed save leaves an existing file as it was.
  std::string tmp = path + ".kiln-partial";
  {
    zip::Writer zip(op, tmp);
    zip.add("archive/data.pkl", pkl.data(), pkl.size());
    zip.add("archive/byteorder", "little", 6);
    for (auto& [key, t] : storages) zip.add("archive/data/" + key, t.raw_data(), uint64_t(t.numel()) * t.element_size());
    zip.add("archive/version", "3\n", 2);
    zip.finish();
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    fail("{}: {}: cannot rename the written file into place", op, path);
  }
}

IValue to_ivalue(const std::map<std::string, Tensor>& state) {
  std::vector<std::pair<IValue, IValue>> items;
  for (auto& [k, t] : state) items.emplace_back(k, t);
  return IValue::dict(std::move(items));
}

std::map<std::string, Tensor> tensor_dict(const IValue& dict, const std::string& what) {
  if (!dict.is_dict()) fail("{}: expected a dict of tensors, got {}", what, dict.type_name());
  std::map<std::string, Tensor> out;
  for (auto& [k, v] : dict.items()) {
    if (!k.is_string() || !v.is_tensor())
      fail("{}: expected a dict of str to Tensor, found {}: {}", what, k.repr(), v.type_name());
    out[k.to_string()] = v.to_tensor();
  }
  return out;
}

}  // namespace kiln
