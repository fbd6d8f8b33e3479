#pragma once
// The .kiln container that kiln::save writes (docs/serialization.md): a fixed 32-byte header, the
// graph as IR text, and its tensors as a safetensors image. All integers are little-endian.
//
//   offset  size  field
//   0       4     magic "KILN"
//   4       4     format version (u32)
//   8       8     graph text length G (u64)
//   16      8     tensor section length T (u64)
//   24      4     CRC-32 of the G + T bytes after the header (u32)
//   28      4     zero
//   32      G     graph text (UTF-8)
//   32 + G  T     safetensors image
//
// The file is exactly 32 + G + T bytes. The checksum makes a flipped bit anywhere an error instead of a
// silently different model; the readers of the sections below it assume nothing of their input either.
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::jit {

constexpr uint32_t kKilnFormatVersion = 1;
constexpr uint64_t kKilnHeaderSize = 32;

struct KilnSections {
  uint32_t version = 0;
  std::string graph_text;
  uint64_t tensors_offset = 0;  // where the safetensors image starts in the file
  uint64_t tensors_length = 0;
};

// Checks the header, the sizes and the checksum, and reads the graph text; raises kiln::Error as
// `load: PATH: what is wrong`.
KilnSections read_kiln_file(const std::string& path);
// Writes the file through a temporary beside it, renamed over `path` once complete, so a failed save
// leaves an existing file as it was.
void write_kiln_file(const std::string& path, std::string_view graph_text, std::string_view tensors);
// Whether the file exists and starts with the magic (for tools choosing how to read a file).
bool has_kiln_magic(const std::string& path);

}  // namespace kiln::jit
