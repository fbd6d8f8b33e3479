import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.pe[: x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Transformer):
    """PyTorch's word_language_model TransformerModel as its model.py writes it: a subclass of nn.Transformer
    whose decoder is replaced by the output projection, the encoder called with a causal mask (made by the
    inherited static generate_square_subsequent_mask rather than cached on self), positions up to 64."""

    def __init__(self, ntoken: int, ninp: int, nhead: int, nhid: int, nlayers: int, dropout: float = 0.5):
        super(TransformerModel, self).__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers)
        self.model_type = "Transformer"
        self.pos_encoder = PositionalEncoding(ninp, dropout, max_len=64)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src: Tensor, has_mask: bool = True) -> Tensor:
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        if has_mask:
            output = self.encoder(src, mask=self.generate_square_subsequent_mask(len(src)))
        else:
            output = self.encoder(src)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


class CallableActivations(nn.Module):
    """Encoder layers given activation as a callable (F.gelu, nn.GELU(), F.relu), masked by the class's static
    generate_square_subsequent_mask."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.fn = nn.TransformerEncoderLayer(d, heads, 16, 0.0, activation=F.gelu)
        self.mod = nn.TransformerEncoderLayer(d, heads, 16, 0.0, activation=nn.GELU(), batch_first=True)
        self.relu = nn.TransformerEncoderLayer(d, heads, 16, 0.0, activation=F.relu, norm_first=True)

    def forward(self, x: Tensor):
        mask = nn.Transformer.generate_square_subsequent_mask(x.size(0))
        a = self.fn(x, src_mask=mask)
        b = self.mod(x.transpose(0, 1))
        c = self.relu(a, mask)
        return a, b, c
