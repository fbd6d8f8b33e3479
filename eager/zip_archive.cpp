#include "eager/zip_archive.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/crc32.h"
#include "core/error.h"

namespace kiln::zip {
namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndLocatorSig = 0x07064b50, kZip64EndSig = 0x06064b50;
constexpr uint64_t kLocalHeader = 30, kCentralHeader = 46, kEndRecord = 22, kZip64EndRecord = 56;
constexpr uint64_t kAlign = 64;

uint16_t u16(const unsigned char* p) { return uint16_t(p[0] | p[1] << 8); }
uint32_t u32(const unsigned char* p) { return uint32_t(u16(p)) | uint32_t(u16(p + 2)) << 16; }
uint64_t u64(const unsigned char* p) { return uint64_t(u32(p)) | uint64_t(u32(p + 4)) << 32; }
void put16(std::string& s, uint16_t v) { s += char(v & 0xff), s += char(v >> 8); }
void put32(std::string& s, uint32_t v) { put16(s, uint16_t(v)), put16(s, uint16_t(v >> 16)); }

}  // namespace

struct Reader::File {
  std::FILE* f = nullptr;
  uint64_t size = 0;
  ~File() {
    if (f) std::fclose(f);
  }
};

struct Writer::File {
  std::FILE* f = nullptr;
  ~File() {
    if (f) std::fclose(f);
  }
};

