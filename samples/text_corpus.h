#pragma once
// A character-level corpus for samples/train_gpt: every plain-text file of a directory (the `fortunes`
// package's /usr/share/games/fortunes by default), its characters as the vocabulary (bytes, sorted),
// encoded as int64 token ids, split into training and validation text as nanoGPT's prepare.py does (90/10).
#include <kiln/kiln.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace samples {

struct TextCorpus {
  std::string chars;  // the vocabulary: char of token id i is chars[i]
  kiln::Tensor train, val;  // int64 token ids
  int64_t vocab_size() const { return int64_t(chars.size()); }

  std::vector<int64_t> encode(const std::string& text) const {
    std::vector<int64_t> ids;
    for (unsigned char c : text) {
      size_t at = chars.find(char(c));
      if (at == std::string::npos) kiln::fail("train_gpt: the prompt's character {:?} is not in the corpus", char(c));
      ids.push_back(int64_t(at));
    }
    return ids;
  }
  std::string decode(const int64_t* ids, int64_t n) const {
    std::string s;
    for (int64_t i = 0; i < n; ++i) s += chars.at(size_t(ids[i]));
    return s;
  }
};

// The fortune files are the ones without an extension (.dat indexes and .u8 links are skipped), read in
// name order so the corpus, and with it every run, is the same on every machine.
inline TextCorpus load_text_corpus(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) kiln::fail("train_gpt: no corpus directory {} (apt-get install fortunes)", dir);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && !e.path().has_extension()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  if (text.size() < 10000) kiln::fail("train_gpt: the corpus in {} has {} characters, expected a book's worth", dir, text.size());
  std::array<bool, 256> seen{};
  for (unsigned char c : text) seen[c] = true;
  TextCorpus c;
  for (int i = 0; i < 256; ++i)
    if (seen[size_t(i)]) c.chars += char(i);
  std::vector<int64_t> ids = c.encode(text);
  int64_t n = int64_t(ids.size()), n_train = n * 9 / 10;
  kiln::Tensor all = kiln::tensor(ids, {n}, kiln::DType::Int64);
  c.train = all.slice(0, 0, n_train).contiguous();
  c.val = all.slice(0, n_train, n).contiguous();
  return c;
}

// A batch of `batch` windows of `block` tokens at random offsets (kiln's seeded generator), and the same
// windows shifted by one as the targets.
inline std::pair<kiln::Tensor, kiln::Tensor> random_batch(const kiln::Tensor& data, int64_t batch, int64_t block) {
  kiln::Tensor starts = kiln::randint(0, data.numel() - block - 1, {batch});
  const int64_t* s = starts.data_ptr<int64_t>();
  const int64_t* d = data.data_ptr<int64_t>();
  std::vector<int64_t> x(size_t(batch * block)), y(size_t(batch * block));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < block; ++t) {
      x[size_t(b * block + t)] = d[s[b] + t];
      y[size_t(b * block + t)] = d[s[b] + t + 1];
    }
  return {kiln::tensor(x, {batch, block}, kiln::DType::Int64), kiln::tensor(y, {batch, block}, kiln::DType::Int64)};
}

}  // namespace samples
