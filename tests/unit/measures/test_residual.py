"""The paper's token-uniformity measures (Sec. 2.2)."""

import numpy as np
import pytest
import torch

from san.measures.residual import mean_residual, norm_1inf, rank1_relative_residual, relative_residual


def test_norm_1inf_matches_definition():
    a = torch.randn(7, 5, dtype=torch.float64)
    an = a.numpy()
    expected = np.sqrt(np.abs(an).sum(axis=0).max() * np.abs(an).sum(axis=1).max())
    assert norm_1inf(a).item() == pytest.approx(expected, rel=1e-12)
    assert norm_1inf(a).item() == pytest.approx(np.sqrt(np.linalg.norm(an, 1) * np.linalg.norm(an, np.inf)))


def test_relative_residual_zero_for_rank_one_token_uniform_input():
    x = torch.ones(9, 1, dtype=torch.float64) @ torch.randn(1, 6, dtype=torch.float64)
    assert relative_residual(x).item() < 1e-15
    assert mean_residual(x).abs().max().item() < 1e-15


def test_relative_residual_positive_for_generic_input_and_batched():
    x = torch.randn(3, 9, 6, dtype=torch.float64)
    r = relative_residual(x)
    assert r.shape == (3,)
    assert (r > 0.1).all()
    assert torch.allclose(r[1], relative_residual(x[1]))


@pytest.mark.parametrize("scale", [1e-6, 0.3, 7.0, 1e5])
def test_relative_residual_scale_invariant(scale):
    x = torch.randn(11, 4, dtype=torch.float64)
    assert relative_residual(scale * x).item() == pytest.approx(relative_residual(x).item(), rel=1e-10)


def test_residual_uses_token_mean_and_ignores_shifts():
    x = torch.randn(8, 3, dtype=torch.float64)
    shift = torch.randn(1, 3, dtype=torch.float64)
    assert torch.allclose(mean_residual(x + shift), mean_residual(x))
    assert torch.allclose(mean_residual(x).mean(dim=0), torch.zeros(3, dtype=torch.float64), atol=1e-15)


def test_rank1_residual():
    u, v = torch.randn(6, 1, dtype=torch.float64), torch.randn(1, 6, dtype=torch.float64)
    assert rank1_relative_residual(u @ v).item() < 1e-14
    d = torch.diag(torch.tensor([3.0, 4.0], dtype=torch.float64))
    assert rank1_relative_residual(d).item() == pytest.approx(3.0 / 5.0)
    p = torch.softmax(torch.randn(4, 10, 10, dtype=torch.float64), dim=-1)
    r = rank1_relative_residual(p)
    assert r.shape == (4,) and ((r > 0) & (r < 1)).all()
