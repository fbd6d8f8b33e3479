// A port of torch/_tensor_str.py (default print options, real dtypes, strided CPU tensors). The
// structure follows the Python file function by function so a difference against torch is easy to
// trace back; elements are read through the tensor's own strides, so views print without a copy.
#include "core/format.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace kiln {
namespace {

// torch.set_printoptions(profile="default")
constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;

enum class Kind { Floating, Integer, Boolean };

// Element access through strides; floating values widen to double exactly as tensor.tolist() does,
// integers stay int64 so large values are not rounded.
struct Elements {
  const char* base;
  size_t item;
  DType dtype;

  double floating(int64_t off) const {
    return visit_dtype(dtype, [&](auto tag) {
      decltype(tag) v;
      std::memcpy(&v, base + off * int64_t(item), sizeof v);
      return static_cast<double>(v);
    });
  }
  int64_t integer(int64_t off) const {
    return visit_dtype(dtype, [&](auto tag) -> int64_t {
      using T = decltype(tag);
      T v;
      std::memcpy(&v, base + off * int64_t(item), sizeof v);
      if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>)
        return int64_t(float(v));
      else
        return int64_t(v);
    });
  }
};

// Calls f(offset) for each element that torch shows: with summarize, only the first and last
// kEdgeItems along every dim longer than 2 * kEdgeItems (get_summarized_data).
template <class F>
void for_each_shown(const Shape& sizes, const Shape& strides, size_t d, int64_t off, bool summarize, F&& f) {
  if (d == sizes.size()) {
    f(off);
    return;
  }
  int64_t n = sizes[d];
  auto visit = [&](int64_t i) { for_each_shown(sizes, strides, d + 1, off + i * strides[d], summarize, f); };
  if (summarize && n > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) visit(i);
    for (int64_t i = n - kEdgeItems; i < n; ++i) visit(i);
  } else {
    for (int64_t i = 0; i < n; ++i) visit(i);
  }
}

// Python prints every NaN as "nan"; fmt would keep a sign bit.
double unsign_nan(double v) { return std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : v; }

// torch._tensor_str._Formatter: picks fixed, integer-valued or scientific notation from all shown
// values and pads every element to the widest one.
class Formatter {
 public:
  Formatter(Kind kind, const std::vector<double>& fvals, const std::vector<int64_t>& ivals) : kind_(kind) {
    if (kind_ == Kind::Integer) {
      for (int64_t v : ivals) max_width_ = std::max(max_width_, fmt::formatted_size("{}", v));
      return;
    }
    if (kind_ == Kind::Boolean) {
      for (int64_t v : ivals) max_width_ = std::max(max_width_, v ? size_t(4) : size_t(5));
      return;
    }
    std::vector<double> vals;
    for (double v : fvals)
      if (std::isfinite(v) && v != 0) vals.push_back(v);
    if (vals.empty()) return;
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    for (double v : vals) {
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      if (hi / lo > 1000.0 || hi > 1.0e8) {
        sci_mode_ = true;
        for (double v : vals) max_width_ = std::max(max_width_, fmt::formatted_size("{:.{}e}", v, kPrecision));
      } else {
        // the trailing "." that marks a float
        for (double v : vals) max_width_ = std::max(max_width_, fmt::formatted_size("{:.0f}", v) + 1);
      }
    } else if (hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4) {
      sci_mode_ = true;
      for (double v : vals) max_width_ = std::max(max_width_, fmt::formatted_size("{:.{}e}", v, kPrecision));
    } else {
      for (double v : vals) max_width_ = std::max(max_width_, fmt::formatted_size("{:.{}f}", v, kPrecision));
    }
  }

  size_t width() const { return max_width_; }

  std::string format(const Elements& e, int64_t off) const {
    std::string s;
    if (kind_ == Kind::Integer) {
      s = fmt::format("{}", e.integer(off));
    } else if (kind_ == Kind::Boolean) {
      s = e.integer(off) ? "True" : "False";
    } else {
      double v = unsign_nan(e.floating(off));
      if (sci_mode_) {
        s = fmt::format("{:.{}e}", v, kPrecision);
      } else if (int_mode_) {
        s = fmt::format("{:.0f}", v);
        if (std::isfinite(v)) s += '.';
      } else {
        s = fmt::format("{:.{}f}", v, kPrecision);
      }
    }
    if (s.size() < max_width_) s.insert(0, max_width_ - s.size(), ' ');
    return s;
  }

 private:
  Kind kind_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t max_width_ = 1;
};

struct Printer {
  const Shape& sizes;
  const Shape& strides;
  Elements elems;
  bool summarize;
  const Formatter& fmtr;

