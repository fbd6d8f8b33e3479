// .npy and .safetensors: round trips for every dtype and for views, files written by NumPy and by the
// safetensors library (tests/data, made by tests/data/make_fixtures.py), and corrupt files, which must
// all raise kiln::Error with a message naming the file, never crash.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support.h"

using namespace kiln;
using kiln::test::check_error;
using kiln::test::values;
namespace fs = std::filesystem;

namespace {

std::string tmp(const std::string& name) { return test::scratch_path("kiln_io_test", name); }
std::string data(const std::string& rel) { return std::string(KILN_TEST_DATA) + "/" + rel; }


// Every dtype with awkward values, plus 0-d and empty shapes.
std::vector<std::pair<std::string, Tensor>> samples() {
  std::vector<double> v = {0.5, -1.25, 3.0, 1e-3, -7.0, 1024.0};
  std::vector<std::pair<std::string, Tensor>> out;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
                   DType::Bool}) {
    std::string n(dtype_name(dt));
    out.emplace_back(n + "_2x3", tensor(v, {2, 3}, dt));
    out.emplace_back(n + "_3d", tensor(std::vector<double>(v.begin(), v.begin() + 4), {1, 2, 2}, dt));
    out.emplace_back(n + "_scalar", scalar_tensor(2, dt));
    out.emplace_back(n + "_empty", tensor(std::vector<double>{}, {0, 5}, dt));
  }
  out.emplace_back("nan_inf", tensor(std::vector<double>{NAN, INFINITY, -INFINITY, -0.0}));
  out.emplace_back("int64_extremes", tensor(std::vector<int64_t>{INT64_MIN, INT64_MAX, 0}));
  return out;
}

// Views whose memory order is not row-major order.
std::vector<std::pair<std::string, Tensor>> views() {
  Tensor base = arange(0, 24, 1, DType::Float32).reshape({2, 3, 4});
  return {{"transposed", base.transpose(0, 2)},
          {"sliced", base.slice(2, 1, std::nullopt, 2)},
          {"selected", base.select(1, 1)},
          {"expanded", tensor(std::vector<double>{1, 2, 3}, {3, 1}, DType::Int64).expand({3, 4})},
          {"offset", arange(10).slice(0, 3, 7)}};
}

// Loads every truncation and many single-bit flips of a valid file: each must load or raise
// kiln::Error naming the file. Returns how many raised.
template <class Load>
int fuzz(const std::string& valid, const std::string& scratch, Load load) {
  std::string bytes = test::read_bytes(valid);
  int errors = 0;
  auto attempt = [&](const std::string& b) {
    test::write_bytes(scratch, b);
    try {
      load(scratch);
    } catch (const Error& e) {
      ++errors;
      CHECK_MESSAGE(std::string(e.what()).find(scratch) != std::string::npos, e.what());
    }
  };
  for (size_t n = 0; n < bytes.size(); ++n) attempt(bytes.substr(0, n));
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit : {0, 3, 7}) {
      std::string b = bytes;
      b[i] = char(b[i] ^ (1 << bit));
      attempt(b);
    }
  return errors;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// npy

TEST_CASE("io: npy round trip for every numpy dtype, 0-d and empty") {
  for (auto& [name, t] : samples()) {
    if (t.dtype() == DType::BFloat16) continue;
    CAPTURE(name);
    std::string p = tmp(name + ".npy");
    save_npy(p, t);
    test::check_bit_identical(load_npy(p), t);
  }
}

TEST_CASE("io: npy saves views in row-major order") {
  for (auto& [name, t] : views()) {
    CAPTURE(name);
    std::string p = tmp("view_" + name + ".npy");
    save_npy(p, t);
    Tensor back = load_npy(p);
    CHECK(back.is_contiguous());
    test::check_bit_identical(back, t);
  }
}

TEST_CASE("io: npy refuses bfloat16 and points to the alternatives") {
  check_error([] { save_npy(tmp("bf.npy"), ones({2}, DType::BFloat16)); },
              "numpy has no bfloat16 dtype; save t.to(DType::Float32) or use save_safetensors");
}

