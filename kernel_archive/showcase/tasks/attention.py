"""Level 1: scaled dot-product attention (no mask, no dropout) over a batch of heads."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """F.scaled_dot_product_attention(q, k, v) with the default scale 1/sqrt(head_dim)."""

    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)


batch_size = 4
num_heads = 8
seq_len = 1024
head_dim = 64


def get_inputs():
    q = torch.randn(batch_size, num_heads, seq_len, head_dim)
    k = torch.randn(batch_size, num_heads, seq_len, head_dim)
    v = torch.randn(batch_size, num_heads, seq_len, head_dim)
    return [q, k, v]


def get_init_inputs():
    return []
