// .npy and .safetensors reading and writing. Both headers are small literal languages (a Python dict
// for npy, JSON for safetensors), parsed here by one bounded recursive-descent reader so that no input
// can crash or exhaust the stack. Sizes from a header are checked against the file's real size before
// anything is allocated, so a flipped bit yields an error, not a giant allocation.
#include "eager/io.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <unordered_set>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {
namespace {

// Files are little-endian on disk; writing host memory straight out relies on that.
static_assert(std::endian::native == std::endian::little, "kiln's file formats assume a little-endian host");

// ---------------------------------------------------------------------------------------------------
// Files

class InFile {
 public:
  InFile(std::string_view op, const std::string& path) : op_(op), path_(path) {
    std::error_code ec;
    auto n = std::filesystem::file_size(path, ec);
    if (ec) fail("{}: {}: cannot open: {}", op_, path_, ec.message());
    size_ = uint64_t(n);
    f_ = std::fopen(path.c_str(), "rb");
    if (!f_) fail("{}: {}: cannot open: {}", op_, path_, std::strerror(errno));
  }
  // The bytes [offset, offset + length) of the file, read as if they were the whole file.
  InFile(std::string_view op, const std::string& path, uint64_t offset, uint64_t length) : InFile(op, path) {
    if (offset > size_ || length > size_ - offset)
      fail("{}: {}: file is truncated: {} bytes, a section at offset {} needs {}", op_, path_, size_, offset, length);
    base_ = offset;
    size_ = length;
  }
  ~InFile() { std::fclose(f_); }
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;

  uint64_t size() const { return size_; }
  // Callers have checked that [at, at + n) lies inside the file; a short read is an I/O failure.
  void read(void* dst, uint64_t n, uint64_t at) {
    if (n == 0) return;
    if (fseeko(f_, off_t(base_ + at), SEEK_SET) != 0 || std::fread(dst, 1, n, f_) != n)
      fail("{}: {}: read of {} bytes at offset {} failed: {}", op_, path_, n, base_ + at,
           std::ferror(f_) ? std::strerror(errno) : "file shrank while reading");
  }

 private:
  std::string_view op_;
  const std::string& path_;
  std::FILE* f_ = nullptr;
  uint64_t base_ = 0;
  uint64_t size_ = 0;
};

// Writes to `path`; a file left half-written by an error is removed.
class OutFile {
 public:
  OutFile(std::string_view op, const std::string& path) : op_(op), path_(path) {
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) fail("{}: {}: cannot open for writing: {}", op_, path_, std::strerror(errno));
  }
  ~OutFile() {
    if (f_) {
      std::fclose(f_);
      std::remove(path_.c_str());
    }
  }
  OutFile(const OutFile&) = delete;
  OutFile& operator=(const OutFile&) = delete;

  void write(const void* src, uint64_t n) {
    if (n > 0 && std::fwrite(src, 1, n, f_) != n)
      fail("{}: {}: write of {} bytes failed: {}", op_, path_, n, std::strerror(errno));
  }
  void write(std::string_view s) { write(s.data(), s.size()); }
  void close() {
    std::FILE* f = std::exchange(f_, nullptr);
    if (std::fclose(f) != 0) {
      int err = errno;
      std::remove(path_.c_str());
      fail("{}: {}: write failed on close: {}", op_, path_, std::strerror(err));
    }
  }

 private:
  std::string_view op_;
  const std::string& path_;
  std::FILE* f_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------
// Header literals: JSON, or (python = true) the Python dict literal numpy writes, which differs by
// 'single quotes', (tuples), True/False/None, trailing commas and Python 2's 3L integers.

struct Lit {
  enum class Kind { Null, Bool, Int, Real, String, Array, Object };
  Kind kind = Kind::Null;
  bool b = false;
  int64_t i = 0;
  std::string s;
  std::vector<Lit> items;
  std::vector<std::pair<std::string, Lit>> members;

  const Lit* find(std::string_view key) const {
    for (const auto& [k, v] : members)
      if (k == key) return &v;
    return nullptr;
  }
};

std::string_view kind_name(Lit::Kind k) {
  switch (k) {
    case Lit::Kind::Null: return "null";
    case Lit::Kind::Bool: return "a boolean";
    case Lit::Kind::Int: return "an integer";
    case Lit::Kind::Real: return "a real number";
    case Lit::Kind::String: return "a string";
    case Lit::Kind::Array: return "an array";
    case Lit::Kind::Object: return "an object";
  }
  return "?";
}

class LiteralParser {
 public:
  // `where` prefixes every error, e.g. "load_npy: a.npy: header".
  LiteralParser(std::string_view text, bool python, std::string where)
      : text_(text), python_(python), where_(std::move(where)) {}

