#include "eager/nn/rnn_utils.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "eager/ops.h"

namespace kiln::nn::utils::rnn {

namespace {

std::vector<int64_t> int_values(const char* fn, const char* what, const Tensor& t) {
  if (!t.defined()) fail("{}: {} is undefined", fn, what);
  if (t.is_floating_point() || t.dtype() == DType::Bool)
    fail("{}: expected {} of an integer dtype, got {}", fn, what, dtype_name(t.dtype()));
  if (t.dim() != 1) fail("{}: expected {} to be 1-D, got shape {}", fn, what, shape_str(t.sizes()));
  Tensor c = t.detach().cpu().to(DType::Int64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return {p, p + c.numel()};
}

// The rows of a padded [T*N, *] view that a packing keeps, step-major: t*N + n for each n < batch_sizes[t].
Tensor packed_rows(const std::vector<int64_t>& batch_sizes, int64_t N, Device device) {
  std::vector<int64_t> rows;
  for (size_t t = 0; t < batch_sizes.size(); ++t)
    for (int64_t n = 0; n < batch_sizes[t]; ++n) rows.push_back(int64_t(t) * N + n);
  return tensor(rows).to(device);
}

Shape with_lead(const Shape& rest, Shape lead) {
  lead.insert(lead.end(), rest.begin(), rest.end());
  return lead;
}

Shape tail_of(const Tensor& x, int64_t from) { return Shape(x.sizes().begin() + from, x.sizes().end()); }

// How many sequences are longer than t, for every step t of the longest (lengths decreasing).
std::vector<int64_t> batch_sizes_of(const std::vector<int64_t>& sorted_lengths) {
  std::vector<int64_t> bs(size_t(sorted_lengths.empty() ? 0 : sorted_lengths[0]), 0);
  for (int64_t l : sorted_lengths)
    for (int64_t t = 0; t < l; ++t) ++bs[size_t(t)];
  return bs;
}

}  // namespace

PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first,
                                    bool enforce_sorted) {
  const char* fn = "pack_padded_sequence";
  if (!input.defined() || input.dim() < 2)
    fail("{}: expected input of 2 or more dims ([T, N, *] or batch_first [N, T, *]), got {}", fn,
         input.defined() ? shape_str(input.sizes()) : std::string("an undefined tensor"));
  if (input.numel() == 0) fail("{}: cannot pack empty tensors", fn);
  Tensor x = batch_first ? input.transpose(0, 1) : input;  // [T, N, *]
  const int64_t T = x.size(0), N = x.size(1);
  if (int64_t(lengths.size()) != N)
    fail("{}: expected `len(lengths)` to be equal to batch_size, but got {} (batch_size={})", fn, lengths.size(), N);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] <= 0)
      fail("{}: length of all samples has to be greater than 0, but found an element in 'lengths' that is <= 0 "
           "(lengths[{}] = {})",
           fn, i, lengths[i]);
    if (lengths[i] > T)
      fail("{}: lengths[{}] = {} is greater than the input's {} steps{}", fn, i, lengths[i], T,
           batch_first ? " (dim 1, batch_first)" : " (dim 0)");
  }
  PackedSequence p;
  std::vector<int64_t> sorted = lengths;
  if (enforce_sorted) {
    for (size_t i = 1; i < lengths.size(); ++i)
      if (lengths[i] > lengths[i - 1])
        fail("{}: `lengths` array must be sorted in decreasing order when `enforce_sorted` is True, got lengths[{}] = "
             "{} after {} (pass enforce_sorted=False to pack unsorted lengths)",
             fn, i, lengths[i], lengths[i - 1]);
  } else {
    // stable, so equal lengths keep their batch order (torch's sort does for small batches)
    std::vector<int64_t> order(static_cast<size_t>(N));
    std::iota(order.begin(), order.end(), int64_t(0));
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[size_t(a)] > lengths[size_t(b)]; });
    std::vector<int64_t> inverse(static_cast<size_t>(N));
    for (int64_t i = 0; i < N; ++i) {
      sorted[size_t(i)] = lengths[size_t(order[size_t(i)])];
      inverse[size_t(order[size_t(i)])] = i;
    }
    p.sorted_indices = tensor(order);
    p.unsorted_indices = tensor(inverse);
    x = index_select(x, 1, p.sorted_indices.to(x.device()));
  }
  std::vector<int64_t> bs = batch_sizes_of(sorted);
  p.batch_sizes = tensor(bs);
  p.data = index_select(x.reshape(with_lead(tail_of(x, 2), {T * N})), 0, packed_rows(bs, N, x.device()));
  return p;
}

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first, bool enforce_sorted) {
  return pack_padded_sequence(input, int_values("pack_padded_sequence", "lengths", lengths), batch_first, enforce_sorted);
}