TEST_CASE("io: npy bytes are identical to numpy's for the same array") {
  Tensor t = load_npy(data("npy/f4_2x3.npy"));
  std::string p = tmp("same_as_numpy.npy");
  save_npy(p, t);
  std::string ours = test::read_bytes(p);
  CHECK(ours == test::read_bytes(data("npy/f4_2x3.npy")));
  CHECK(ours.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(ours.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") == 10);
  size_t header_end = 10 + size_t(uint8_t(ours[8]) | (uint8_t(ours[9]) << 8));
  CHECK(header_end % 64 == 0);
  CHECK(ours[header_end - 1] == '\n');
}

TEST_CASE("io: npy shapes with one dim print numpy's 1-tuple") {
  std::string p = tmp("one_dim.npy");
  save_npy(p, arange(3));
  CHECK(test::read_bytes(p).find("'shape': (3,), }") != std::string::npos);
  save_npy(p, scalar_tensor(1.5));
  CHECK(test::read_bytes(p).find("'shape': (), }") != std::string::npos);
}

TEST_CASE("io: npy files written by numpy") {
  Tensor f4 = load_npy(data("npy/f4_2x3.npy"));
  CHECK(f4.dtype() == DType::Float32);
  CHECK(f4.sizes() == Shape{2, 3});
  CHECK(values(f4) == std::vector<double>{0, 0.25, 0.5, 0.75, 1, 1.25});

  Tensor f8 = load_npy(data("npy/f8_3.npy"));
  CHECK(f8.dtype() == DType::Float64);
  CHECK(values(f8) == std::vector<double>{0.5, -1.25, 1e300});

  Tensor f2 = load_npy(data("npy/f2_4.npy"));
  CHECK(f2.dtype() == DType::Float16);
  CHECK(values(f2) == std::vector<double>{1, 0.5, -2, 65504});

  Tensor i4 = load_npy(data("npy/i4_2x2.npy"));
  CHECK(i4.dtype() == DType::Int32);
  CHECK(i4.sizes() == Shape{2, 2});
  CHECK(values(i4) == std::vector<double>{1, -2, 3, 2147483647});

  Tensor i8 = load_npy(data("npy/i8_3.npy"));
  REQUIRE(i8.dtype() == DType::Int64);
  const int64_t* ip = i8.data_ptr<int64_t>();
  CHECK(ip[0] == INT64_MIN);
  CHECK(ip[1] == 0);
  CHECK(ip[2] == INT64_MAX);

  Tensor b1 = load_npy(data("npy/b1_5.npy"));
  CHECK(b1.dtype() == DType::Bool);
  CHECK(values(b1) == std::vector<double>{1, 0, 1, 1, 0});

  Tensor s = load_npy(data("npy/f4_scalar.npy"));
  CHECK(s.dim() == 0);
  CHECK(s.item<double>() == 3.5);

  Tensor e = load_npy(data("npy/f4_empty_0x3.npy"));
  CHECK(e.sizes() == Shape{0, 3});
  CHECK(e.dtype() == DType::Float32);
}

TEST_CASE("io: npy fortran order, big-endian data and format versions 2.0 and 3.0") {
  Tensor f = load_npy(data("npy/f4_fortran_2x3x4.npy"));
  test::check_bit_identical(f, arange(0, 24, 1, DType::Float32).reshape({2, 3, 4}));
  CHECK(f.is_contiguous());

  Tensor be = load_npy(data("npy/f8_bigendian_2x2.npy"));
  CHECK(be.dtype() == DType::Float64);
  CHECK(values(be) == std::vector<double>{1.5, -2.0, 3.25, 1e-300});
  Tensor bi = load_npy(data("npy/i4_bigendian_3.npy"));
  CHECK(bi.dtype() == DType::Int32);
  CHECK(values(bi) == std::vector<double>{1, -2, 65536});

  for (const char* v : {"npy/f4_v2_3.npy", "npy/f4_v3_3.npy"}) {
    CAPTURE(v);
    test::check_bit_identical(load_npy(data(v)), tensor(std::vector<double>{1, 2, 3}));
  }
}

TEST_CASE("io: npy writes version 2.0 when the header outgrows 1.0") {
  // 24000 dims of size 1 make a 72 KB shape tuple; version 1.0 caps headers at 64 KB
  Shape big(24000, 1);
  Tensor t = Tensor::empty(big, DType::Int32);
  *t.data_ptr<int32_t>() = 7;
  std::string p = tmp("v2.npy");
  save_npy(p, t);
  std::string b = test::read_bytes(p);
  CHECK(b[6] == 2);
  CHECK(b[7] == 0);
  uint64_t hl = uint8_t(b[8]) | (uint8_t(b[9]) << 8) | (uint64_t(uint8_t(b[10])) << 16);
  CHECK((12 + hl) % 64 == 0);
  Tensor back = load_npy(p);
  CHECK(back.sizes() == big);
  CHECK(back.dtype() == DType::Int32);
  CHECK(*back.data_ptr<int32_t>() == 7);
}

TEST_CASE("io: npy dtypes kiln cannot hold are rejected by name") {
  check_error([] { load_npy(data("npy/u1_unsupported.npy")); },
              "u1_unsupported.npy: unsupported dtype '|u1' (kiln reads <f2 <f4 <f8 <i4 <i8 |b1, either byte order)");
  check_error([] { load_npy(data("npy/structured_unsupported.npy")); },
              "structured_unsupported.npy: structured dtypes are not supported");
}

TEST_CASE("io: corrupt npy files give errors naming the file and the problem") {
  std::string good = test::read_bytes(data("npy/f4_2x3.npy"));  // 128-byte header, 24 bytes of data
  std::string p = tmp("corrupt.npy");
  auto with = [&](const std::string& bytes) {
    test::write_bytes(p, bytes);
    return [&] { load_npy(p); };
  };
  check_error([] { load_npy(tmp("does_not_exist.npy")); }, "load_npy: " + tmp("does_not_exist.npy") + ": cannot open: No such file or directory");
  check_error([&] { load_npy(fs::path(p).parent_path().string()); }, "cannot open");
  check_error(with(""), "load_npy: " + p + ": not an npy file (bad magic bytes)");
  check_error(with("PK\x03\x04 a zip file"), "not an npy file (bad magic bytes)");
  check_error(with(good.substr(0, 7)), "file is truncated: 7 bytes, too short for the npy preamble");
  check_error(with(good.substr(0, 140)), "load_npy: " + p + ": file is truncated: header says 24 bytes of data, 12 present");
  check_error(with(good.substr(0, 100)), "file is truncated: header says 118 bytes of header, 90 present");
  check_error(with(good + "xyz"), "3 unexpected bytes after the 24 bytes of data the header describes");

  std::string v9 = good;
  v9[6] = 9;
  check_error(with(v9), "unsupported npy format version 9.0");

  // a version 1.0 file with this header text and the 24 data bytes of `good`
  auto header = [&](std::string dict) {
    dict += "\n";
    return good.substr(0, 8) + char(dict.size() & 0xff) + char(dict.size() >> 8) + dict + good.substr(128);
  };
  CHECK_NOTHROW(with(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"))());
  check_error(with(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)")),
              "header: expected ',' or '}' at the end of the text");
  check_error(with(header("{'descr': '<f4', 'fortran_order': False}")),
              "header lacks one of 'descr', 'fortran_order' and 'shape'");
  check_error(with(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}")),
              "header has an unexpected key 'extra'");
  check_error(with(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}")),
              "header: 'shape' holds something other than sizes >= 0");
  check_error(with(header("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}")),
              "header: 'fortran_order' is an integer, not True or False");
  check_error(with(header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (6,)}")),
              "header: duplicate key \"shape\"");
  check_error(with(header("[1, 2]")), "header is an array, not a dict");
  check_error(with(header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}")),
              "header: integer out of range at byte");
  check_error(with(header("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}")),
              "shape (4294967296, 4294967296) is too large to address");
  check_error(with(header("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000)}")),
              "file is truncated: header says 4000000000000 bytes of data, 24 present");
  check_error(with(header(std::string(100, '(') + std::string(100, ')'))), "nesting deeper than 64 levels");
  check_error(with(header("{'descr': \x01}")), "header: unexpected character '\\x01' at byte 10");
}

TEST_CASE("io: npy survives every truncation and bit flip of a valid file") {
  int errors = fuzz(data("npy/f4_2x3.npy"), tmp("fuzz.npy"), [](const std::string& p) { load_npy(p); });
  CHECK(errors > 152);  // at least every truncation
}

TEST_CASE("io: npy write errors name the file") {
  check_error([] { save_npy("/nonexistent-dir/x.npy", ones({2})); },
              "save_npy: /nonexistent-dir/x.npy: cannot open for writing: No such file or directory");
  check_error([] { save_npy(tmp("undef.npy"), Tensor()); }, "save_npy: " + tmp("undef.npy") + ": tensor is undefined");
}

// ---------------------------------------------------------------------------------------------------
// safetensors

TEST_CASE("io: safetensors round trip for every dtype with metadata") {
  std::map<std::string, Tensor> in;
  for (auto& [name, t] : samples()) in[name] = t;
  for (auto& [name, t] : views()) in["view_" + name] = t;
  std::map<std::string, std::string> meta = {{"format", "pt"}, {"quote\"and\\slash", "line\nbreak \x01 \xc3\xa9"}};
  std::string p = tmp("all.safetensors");
  save_safetensors(p, in, meta);
  auto out = load_safetensors(p);
  REQUIRE(out.size() == in.size());
  for (auto& [name, t] : in) {
    CAPTURE(name);
    REQUIRE(out.count(name) == 1);
    test::check_bit_identical(out[name], t);
  }
  CHECK(load_safetensors_metadata(p) == meta);

  std::string bytes = test::read_bytes(p);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK((8 + n) % 8 == 0);  // data 8-byte aligned, as the reference writer does
  CHECK(bytes[8] == '{');
}

TEST_CASE("io: safetensors with no tensors and no metadata") {
  std::string p = tmp("empty.safetensors");
  save_safetensors(p, {});
  CHECK(load_safetensors(p).empty());
  CHECK(load_safetensors_metadata(p).empty());
}

TEST_CASE("io: safetensors written by pytorch") {
  std::string p = data("safetensors/torch_mixed.safetensors");
  auto m = load_safetensors(p);
  CHECK(m.size() == 10);
  CHECK(m.at("weight").dtype() == DType::Float32);
  CHECK(m.at("weight").sizes() == Shape{2, 3});
  CHECK(values(m.at("weight")) == std::vector<double>{0, 0.25, 0.5, 0.75, 1, 1.25});
  CHECK(values(m.at("bias")) == std::vector<double>{0.5, -1.25, 1e300});
  CHECK(m.at("half").dtype() == DType::Float16);
  CHECK(values(m.at("half")) == std::vector<double>{1, 0.5, -2, 65504});
  REQUIRE(m.at("brain").dtype() == DType::BFloat16);
  const auto* bf = m.at("brain").data_ptr<BFloat16>();
  CHECK(bf[0].bits == 16256);
  CHECK(bf[1].bits == uint16_t(-16640));
  CHECK(bf[2].bits == 32610);  // 3e38 rounded to bfloat16 by torch
  CHECK(m.at("ints").dtype() == DType::Int32);
  CHECK(values(m.at("ints")) == std::vector<double>{1, -2, 3, 2147483647});
  const int64_t* l = m.at("longs").data_ptr<int64_t>();
  CHECK(l[0] == INT64_MIN);
  CHECK(l[2] == INT64_MAX);
  CHECK(m.at("mask").dtype() == DType::Bool);
  CHECK(values(m.at("mask")) == std::vector<double>{1, 0, 1});
  CHECK(m.at("scalar").dim() == 0);
  CHECK(m.at("scalar").item<double>() == 3.5);
  CHECK(m.at("empty").sizes() == Shape{0, 4});
  CHECK(values(m.at("transposed")) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(load_safetensors_metadata(p) ==
        std::map<std::string, std::string>{{"format", "pt"}, {"note", "made by make_fixtures.py"}});
}

TEST_CASE("io: safetensors dtypes kiln cannot hold are rejected by name") {
  check_error([] { load_safetensors(data("safetensors/u8_unsupported.safetensors")); },
              "u8_unsupported.safetensors: tensor \"bytes\" has unsupported dtype \"U8\" (kiln reads F32 F64 F16 BF16 "
              "I32 I64 BOOL)");
}

TEST_CASE("io: corrupt safetensors files give errors naming the file and the problem") {
  std::string p = tmp("corrupt.safetensors");
  auto file = [&](std::string json, std::string payload = "", int64_t len = -1) {
    std::string b(8, '\0');
    uint64_t n = len >= 0 ? uint64_t(len) : json.size();
    std::memcpy(b.data(), &n, 8);
    test::write_bytes(p, b + json + payload);
    return [&] { load_safetensors(p); };
  };
  const std::string one = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string eight(8, '\0');
  CHECK_NOTHROW(file(one, eight)());

  check_error([] { load_safetensors(tmp("missing.safetensors")); }, "cannot open: No such file or directory");
  check_error(file("", "", 0), "header does not start with '{'");
  test::write_bytes(p, "abc");
  check_error([&] { load_safetensors(p); },
              "load_safetensors: " + p + ": file is truncated: 3 bytes, too short for the 8-byte header length");
  check_error(file(one, eight, 500),
              fmt::format("file is truncated: header says 500 bytes of json, {} present", one.size() + 8));
  check_error(file(one, eight, int64_t(1) << 40), "header length 1099511627776 exceeds the 100 MB limit of the format");
  check_error(file(one, std::string(4, '\0')), "load_safetensors: " + p + ": file is truncated: header says 8 bytes of data, 4 present");
  check_error(file(one, eight + "!"), "1 unexpected bytes after the 8 bytes of data the header describes");
  check_error(file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
              "tensor \"a\" of dtype F32 and shape [3] needs 12 bytes but data_offsets [0, 8] span 8");
  check_error(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                   eight + eight),
              "tensor \"b\" starts at byte 12 of the data but the previous tensor ends at 8");
  check_error(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                   eight),
              "starts at byte 4 of the data but the previous tensor ends at 8");
  check_error(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight),
              "header: tensor \"a\" data_offsets is not [begin, end] with 0 <= begin <= end");
  check_error(file(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", eight),
              "tensor \"a\" shape holds something other than sizes >= 0");
  check_error(file(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", eight),
              "tensor \"a\" lacks one of dtype, shape and data_offsets");
  check_error(file(R"({"a":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", eight),
              "tensor \"a\" dtype is an integer, not a string");
  check_error(file(R"({"a":[1,2]})"), "tensor \"a\" is an array, not an object");
  check_error(file(R"({"__metadata__":{"k":1}})"), "__metadata__ value \"k\" is an integer, not a string");
  check_error(file(R"({"__metadata__":"x"})"), "__metadata__ is a string, not an object");
  check_error(file(R"({"a":1,"a":2})"), "header: duplicate key \"a\" at byte");
  check_error(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},})", eight), "header: expected a quoted key");
  check_error(file(R"({"a" 1})"), "header: expected ':' after a key at byte 5");
  check_error(file(R"({"a":"\q"})"), "header: invalid escape '\\q' at byte");
  check_error(file(R"({"a":"\ud800"})"), "unpaired high surrogate");
  check_error(file("{\"a\":\"x\ny\"}"), "control character inside a string");
  check_error(file(R"({"a":"unterminated)"), "header: unterminated string at the end of the text");
  check_error(file(R"({"a":{}} trailing)"), "header: unexpected text after the end of the value at byte 9");
  check_error(file("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}"), "nesting deeper than 64 levels");
  check_error(file(R"({"a":tru})"), "header: unexpected character 't' at byte 5");
  check_error(file(R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}})"),
              "integer out of range");
  check_error(file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", eight),
              "needs too many bytes but data_offsets [0, 8] span 8");
  // escapes and non-ASCII names decode to UTF-8
  CHECK_NOTHROW(file(R"({"\u00e9\ud83d\ude00":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", eight)());
  CHECK(load_safetensors(p).count("\xc3\xa9\xf0\x9f\x98\x80") == 1);
}

TEST_CASE("io: safetensors survives every truncation and bit flip of a valid file") {
  int errors = fuzz(data("safetensors/torch_mixed.safetensors"), tmp("fuzz.safetensors"),
                    [](const std::string& p) { load_safetensors(p); });
  CHECK(errors > 821);
}

TEST_CASE("io: torch.save files survive every truncation and bit flip of a valid file") {
  // A kiln-written archive holding two views of one storage (tests/test_torch_checkpoint.cpp has torch's own
  // files, and mutates the pickle itself under a correct checksum).
  Tensor base = arange(0, 4, 1, DType::Float32).reshape({2, 2});
  torch_save(tmp("src.pt"), IValue::dict({{"a", base}, {"b", base.t()}}));
  int errors = fuzz(tmp("src.pt"), tmp("fuzz.pt"), [](const std::string& p) { torch_load(p); });
  CHECK(errors > int(test::read_bytes(tmp("src.pt")).size()));
}

TEST_CASE("io: safetensors write errors name the file") {
  check_error([] { save_safetensors("/nonexistent-dir/x.safetensors", {{"a", ones({2})}}); },
              "save_safetensors: /nonexistent-dir/x.safetensors: cannot open for writing");
  check_error([] { save_safetensors(tmp("r.safetensors"), {{"__metadata__", ones({2})}}); },
              "\"__metadata__\" is reserved and cannot name a tensor");
  check_error([] { save_safetensors(tmp("u.safetensors"), {{"w", Tensor()}}); }, "tensor \"w\" is undefined");
  CHECK_FALSE(fs::exists(tmp("u.safetensors")));
}