  Lit document() {
    Lit v = value(0);
    skip_space();
    if (pos_ != text_.size()) bad("unexpected text after the end of the value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;

  [[noreturn]] void bad(std::string_view what) const {
    if (pos_ < text_.size())
      fail("{}: {} at byte {}", where_, what, pos_);
    fail("{}: {} at the end of the text", where_, what);
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eat_word(std::string_view w) {
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  Lit value(int depth) {
    if (depth > kMaxDepth) bad(fmt::format("nesting deeper than {} levels", kMaxDepth));
    skip_space();
    if (pos_ >= text_.size()) bad("expected a value");
    char c = text_[pos_];
    Lit v;
    if (c == '{') {
      ++pos_;
      v.kind = Lit::Kind::Object;
      std::unordered_set<std::string> seen;
      sequence('}', [&] {
        skip_space();
        if (pos_ >= text_.size() || !(text_[pos_] == '"' || (python_ && text_[pos_] == '\'')))
          bad("expected a quoted key");
        std::string key = string();
        if (!seen.insert(key).second) bad(fmt::format("duplicate key \"{}\"", key));
        if (!eat(':')) bad("expected ':' after a key");
        v.members.emplace_back(std::move(key), value(depth + 1));
      });
    } else if (c == '[' || (python_ && c == '(')) {
      ++pos_;
      v.kind = Lit::Kind::Array;
      sequence(c == '[' ? ']' : ')', [&] { v.items.push_back(value(depth + 1)); });
    } else if (c == '"' || (python_ && c == '\'')) {
      v.kind = Lit::Kind::String;
      v.s = string();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v = number();
    } else if (eat_word(python_ ? "True" : "true")) {
      v.kind = Lit::Kind::Bool;
      v.b = true;
    } else if (eat_word(python_ ? "False" : "false")) {
      v.kind = Lit::Kind::Bool;
    } else if (!eat_word(python_ ? "None" : "null")) {
      bad(fmt::format("unexpected character '{}'", printable(c)));
    }
    return v;
  }

  // Comma-separated items up to `close`; Python allows a trailing comma, JSON does not.
  template <class F>
  void sequence(char close, F&& item) {
    if (eat(close)) return;
    while (true) {
      item();
      if (eat(close)) return;
      if (!eat(',')) bad(fmt::format("expected ',' or '{}'", close));
      if (python_ && eat(close)) return;
    }
  }

  static std::string printable(char c) {
    auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }

  std::string string() {
    char quote = text_[pos_++];
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) bad("unterminated string");
      char c = text_[pos_++];
      if (c == quote) return out;
      if (static_cast<unsigned char>(c) < 0x20) bad("control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= text_.size()) bad("unterminated string");
      char e = text_[pos_++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case '\'':
          if (!python_) { --pos_; bad("invalid escape '\\''"); }
          out += e;
          break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': append_utf8(out, code_point()); break;
        default: --pos_; bad(fmt::format("invalid escape '\\{}'", printable(e)));
      }
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > text_.size()) bad("truncated \\u escape");
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      char h = text_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') v |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= uint32_t(h - 'A' + 10);
      else bad("invalid hex digit in a \\u escape");
    }
    return v;
  }
  uint32_t code_point() {
    uint32_t cp = hex4();
    if (cp >= 0xdc00 && cp <= 0xdfff) bad("unpaired low surrogate in a \\u escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (!eat_word("\\u")) bad("unpaired high surrogate in a \\u escape");
      uint32_t lo = hex4();
      if (lo < 0xdc00 || lo > 0xdfff) bad("unpaired high surrogate in a \\u escape");
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    return cp;
  }
  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xc0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += char(0xe0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    } else {
      out += char(0xf0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3f));
      out += char(0x80 | ((cp >> 6) & 0x3f));
      out += char(0x80 | (cp & 0x3f));
    }
  }

  Lit number() {
    size_t start = pos_;
    bool neg = eat_word("-");
    if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') bad("expected a digit");
    uint64_t mag = 0;
    bool overflow = false;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      uint64_t d = uint64_t(text_[pos_++] - '0');
      if (mag > (uint64_t(INT64_MAX) - d) / 10) overflow = true;
      mag = mag * 10 + d;
    }
    bool real = false;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      real = true;
      ++pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      real = true;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ >= text_.size() || text_[pos_] < '0' || text_[pos_] > '9') bad("expected a digit in an exponent");
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
    }
    Lit v;
    if (real) {
      v.kind = Lit::Kind::Real;
      return v;
    }
    if (python_ && pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
    if (overflow) {
      pos_ = start;
      bad("integer out of range");
    }
    v.kind = Lit::Kind::Int;
    v.i = neg ? -int64_t(mag) : int64_t(mag);
    return v;
  }