std::pair<Tensor, Tensor> padded_in_packed_order(const PackedSequence& s) {
  const char* fn = "pad_packed_sequence";
  std::vector<int64_t> bs = int_values(fn, "batch_sizes", s.batch_sizes);
  if (bs.empty() || !s.data.defined() || s.data.dim() < 1)
    fail("{}: expected a PackedSequence with data and at least one step", fn);
  const int64_t T = int64_t(bs.size()), N = bs[0];
  int64_t total = 0;
  for (size_t t = 0; t < bs.size(); ++t) {
    if (bs[t] <= 0 || bs[t] > N || (t && bs[t] > bs[t - 1]))
      fail("{}: batch_sizes must be positive and decreasing, got {} at step {}", fn, bs[t], t);
    total += bs[t];
  }
  if (s.data.size(0) != total)
    fail("{}: data has {} rows but batch_sizes add up to {}", fn, s.data.size(0), total);
  Shape rest = tail_of(s.data, 1);
  Tensor flat = index_add(zeros(with_lead(rest, {T * N}), TensorOptions(s.data.dtype(), s.data.device())), 0,
                          packed_rows(bs, N, s.data.device()), s.data);
  std::vector<int64_t> lengths(size_t(N), 0);
  for (int64_t b : bs)
    for (int64_t n = 0; n < b; ++n) ++lengths[size_t(n)];
  return {flat.reshape(with_lead(rest, {T, N})), tensor(lengths)};
}

Tensor packed_data_of(const Tensor& padded, const Tensor& batch_sizes) {
  std::vector<int64_t> bs = int_values("pack_padded_sequence", "batch_sizes", batch_sizes);
  const int64_t T = padded.size(0), N = padded.size(1);
  return index_select(padded.reshape(with_lead(tail_of(padded, 2), {T * N})), 0, packed_rows(bs, N, padded.device()));
}

std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first, double padding_value,
                                              std::optional<int64_t> total_length) {
  auto [padded, lengths] = padded_in_packed_order(sequence);
  const int64_t T = padded.size(0);
  if (total_length) {
    if (*total_length < T)
      fail("pad_packed_sequence: expected total_length to be at least the length of the longest sequence in input, "
           "but got total_length={} and max sequence length being {}",
           *total_length, T);
    if (*total_length > T) {
      Shape more = padded.sizes();
      more[0] = *total_length - T;
      padded = cat({padded, zeros(more, TensorOptions(padded.dtype(), padded.device()))}, 0);
    }
  }
  if (padding_value != 0.0) {  // the steps past each length, as a constant mask (index_add left them zero)
    const int64_t steps = padded.size(0), N = padded.size(1);
    const int64_t* len = lengths.data_ptr<int64_t>();
    std::vector<double> pad(size_t(steps * N), 0.0);
    for (int64_t t = 0; t < steps; ++t)
      for (int64_t n = 0; n < N; ++n) pad[size_t(t * N + n)] = t < len[n] ? 0.0 : 1.0;
    Shape ms{steps, N};
    ms.resize(size_t(padded.dim()), 1);
    Tensor mask = (tensor(pad, ms) > 0.5).to(padded.device());
    padded = masked_fill(padded, mask, Scalar(padding_value));
  }
  if (sequence.unsorted_indices.defined()) {
    padded = index_select(padded, 1, sequence.unsorted_indices.to(padded.device()));
    lengths = index_select(lengths, 0, sequence.unsorted_indices.cpu());
  }
  if (batch_first) padded = padded.transpose(0, 1);
  return {padded, lengths};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  if (sequences.empty()) fail("pad_sequence: received an empty list of sequences");
  int64_t longest = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor& s = sequences[i];
    if (!s.defined() || s.dim() < 1) fail("pad_sequence: sequences[{}] must have at least 1 dim", i);
    if (tail_of(s, 1) != tail_of(sequences[0], 1))
      fail("pad_sequence: sequences[{}] has shape {} but sequences[0] has {}: the dims after the first must match", i,
           shape_str(s.sizes()), shape_str(sequences[0].sizes()));
    longest = std::max(longest, s.size(0));
  }
  Tensors rows;
  for (const Tensor& s : sequences) {
    Tensor r = s;
    if (s.size(0) < longest) {
      Shape more = s.sizes();
      more[0] = longest - s.size(0);
      r = cat({s, full(more, Scalar(padding_value), TensorOptions(s.dtype(), s.device()))}, 0);
    }
    rows.push_back(r);
  }
  return stack(rows, batch_first ? 0 : 1);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  std::vector<int64_t> lengths;
  for (const Tensor& s : sequences) lengths.push_back(s.defined() && s.dim() >= 1 ? s.size(0) : 0);
  return pack_padded_sequence(pad_sequence(sequences), lengths, false, enforce_sorted);
}

}  // namespace kiln::nn::utils::rnn
