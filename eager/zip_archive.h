#pragma once
// The subset of the zip format that torch.save writes: stored (uncompressed) entries, no zip64, no
// encryption. Reading checks every offset and size against the file and each entry's CRC-32, so a
// corrupt archive raises kiln::Error naming the file; writing aligns entry data to 64 bytes, as
// PyTorch does, so storages could be mapped in place.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::zip {

struct Entry {
  std::string name;
  uint64_t data_offset = 0;  // of the entry's bytes in the file
  uint64_t size = 0;
  uint32_t crc = 0;
};

class Reader {
 public:
  // op names the caller in messages ("torch_load").
  Reader(std::string_view op, std::string path);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(std::string_view name) const;
  std::string read(const Entry& e);  // the bytes, CRC-checked
  void read_into(const Entry& e, void* dst);  // e.size bytes, CRC-checked

 private:
  std::string op_, path_;
  struct File;
  std::unique_ptr<File> file_;
  std::vector<Entry> entries_;
};

class Writer {
 public:
  Writer(std::string_view op, std::string path);
  ~Writer();  // an archive left unfinished by an error is removed
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void add(const std::string& name, const void* data, uint64_t size);
  void finish();  // writes the central directory and closes the file

 private:
  std::string op_, path_;
  struct File;
  std::unique_ptr<File> file_;
  std::vector<Entry> entries_;
  std::vector<uint64_t> header_offsets_;
  uint64_t at_ = 0;
};

}  // namespace kiln::zip