  // _vector_str: one line of elements per linewidth, " ..." standing in for the hidden middle.
  std::string vector_str(size_t d, int64_t off, int64_t indent) const {
    int64_t element_length = int64_t(fmtr.width()) + 2;
    int64_t per_line = std::max<int64_t>(
        1, int64_t(std::floor(double(kLineWidth - indent) / double(element_length))));
    std::vector<std::string> data;
    int64_t n = sizes[d];
    auto push = [&](int64_t i) { data.push_back(fmtr.format(elems, off + i * strides[d])); };
    if (summarize && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) push(i);
      data.push_back(" ...");
      for (int64_t i = n - kEdgeItems; i < n; ++i) push(i);
    } else {
      for (int64_t i = 0; i < n; ++i) push(i);
    }
    std::string out = "[";
    std::string line_sep = ",\n" + std::string(size_t(indent + 1), ' ');
    for (size_t i = 0; i < data.size(); ++i) {
      if (i > 0) out += (int64_t(i) % per_line == 0) ? line_sep : ", ";
      out += data[i];
    }
    return out + "]";
  }

  // _tensor_str_with_formatter: nested brackets, one blank line fewer per inner dim.
  std::string tensor_str(size_t d, int64_t off, int64_t indent) const {
    size_t rest = sizes.size() - d;
    if (rest == 0) return fmtr.format(elems, off);
    if (rest == 1) return vector_str(d, off, indent);
    std::vector<std::string> slices;
    int64_t n = sizes[d];
    auto push = [&](int64_t i) { slices.push_back(tensor_str(d + 1, off + i * strides[d], indent + 1)); };
    if (summarize && n > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) push(i);
      slices.push_back("...");
      for (int64_t i = n - kEdgeItems; i < n; ++i) push(i);
    } else {
      for (int64_t i = 0; i < n; ++i) push(i);
    }
    std::string sep = "," + std::string(rest - 1, '\n') + std::string(size_t(indent + 1), ' ');
    std::string out = "[";
    for (size_t i = 0; i < slices.size(); ++i) {
      if (i > 0) out += sep;
      out += slices[i];
    }
    return out + "]";
  }
};

// Python's str(tuple): "(0, 3)", "(0,)", "()".
std::string tuple_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  if (s.size() == 1) out += ",";
  return out + ")";
}

// _add_suffixes: ", dtype=..." on the same line while it fits in the line width, else on its own line.
std::string add_suffixes(std::string s, const std::vector<std::string>& suffixes, int64_t indent) {
  size_t nl = s.rfind('\n');
  // Mirrors torch's arithmetic exactly, including its +1 (rfind gives -1 when there is no newline).
  int64_t last_line_len = int64_t(s.size()) - (nl == std::string::npos ? -1 : int64_t(nl)) + 1;
  for (const std::string& suffix : suffixes) {
    int64_t len = int64_t(suffix.size());
    if (last_line_len + len + 2 > kLineWidth) {
      s += ",\n" + std::string(size_t(indent), ' ') + suffix;
      last_line_len = indent + len;
    } else {
      s += ", " + suffix;
      last_line_len += len + 2;
    }
  }
  return s + ")";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int64_t indent = int64_t(prefix.size());
  std::vector<std::string> suffixes;
  // A device tensor prints from a host copy, with torch's device='cuda:0' suffix.
  if (!device().is_cpu()) suffixes.push_back("device='" + device().str() + "'");
  const Tensor host = device().is_cpu() ? *this : host_contiguous();
  const Tensor& t = host;
  std::string body;
  DType dt = t.dtype();
  std::string dtype_suffix = "dtype=torch." + std::string(dtype_name(dt));
  if (t.numel() == 0) {
    if (t.dim() != 1) suffixes.push_back("size=" + tuple_str(t.sizes()));
    // no element shows which kind of number this is, so even int64 and bool are named
    if (dt != default_dtype()) suffixes.push_back(dtype_suffix);
    body = "[]";
  } else {
    if (dt != DType::Float32 && dt != DType::Int64 && dt != DType::Bool) suffixes.push_back(dtype_suffix);
    Kind kind = is_floating(dt) ? Kind::Floating : dt == DType::Bool ? Kind::Boolean : Kind::Integer;
    Elements elems{static_cast<const char*>(t.raw_data()), itemsize(dt), dt};
    bool summarize = t.numel() > kThreshold;
    std::vector<double> fvals;
    std::vector<int64_t> ivals;
    for_each_shown(t.sizes(), t.strides(), 0, 0, summarize, [&](int64_t off) {
      if (kind == Kind::Floating)
        fvals.push_back(elems.floating(off));
      else
        ivals.push_back(elems.integer(off));
    });
    Formatter fmtr(kind, fvals, ivals);
    body = Printer{t.sizes(), t.strides(), elems, summarize, fmtr}.tensor_str(0, 0, indent);
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace kiln