Reader::Reader(std::string_view op, std::string path) : op_(op), path_(std::move(path)), file_(new File) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path_, ec);
  if (ec) fail("{}: {}: cannot open: {}", op_, path_, ec.message());
  file_->size = uint64_t(n);
  file_->f = std::fopen(path_.c_str(), "rb");
  if (!file_->f) fail("{}: {}: cannot open: {}", op_, path_, std::strerror(errno));
  uint64_t size = file_->size;
  auto read_at = [&](uint64_t at, uint64_t len) {
    std::string b(len, '\0');
    if (fseeko(file_->f, off_t(at), SEEK_SET) != 0 || std::fread(b.data(), 1, len, file_->f) != len)
      fail("{}: {}: read of {} bytes at offset {} failed", op_, path_, len, at);
    return b;
  };
  if (size < kEndRecord) fail("{}: {}: not a zip archive: the file has only {} bytes", op_, path_, size);
  // The end record sits in the last 22 bytes plus a comment of up to 64 KiB.
  uint64_t tail_len = std::min<uint64_t>(size, kEndRecord + 0xffff);
  std::string tail = read_at(size - tail_len, tail_len);
  auto* t = reinterpret_cast<const unsigned char*>(tail.data());
  int64_t end = -1;
  for (int64_t i = int64_t(tail_len - kEndRecord); i >= 0; --i)
    if (u32(t + i) == kEndSig && uint64_t(i) + kEndRecord + u16(t + i + 20) == tail_len) {
      end = i;
      break;
    }
  if (end < 0) fail("{}: {}: not a zip archive or truncated: no end of central directory record", op_, path_);
  const unsigned char* e = t + end;
  uint64_t count = u16(e + 10), dir_size = u32(e + 12), dir_offset = u32(e + 16);
  uint64_t dir_end = size - tail_len + uint64_t(end);
  if (u16(e + 4) != 0 || u16(e + 6) != 0 || u16(e + 8) != count)
    fail("{}: {}: multi-disk zip archives are not supported", op_, path_);
  // PyTorch's writer (miniz) always adds the zip64 end record, whose counts and offsets then rule.
  if (end >= 20 && u32(t + end - 20) == kZip64EndLocatorSig) {
    uint64_t at64 = u64(t + end - 20 + 8);
    if (at64 > dir_end || dir_end - at64 < kZip64EndRecord)
      fail("{}: {}: corrupt zip archive: the zip64 end record offset {} is outside the file", op_, path_, at64);
    std::string r = read_at(at64, kZip64EndRecord);
    auto* z = reinterpret_cast<const unsigned char*>(r.data());
    if (u32(z) != kZip64EndSig) fail("{}: {}: corrupt zip archive: no zip64 end record at offset {}", op_, path_, at64);
    count = u64(z + 32), dir_size = u64(z + 40), dir_offset = u64(z + 48);
    dir_end = at64;
  }
  if (dir_offset > dir_end || dir_size != dir_end - dir_offset)
    fail("{}: {}: corrupt zip archive: the central directory ({} bytes at offset {}) does not end where the end "
         "records start ({})",
         op_, path_, dir_size, dir_offset, dir_end);
  if (count > dir_size / kCentralHeader)
    fail("{}: {}: corrupt zip archive: {} entries cannot fit a central directory of {} bytes", op_, path_, count,
         dir_size);
  std::string dir = read_at(dir_offset, dir_size);
  auto* d = reinterpret_cast<const unsigned char*>(dir.data());
  uint64_t at = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (dir_size - at < kCentralHeader || u32(d + at) != kCentralSig)
      fail("{}: {}: corrupt zip archive: central directory entry {} is malformed", op_, path_, i);
    const unsigned char* c = d + at;
    uint16_t flags = u16(c + 8), method = u16(c + 10);
    uint64_t name_len = u16(c + 28), extra_len = u16(c + 30), comment_len = u16(c + 32);
    if (dir_size - at - kCentralHeader < name_len + extra_len + comment_len)
      fail("{}: {}: corrupt zip archive: central directory entry {} is malformed", op_, path_, i);
    Entry en;
    en.name.assign(reinterpret_cast<const char*>(c + kCentralHeader), name_len);
    en.crc = u32(c + 16);
    uint64_t csize = u32(c + 20), usize = u32(c + 24), local = u32(c + 42);
    // Values that do not fit 32 bits are 0xffffffff here and follow in the zip64 extra field, in this order.
    for (uint64_t x = 0; x + 4 <= extra_len;) {
      const unsigned char* f = c + kCentralHeader + name_len + x;
      uint64_t id = u16(f), len = u16(f + 2);
      if (x + 4 + len > extra_len) break;
      if (id == 1) {
        uint64_t k = 0;
        for (uint64_t* v : {&usize, &csize, &local})
          if (*v == 0xffffffff) {
            if (k + 8 > len)
              fail("{}: {}: corrupt zip archive: entry '{}' has a short zip64 field", op_, path_, en.name);
            *v = u64(f + 4 + k);
            k += 8;
          }
      }
      x += 4 + len;
    }
    if (method != 0)
      fail("{}: {}: entry '{}' is compressed (zip method {}); kiln reads only stored entries, as torch.save writes "
           "them",
           op_, path_, en.name, method);
    if (flags & 1) fail("{}: {}: entry '{}' is encrypted", op_, path_, en.name);
    if (csize != usize)
      fail("{}: {}: corrupt zip archive: stored entry '{}' has {} bytes compressed but {} uncompressed", op_, path_,
           en.name, csize, usize);
    if (local > dir_offset || dir_offset - local < kLocalHeader)
      fail("{}: {}: corrupt zip archive: entry '{}' has its header at offset {}, outside the data", op_, path_,
           en.name, local);
    std::string lh = read_at(local, kLocalHeader);
    auto* l = reinterpret_cast<const unsigned char*>(lh.data());
    if (u32(l) != kLocalSig)
      fail("{}: {}: corrupt zip archive: no local header for entry '{}' at offset {}", op_, path_, en.name, local);
    en.data_offset = local + kLocalHeader + u16(l + 26) + u16(l + 28);
    en.size = usize;
    if (en.data_offset > dir_offset || dir_offset - en.data_offset < en.size)
      fail("{}: {}: corrupt zip archive or truncated: entry '{}' ({} bytes at offset {}) runs past the data", op_,
           path_, en.name, en.size, en.data_offset);
    entries_.push_back(std::move(en));
    at += kCentralHeader + name_len + extra_len + comment_len;
  }
}

Reader::~Reader() = default;