  std::string_view text_;
  bool python_;
  std::string where_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------------------
// Shared helpers

// The bytes a tensor of this shape occupies, or nullopt on overflow (only a corrupt header does that).
std::optional<uint64_t> byte_size(const Shape& shape, DType dtype) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  uint64_t n = itemsize(dtype);
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, uint64_t(d), &n)) return std::nullopt;
  return n;
}

std::string shape_text(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out;
}

// Files may hold any byte in a bool slot; kiln's kernels assume 0 or 1.
void normalize_bools(Tensor& t) {
  if (t.dtype() != DType::Bool) return;
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] != 0;
}

void byte_swap(Tensor& t) {
  size_t w = t.element_size();
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) std::reverse(p + size_t(i) * w, p + size_t(i + 1) * w);
}

// The tensor's elements in row-major order, on the CPU.
Tensor row_major(std::string_view op, const std::string& path, const Tensor& t, std::string_view name) {
  if (!t.defined()) fail("{}: {}: tensor{} is undefined", op, path, name);
  if (!t.device().is_cpu())
    fail("{}: {}: tensor{} is on {}; copy it to the cpu first", op, path, name, t.device().str());
  return t.contiguous();
}

// ---------------------------------------------------------------------------------------------------
// .npy

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;

struct NpyType {
  std::string_view code;  // without the byte-order character
  DType dtype;
};
constexpr NpyType kNpyTypes[] = {{"f2", DType::Float16}, {"f4", DType::Float32}, {"f8", DType::Float64},
                                 {"i4", DType::Int32},   {"i8", DType::Int64},   {"b1", DType::Bool}};

const char* npy_descr(DType t) {
  switch (t) {
    case DType::Bool: return "|b1";
    case DType::Int32: return "<i4";
    case DType::Int64: return "<i8";
    case DType::Float16: return "<f2";
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    case DType::BFloat16: return nullptr;
  }
  return nullptr;
}

}  // namespace

