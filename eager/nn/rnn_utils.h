#pragma once
// torch.nn.utils.rnn: a batch of sequences of different lengths for the recurrent layers. A PackedSequence
// holds, step by step, the elements of the sequences still running at that step, longest sequence first;
// nn::LSTM / GRU / RNN take one (RNNBase::forward_with_state) and give one back. Packing and unpacking are
// an index_select and an index_add over the padded steps, so gradients reach the padded input.
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace kiln::nn::utils::rnn {

struct PackedSequence {
  Tensor data;              // [sum(lengths), *]: step 0 of every sequence, then step 1 of those longer than 1, ...
  Tensor batch_sizes;       // int64 [max length] on the CPU: how many sequences run at each step
  Tensor sorted_indices;    // int64 [N]: the input batch row of each packed row; undefined when it was sorted
  Tensor unsorted_indices;  // int64 [N]: its inverse; undefined when sorted_indices is
};

// input [T, N, *] ([N, T, *] batch_first), lengths [N] (an integer tensor or list). enforce_sorted: the
// lengths must be decreasing; otherwise they are sorted (stably) and the order kept in sorted_indices.
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);

// The padded batch [T, N, *] ([N, T, *] batch_first) in the original batch order, T the longest length or
// total_length, padding_value past each sequence's end; and the lengths (int64 [N], CPU).
std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false,
                                              double padding_value = 0.0, std::optional<int64_t> total_length = std::nullopt);

// Sequences [L_i, *] stacked into [max L, N, *] ([N, max L, *] batch_first), padding_value after each.
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0.0);

// pack_padded_sequence of pad_sequence(sequences) with their lengths.
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);

// For the recurrent layers: the packed data as padded steps [T, N, *] in packed (sorted) order, zeros past
// each length, and those lengths (int64 [N], decreasing); and back.
std::pair<Tensor, Tensor> padded_in_packed_order(const PackedSequence& sequence);
Tensor packed_data_of(const Tensor& padded, const Tensor& batch_sizes);

}  // namespace kiln::nn::utils::rnn