const Entry* Reader::find(std::string_view name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

void Reader::read_into(const Entry& e, void* dst) {
  if (e.size && (fseeko(file_->f, off_t(e.data_offset), SEEK_SET) != 0 || std::fread(dst, 1, e.size, file_->f) != e.size))
    fail("{}: {}: read of entry '{}' ({} bytes at offset {}) failed", op_, path_, e.name, e.size, e.data_offset);
  uint32_t crc = crc32(0, dst, e.size);
  if (crc != e.crc)
    fail("{}: {}: checksum mismatch in entry '{}' (the directory says {:#010x}, the contents give {:#010x}); the "
         "file is corrupt",
         op_, path_, e.name, e.crc, crc);
}

std::string Reader::read(const Entry& e) {
  std::string b(e.size, '\0');
  read_into(e, b.data());
  return b;
}

Writer::Writer(std::string_view op, std::string path) : op_(op), path_(std::move(path)), file_(new File) {
  file_->f = std::fopen(path_.c_str(), "wb");
  if (!file_->f) fail("{}: {}: cannot open for writing: {}", op_, path_, std::strerror(errno));
}

Writer::~Writer() {
  if (file_->f) {
    std::fclose(file_->f);
    file_->f = nullptr;
    std::remove(path_.c_str());
  }
}

void Writer::add(const std::string& name, const void* data, uint64_t size) {
  if (size >= 0xffffffffu || at_ >= 0xffffffffu || name.size() > 0xffff)
    fail("{}: {}: entry '{}' ({} bytes) needs zip64, which kiln does not write", op_, path_, name, size);
  Entry e{name, 0, size, crc32(0, data, size)};
  // An extra field of padding puts the data at a multiple of 64 bytes.
  uint64_t unpadded = at_ + kLocalHeader + name.size() + 4;
  uint64_t pad = (kAlign - unpadded % kAlign) % kAlign;
  std::string h;
  put32(h, kLocalSig);
  put16(h, 20), put16(h, 0), put16(h, 0), put16(h, 0), put16(h, 0);  // version, flags, stored, time, date
  put32(h, e.crc), put32(h, uint32_t(size)), put32(h, uint32_t(size));
  put16(h, uint16_t(name.size())), put16(h, uint16_t(4 + pad));
  h += name;
  put16(h, 0x4246), put16(h, uint16_t(pad));  // "FB", PyTorch's padding field id
  h.append(pad, 'Z');
  header_offsets_.push_back(at_);
  e.data_offset = at_ + h.size();
  if (std::fwrite(h.data(), 1, h.size(), file_->f) != h.size() ||
      (size && std::fwrite(data, 1, size, file_->f) != size))
    fail("{}: {}: write failed: {}", op_, path_, std::strerror(errno));
  at_ = e.data_offset + size;
  entries_.push_back(std::move(e));
}

void Writer::finish() {
  std::string d;
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    put32(d, kCentralSig);
    put16(d, 20), put16(d, 20), put16(d, 0), put16(d, 0), put16(d, 0), put16(d, 0);
    put32(d, e.crc), put32(d, uint32_t(e.size)), put32(d, uint32_t(e.size));
    put16(d, uint16_t(e.name.size())), put16(d, 0), put16(d, 0), put16(d, 0), put16(d, 0);
    put32(d, 0), put32(d, uint32_t(header_offsets_[i]));
    d += e.name;
  }
  if (entries_.size() > 0xffff || at_ + d.size() >= 0xffffffffu)
    fail("{}: {}: the archive needs zip64, which kiln does not write", op_, path_);
  uint64_t dir_size = d.size();
  put32(d, kEndSig);
  put16(d, 0), put16(d, 0), put16(d, uint16_t(entries_.size())), put16(d, uint16_t(entries_.size()));
  put32(d, uint32_t(dir_size)), put32(d, uint32_t(at_)), put16(d, 0);
  bool ok = std::fwrite(d.data(), 1, d.size(), file_->f) == d.size();
  ok = std::fclose(file_->f) == 0 && ok;
  file_->f = nullptr;
  if (!ok) {
    std::remove(path_.c_str());
    fail("{}: {}: write failed: {}", op_, path_, std::strerror(errno));
  }
}

}  // namespace kiln::zip