Tensor load_npy(const std::string& path) {
  constexpr std::string_view op = "load_npy";
  InFile f(op, path);
  char pre[kNpyMagicLen + 2];
  uint64_t head = std::min<uint64_t>(f.size(), sizeof pre);
  f.read(pre, head, 0);
  if (std::memcmp(pre, kNpyMagic, std::min<uint64_t>(head, kNpyMagicLen)) != 0 || head == 0)
    fail("{}: {}: not an npy file (bad magic bytes)", op, path);
  if (head < sizeof pre)
    fail("{}: {}: file is truncated: {} bytes, too short for the npy preamble", op, path, f.size());
  int major = static_cast<uint8_t>(pre[6]), minor = static_cast<uint8_t>(pre[7]);
  if (major < 1 || major > 3) fail("{}: {}: unsupported npy format version {}.{}", op, path, major, minor);

  // 1.0 stores the header length in 2 bytes, 2.0 and 3.0 (3.0: utf-8 header) in 4
  uint64_t len_bytes = major == 1 ? 2 : 4;
  if (f.size() < sizeof pre + len_bytes)
    fail("{}: {}: file is truncated: {} bytes, too short for the npy preamble", op, path, f.size());
  uint8_t lb[4] = {};
  f.read(lb, len_bytes, sizeof pre);
  uint64_t header_len = lb[0] | (uint64_t(lb[1]) << 8) | (uint64_t(lb[2]) << 16) | (uint64_t(lb[3]) << 24);
  uint64_t data_start = sizeof pre + len_bytes + header_len;
  if (data_start > f.size())
    fail("{}: {}: file is truncated: header says {} bytes of header, {} present", op, path, header_len,
         f.size() - sizeof pre - len_bytes);
  std::string header(header_len, '\0');
  f.read(header.data(), header_len, sizeof pre + len_bytes);

  std::string where = fmt::format("{}: {}: header", op, path);
  Lit h = LiteralParser(header, /*python=*/true, where).document();
  if (h.kind != Lit::Kind::Object) fail("{} is {}, not a dict", where, kind_name(h.kind));
  for (const auto& [k, v] : h.members)
    if (k != "descr" && k != "fortran_order" && k != "shape") fail("{} has an unexpected key '{}'", where, k);
  const Lit* descr = h.find("descr");
  const Lit* fortran = h.find("fortran_order");
  const Lit* shape_lit = h.find("shape");
  if (!descr || !fortran || !shape_lit) fail("{} lacks one of 'descr', 'fortran_order' and 'shape'", where);
  if (descr->kind == Lit::Kind::Array) fail("{}: {}: structured dtypes are not supported", op, path);
  if (descr->kind != Lit::Kind::String) fail("{}: 'descr' is {}, not a string", where, kind_name(descr->kind));
  if (fortran->kind != Lit::Kind::Bool)
    fail("{}: 'fortran_order' is {}, not True or False", where, kind_name(fortran->kind));
  if (shape_lit->kind != Lit::Kind::Array)
    fail("{}: 'shape' is {}, not a tuple", where, kind_name(shape_lit->kind));
  Shape shape;
  for (const Lit& d : shape_lit->items) {
    if (d.kind != Lit::Kind::Int || d.i < 0) fail("{}: 'shape' holds something other than sizes >= 0", where);
    shape.push_back(d.i);
  }

  const std::string& ds = descr->s;
  const NpyType* type = nullptr;
  char order = ds.empty() ? '?' : ds[0];
  if (ds.size() >= 2 && (order == '<' || order == '>' || order == '|' || order == '='))
    for (const NpyType& t : kNpyTypes)
      if (std::string_view(ds).substr(1) == t.code) type = &t;
  if (!type)
    fail("{}: {}: unsupported dtype '{}' (kiln reads <f2 <f4 <f8 <i4 <i8 |b1, either byte order)", op, path, ds);

  auto nbytes = byte_size(shape, type->dtype);
  if (!nbytes) fail("{}: {}: shape ({}) is too large to address", op, path, shape_text(shape));
  uint64_t present = f.size() - data_start;
  if (present < *nbytes)
    fail("{}: {}: file is truncated: header says {} bytes of data, {} present", op, path, *nbytes, present);
  if (present > *nbytes)
    fail("{}: {}: {} unexpected bytes after the {} bytes of data the header describes", op, path,
         present - *nbytes, *nbytes);

  // Fortran order is row-major data of the reversed shape; read that, then permute back.
  Shape stored = shape;
  if (fortran->b) std::reverse(stored.begin(), stored.end());
  Tensor t = Tensor::empty(stored, type->dtype);
  f.read(t.raw_data(), *nbytes, data_start);
  if (order == '>') byte_swap(t);
  normalize_bools(t);
  if (fortran->b && shape.size() > 1) {
    Shape rev(shape.size());
    for (size_t i = 0; i < rev.size(); ++i) rev[i] = int64_t(rev.size() - 1 - i);
    t = t.permute(rev).contiguous();
  }
  return t;
}

void save_npy(const std::string& path, const Tensor& t) {
  constexpr std::string_view op = "save_npy";
  if (t.defined() && t.dtype() == DType::BFloat16)
    fail("{}: {}: numpy has no bfloat16 dtype; save t.to(DType::Float32) or use save_safetensors", op, path);
  Tensor c = row_major(op, path, t, "");
  const Shape& s = c.sizes();
  std::string shape = fmt::format("({}{})", shape_text(s), s.size() == 1 ? "," : "");
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npy_descr(c.dtype()), shape);
  // As numpy does: pad with spaces and a final newline so the data starts 64-byte aligned.
  auto padded = [&](size_t preamble) {
    size_t total = preamble + dict.size() + 1;
    return dict + std::string((64 - total % 64) % 64, ' ') + "\n";
  };
  std::string header = padded(kNpyMagicLen + 2 + 2);
  int major = 1;
  if (header.size() > 65535) {
    major = 2;
    header = padded(kNpyMagicLen + 2 + 4);
  }
  std::string pre(kNpyMagic, kNpyMagicLen);
  pre += char(major);
  pre += char(0);
  uint64_t n = header.size();
  for (int k = 0; k < (major == 1 ? 2 : 4); ++k) pre += char((n >> (8 * k)) & 0xff);

  OutFile f(op, path);
  f.write(pre);
  f.write(header);
  f.write(c.raw_data(), uint64_t(c.numel()) * c.element_size());
  f.close();
}

