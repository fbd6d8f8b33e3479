"""A word-level language model as PyTorch's word_language_model example writes it (Embedding, a 2-layer
batch_first LSTM with a given state, a Linear decoder), returning the logits and the final state."""
import torch
import torch.nn as nn
from torch import Tensor
from typing import Tuple


class WordLM(nn.Module):
    def __init__(self, vocab: int, emsize: int, nhid: int):
        super().__init__()
        self.encoder = nn.Embedding(vocab, emsize)
        self.rnn = nn.LSTM(emsize, nhid, num_layers=2, batch_first=True)
        self.decoder = nn.Linear(nhid, vocab)

    def forward(self, tokens: Tensor, h0: Tensor, c0: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        emb = self.encoder(tokens)
        output, (h, c) = self.rnn(emb, (h0, c0))
        decoded = self.decoder(output)
        return decoded.flatten(0, 1), h, c
