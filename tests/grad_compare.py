"""Gradient bookkeeping shared by the tests that compare two ways of computing the same gradients (GradCache against
the direct loss, several ranks against one process)."""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn


def zero_grads(params: list[nn.Parameter]) -> None:
    for p in params:
        p.grad = None


def grads(named: Iterator[tuple[str, nn.Parameter]]) -> dict[str, torch.Tensor]:
    out = {}
    for name, p in named:
        assert p.grad is not None, f"{name} received no gradient"
        out[name] = p.grad.detach().clone()
    return out


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)