// ---------------------------------------------------------------------------------------------------
// .safetensors

namespace {

struct StType {
  std::string_view name;
  DType dtype;
};
constexpr StType kStTypes[] = {{"F32", DType::Float32}, {"F64", DType::Float64}, {"F16", DType::Float16},
                               {"BF16", DType::BFloat16}, {"I32", DType::Int32},   {"I64", DType::Int64},
                               {"BOOL", DType::Bool}};

std::string_view st_name(DType t) {
  for (const StType& s : kStTypes)
    if (s.dtype == t) return s.name;
  return "?";
}

// The safetensors library refuses headers above 100 MB; so does kiln, before allocating one.
constexpr uint64_t kMaxStHeader = 100'000'000;

struct StEntry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

struct StFile {
  std::vector<StEntry> entries;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
};

// Reads and validates the header the way the safetensors library does: every tensor's byte range
// matches its dtype and shape, and the ranges tile the data area exactly, with no gap or overlap.
StFile read_st_header(std::string_view op, const std::string& path, InFile& f) {
  if (f.size() < 8)
    fail("{}: {}: file is truncated: {} bytes, too short for the 8-byte header length", op, path, f.size());
  uint8_t lb[8];
  f.read(lb, 8, 0);
  uint64_t n = 0;
  for (int k = 7; k >= 0; --k) n = (n << 8) | lb[k];
  if (n > kMaxStHeader) fail("{}: {}: header length {} exceeds the 100 MB limit of the format", op, path, n);
  if (n > f.size() - 8)
    fail("{}: {}: file is truncated: header says {} bytes of json, {} present", op, path, n, f.size() - 8);
  std::string text(n, '\0');
  f.read(text.data(), n, 8);

  std::string where = fmt::format("{}: {}: header", op, path);
  if (text.empty() || text[0] != '{') fail("{} does not start with '{{'", where);
  Lit h = LiteralParser(text, /*python=*/false, where).document();

  StFile out;
  out.data_start = 8 + n;
  for (const auto& [name, v] : h.members) {
    if (name == "__metadata__") {
      if (v.kind != Lit::Kind::Object) fail("{}: __metadata__ is {}, not an object", where, kind_name(v.kind));
      for (const auto& [k, mv] : v.members) {
        if (mv.kind != Lit::Kind::String)
          fail("{}: __metadata__ value \"{}\" is {}, not a string", where, k, kind_name(mv.kind));
        out.metadata[k] = mv.s;
      }
      continue;
    }
    if (v.kind != Lit::Kind::Object) fail("{}: tensor \"{}\" is {}, not an object", where, name, kind_name(v.kind));
    const Lit* dt = v.find("dtype");
    const Lit* shape = v.find("shape");
    const Lit* offs = v.find("data_offsets");
    if (!dt || !shape || !offs) fail("{}: tensor \"{}\" lacks one of dtype, shape and data_offsets", where, name);
    if (dt->kind != Lit::Kind::String) fail("{}: tensor \"{}\" dtype is {}, not a string", where, name, kind_name(dt->kind));
    const StType* type = nullptr;
    for (const StType& s : kStTypes)
      if (s.name == dt->s) type = &s;
    if (!type)
      fail("{}: {}: tensor \"{}\" has unsupported dtype \"{}\" (kiln reads F32 F64 F16 BF16 I32 I64 BOOL)", op,
           path, name, dt->s);
    StEntry e{name, type->dtype, {}, 0, 0};
    if (shape->kind != Lit::Kind::Array) fail("{}: tensor \"{}\" shape is {}, not an array", where, name, kind_name(shape->kind));
    for (const Lit& d : shape->items) {
      if (d.kind != Lit::Kind::Int || d.i < 0)
        fail("{}: tensor \"{}\" shape holds something other than sizes >= 0", where, name);
      e.shape.push_back(d.i);
    }
    if (offs->kind != Lit::Kind::Array || offs->items.size() != 2 || offs->items[0].kind != Lit::Kind::Int ||
        offs->items[1].kind != Lit::Kind::Int || offs->items[0].i < 0 || offs->items[1].i < offs->items[0].i)
      fail("{}: tensor \"{}\" data_offsets is not [begin, end] with 0 <= begin <= end", where, name);
    e.begin = uint64_t(offs->items[0].i);
    e.end = uint64_t(offs->items[1].i);
    auto need = byte_size(e.shape, e.dtype);
    if (!need || *need != e.end - e.begin)
      fail("{}: {}: tensor \"{}\" of dtype {} and shape [{}] needs {} bytes but data_offsets [{}, {}] span {}", op,
           path, name, dt->s, shape_text(e.shape), need ? fmt::format("{}", *need) : std::string("too many"),
           e.begin, e.end, e.end - e.begin);
    out.entries.push_back(std::move(e));
  }

  uint64_t present = f.size() - out.data_start;
  std::vector<const StEntry*> by_offset;
  for (const StEntry& e : out.entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expect = 0;
  for (const StEntry* e : by_offset) {
    if (e->begin != expect)
      fail("{}: {}: tensor \"{}\" starts at byte {} of the data but the previous tensor ends at {}", op, path,
           e->name, e->begin, expect);
    expect = e->end;
  }
  if (expect > present)
    fail("{}: {}: file is truncated: header says {} bytes of data, {} present", op, path, expect, present);
  if (expect < present)
    fail("{}: {}: {} unexpected bytes after the {} bytes of data the header describes", op, path,
         present - expect, expect);
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      out += fmt::format("\\u{:04x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

namespace {
SafetensorsContents read_st(std::string_view op, const std::string& label, InFile& f) {
  StFile st = read_st_header(op, label, f);
  SafetensorsContents out;
  for (const StEntry& e : st.entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    f.read(t.raw_data(), e.end - e.begin, st.data_start + e.begin);
    normalize_bools(t);
    out.tensors.emplace(e.name, std::move(t));
  }
  out.metadata = std::move(st.metadata);
  return out;
}
}  // namespace

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  constexpr std::string_view op = "load_safetensors";
  InFile f(op, path);
  return read_st(op, path, f).tensors;
}

std::map<std::string, std::string> load_safetensors_metadata(const std::string& path) {
  constexpr std::string_view op = "load_safetensors_metadata";
  InFile f(op, path);
  return read_st_header(op, path, f).metadata;
}

namespace {

// The header (length and json) of a safetensors file, and the row-major tensors its data area holds.
std::string st_header(std::string_view op, const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata, std::vector<Tensor>& data) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      header += fmt::format("{}{}:{}", first ? "" : ",", json_string(k), json_string(v));
      first = false;
    }
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail("{}: {}: \"__metadata__\" is reserved and cannot name a tensor", op, path);
    Tensor c = row_major(op, path, t, fmt::format(" \"{}\"", name));
    uint64_t n = uint64_t(c.numel()) * c.element_size();
    if (header.size() > 1) header += ",";
    header += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", json_string(name),
                          st_name(c.dtype()), fmt::join(c.sizes(), ","), offset, offset + n);
    offset += n;
    data.push_back(std::move(c));
  }
  header += "}";
  // As the safetensors library does: pad with spaces so the data starts 8-byte aligned.
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');

  std::string out(8, '\0');
  for (int k = 0; k < 8; ++k) out[size_t(k)] = char((uint64_t(header.size()) >> (8 * k)) & 0xff);
  return out + header;
}

uint64_t nbytes(const Tensor& c) { return uint64_t(c.numel()) * c.element_size(); }

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  constexpr std::string_view op = "save_safetensors";
  std::vector<Tensor> data;
  std::string header = st_header(op, path, tensors, metadata, data);
  OutFile f(op, path);
  f.write(header);
  for (const Tensor& c : data) f.write(c.raw_data(), nbytes(c));
  f.close();
}

std::string safetensors_bytes(const std::map<std::string, Tensor>& tensors,
                              const std::map<std::string, std::string>& metadata, std::string_view op) {
  std::vector<Tensor> data;
  std::string out = st_header(op, "<memory>", tensors, metadata, data);
  for (const Tensor& c : data) out.append(static_cast<const char*>(c.raw_data()), nbytes(c));
  return out;
}

SafetensorsContents load_safetensors_section(const std::string& path, uint64_t offset, uint64_t length,
                                             std::string_view op, const std::string& label) {
  InFile f(op, path, offset, length);
  return read_st(op, label, f);
}

}  // namespace kiln
