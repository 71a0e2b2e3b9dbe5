"""Products of attention matrices along sampled paths (the paper's appendix figure)."""

import numpy as np
import torch

from san.measures.residual import rank1_relative_residual
from san.rank_collapse.attention_products import attention_product_residuals, attention_products, sample_attention_paths


def test_sample_paths_sorted_distinct_layers_and_valid_heads():
    rng = np.random.default_rng(0)
    layers, heads, seqs = sample_attention_paths(n_layers=6, n_heads=3, n_sequences=4, depth=4, n_paths=50, rng=rng)
    assert layers.shape == heads.shape == (50, 4) and seqs.shape == (50,)
    assert (np.diff(layers, axis=1) > 0).all() and layers.min() >= 0 and layers.max() < 6
    assert heads.min() >= 0 and heads.max() < 3 and seqs.max() < 4
    assert len({tuple(r) for r in layers}) > 5  # really random


def test_attention_products_multiply_later_layers_on_the_left():
    torch.manual_seed(0)
    attn = torch.softmax(torch.randn(3, 2, 2, 5, 5, dtype=torch.float64), dim=-1)  # (layers, seqs, heads, n, n)
    layers, heads, seqs = np.array([[0, 2], [1, 2]]), np.array([[1, 0], [0, 1]]), np.array([1, 0])
    prod = attention_products(attn, layers, heads, seqs)
    torch.testing.assert_close(prod[0], attn[2, 1, 0] @ attn[0, 1, 1])
    torch.testing.assert_close(prod[1], attn[2, 0, 1] @ attn[1, 0, 0])
    assert torch.allclose(prod.sum(-1), torch.ones(2, 5, dtype=torch.float64))  # still row-stochastic


def test_residual_shrinks_with_depth_and_is_seeded():
    torch.manual_seed(1)
    attn = torch.softmax(torch.randn(6, 3, 2, 8, 8, dtype=torch.float64), dim=-1)
    a = attention_product_residuals(attn, n_paths=20, seed=0)
    b = attention_product_residuals(attn, n_paths=20, seed=0)
    assert a["rank1"].shape == (6, 20)
    np.testing.assert_array_equal(a["rank1"], b["rank1"])
    med = np.median(a["rank1"], axis=1)
    assert med[-1] < 1e-2 * med[0] and (np.diff(med) < 0).all()
    one = attention_products(attn, np.array([[2]]), np.array([[1]]), np.array([0]))
    assert rank1_relative_residual(one).item() > 0.05
