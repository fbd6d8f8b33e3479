"""torch.nn.utils.rnn in functions: a PackedSequence's data and batch_sizes (sorted by length as torch packs the
batch, or kept in order with enforce_sorted), its sorted_indices and unsorted_indices (None with enforce_sorted),
pad_sequence (batch_first, padding_value) and pack_sequence. An LSTM's
packed output read through .data, with gradients: tests/test_rnn_packed.cpp."""
import torch
import torch.nn as nn
from torch import Tensor
from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_sequence
from typing import Optional, Tuple


def fields(x: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor]:
    p = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    return p.data, p.batch_sizes


def sorted_fields(x: Tensor, lengths: Tensor) -> Tuple[Tensor, Tensor]:
    ordered, _ = torch.sort(lengths, descending=True)
    p = pack_padded_sequence(x, ordered)
    return p.data * 2.0, p.batch_sizes


def indices(x: Tensor, lengths: Tensor) -> Tuple[Optional[Tensor], Optional[Tensor], Optional[Tensor], Optional[Tensor]]:
    p = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    ordered, _ = torch.sort(lengths, descending=True)
    q = pack_padded_sequence(x, ordered, batch_first=True)
    return p.sorted_indices, p.unsorted_indices, q.sorted_indices, q.unsorted_indices


def reorder(x: Tensor, lengths: Tensor) -> Tensor:
    p = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    s = p.sorted_indices
    u = p.unsorted_indices
    assert s is not None and u is not None
    return x.index_select(0, s).index_select(0, u) + s.float().sum() * 0.5 + u[0]


def pads(a: Tensor, b: Tensor, c: Tensor) -> Tuple[Tensor, Tensor]:
    return pad_sequence([a, b, c]), nn.utils.rnn.pad_sequence([a, b, c], batch_first=True, padding_value=-1.5)


def packs(a: Tensor, b: Tensor, c: Tensor) -> Tuple[Tensor, Tensor, Optional[Tensor], Optional[Tensor]]:
    p = pack_sequence([a, b, c], enforce_sorted=False)
    return p.data, p.batch_sizes, p.sorted_indices, p.unsorted_indices


# CASE: fields randn(3,5,2) randint(1,6,3)
# CASE: fields randn(4,3,2,2) randint(1,4,4)
# CASE: sorted_fields randn(5,4,2) randint(1,4,4)
# CASE: indices randn(5,4,2) randint(1,3,5)
# CASE: indices randn(6,3) randint(1,4,6)
# CASE: reorder randn(4,3,2) randint(1,4,4)
# CASE: pads randn(3,2) randn(5,2) randn(1,2)
# CASE: packs randn(3,2) randn(5,2) randn(1,2)
