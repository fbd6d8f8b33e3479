#include "jit/kiln_file.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/crc32.h"
#include "core/error.h"

namespace kiln::jit {

namespace {

static_assert(std::endian::native == std::endian::little, "the .kiln header is little-endian on disk");

constexpr char kMagic[4] = {'K', 'I', 'L', 'N'};

struct Header {
  uint32_t version;
  uint64_t graph_length;
  uint64_t tensors_length;
  uint32_t crc;
  uint32_t zero;
};

template <class T>
T read_le(const unsigned char* p) {
  T v = 0;
  for (size_t k = sizeof(T); k-- > 0;) v = T(v << 8) | T(p[k]);
  return v;
}

template <class T>
void write_le(unsigned char* p, T v) {
  for (size_t k = 0; k < sizeof(T); ++k) p[k] = static_cast<unsigned char>((uint64_t(v) >> (8 * k)) & 0xff);
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

void read_at(std::FILE* f, const std::string& path, void* dst, uint64_t n, uint64_t at) {
  if (n == 0) return;
  if (fseeko(f, off_t(at), SEEK_SET) != 0 || std::fread(dst, 1, n, f) != n)
    fail("load: {}: read of {} bytes at offset {} failed: {}", path, n, at,
         std::ferror(f) ? std::strerror(errno) : "file shrank while reading");
}

std::string hex_bytes(const unsigned char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{}{:02x}", i ? " " : "", p[i]);
  return s;
}

}  // namespace

KilnSections read_kiln_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("load: {}: is a directory", path);
  auto size = std::filesystem::file_size(path, ec);
  if (ec) fail("load: {}: cannot open: {}", path, ec.message());
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail("load: {}: cannot open: {}", path, std::strerror(errno));

  unsigned char h[kKilnHeaderSize] = {};
  uint64_t head = std::min<uint64_t>(size, kKilnHeaderSize);
  read_at(f.get(), path, h, head, 0);
  if (size == 0) fail("load: {}: file is empty", path);
  if (size < 4 || std::memcmp(h, kMagic, 4) != 0)
    fail("load: {}: not a kiln file: it starts with {}, not the magic \"KILN\" (4b 49 4c 4e)", path,
         hex_bytes(h, std::min<uint64_t>(size, 4)));
  if (size < kKilnHeaderSize)
    fail("load: {}: file is truncated: {} bytes, shorter than the {}-byte header", path, size, kKilnHeaderSize);

  Header hd{read_le<uint32_t>(h + 4), read_le<uint64_t>(h + 8), read_le<uint64_t>(h + 16), read_le<uint32_t>(h + 24),
            read_le<uint32_t>(h + 28)};
  if (hd.version == 0) fail("load: {}: format version 0 is not a kiln format version; the file is corrupt", path);
  if (hd.version > kKilnFormatVersion)
    fail("load: {}: format version {} is newer than this kiln reads ({})", path, hd.version, kKilnFormatVersion);
  if (hd.zero != 0) fail("load: {}: header bytes 28..31 should be zero, got 0x{:08x}; the file is corrupt", path, hd.zero);
  uint64_t body = size - kKilnHeaderSize;
  uint64_t want = 0;
  if (__builtin_add_overflow(hd.graph_length, hd.tensors_length, &want) || want > body)
    fail("load: {}: file is truncated: the header says {} bytes of graph text and {} bytes of tensors, {} bytes present",
         path, hd.graph_length, hd.tensors_length, body);
  if (want < body)
    fail("load: {}: {} unexpected bytes after the {} bytes of graph text and {} bytes of tensors the header describes",
         path, body - want, hd.graph_length, hd.tensors_length);

  // The graph text is part of the checksum's stream, so it is read once and kept.
  KilnSections out;
  out.version = hd.version;
  out.graph_text.resize(hd.graph_length);
  read_at(f.get(), path, out.graph_text.data(), hd.graph_length, kKilnHeaderSize);
  uint32_t crc = crc32(0, out.graph_text.data(), out.graph_text.size());
  std::vector<char> chunk(std::min<uint64_t>(hd.tensors_length, 1 << 20));
  for (uint64_t done = 0; done < hd.tensors_length;) {
    uint64_t n = std::min<uint64_t>(chunk.size(), hd.tensors_length - done);
    read_at(f.get(), path, chunk.data(), n, kKilnHeaderSize + hd.graph_length + done);
    crc = crc32(crc, chunk.data(), n);
    done += n;
  }
  if (crc != hd.crc)
    fail("load: {}: checksum mismatch (the header says 0x{:08x}, the contents give 0x{:08x}); the file is corrupt", path,
         hd.crc, crc);
  out.tensors_offset = kKilnHeaderSize + hd.graph_length;
  out.tensors_length = hd.tensors_length;
  return out;
}

void write_kiln_file(const std::string& path, std::string_view graph_text, std::string_view tensors) {
  unsigned char h[kKilnHeaderSize] = {};
  std::memcpy(h, kMagic, 4);
  write_le<uint32_t>(h + 4, kKilnFormatVersion);
  write_le<uint64_t>(h + 8, graph_text.size());
  write_le<uint64_t>(h + 16, tensors.size());
  write_le<uint32_t>(h + 24, crc32(crc32(0, graph_text.data(), graph_text.size()), tensors.data(), tensors.size()));

  std::string tmp = path + ".tmp";
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) fail("save: {}: cannot open {} for writing: {}", path, tmp, std::strerror(errno));
  bool ok = std::fwrite(h, 1, sizeof h, f.get()) == sizeof h &&
            std::fwrite(graph_text.data(), 1, graph_text.size(), f.get()) == graph_text.size() &&
            std::fwrite(tensors.data(), 1, tensors.size(), f.get()) == tensors.size();
  int err = ok ? 0 : errno;
  if (std::fclose(f.release()) != 0 && ok) ok = false, err = errno;
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) ok = false, err = errno;
  if (ok) return;
  std::remove(tmp.c_str());
  fail("save: {}: write failed: {}", path, std::strerror(err));
}

bool has_kiln_magic(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  char m[4];
  return f && std::fread(m, 1, 4, f.get()) == 4 && std::memcmp(m, kMagic, 4) == 0;
}

}  // namespace kiln::jit
