"""Level 1: a batch of independent matrix multiplications C[b] = A[b] @ B[b] in fp32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """C = torch.bmm(A, B) for A of shape (batch, M, K) and B of shape (batch, K, N)."""

    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


batch_size = 32
M = 512
K = 512
N = 512


def get_inputs():
    A = torch.randn(batch_size, M, K)
    B = torch.randn(batch_size, K, N)
    return [A, B]


def get_init_inputs():
    return []
