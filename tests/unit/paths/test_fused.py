"""The hand-written training layer (san.paths.fused) against autograd, gradcheck and the eval-mode module."""

from __future__ import annotations

import pytest
import torch

from san.core.attention import softmax_last
from san.paths import fused
from san.paths.fused import SANLayerFunction, linear
from san.paths.model import SAN, DropoutMasks, SANConfig

torch.set_num_threads(1)

TOKENS = SANConfig("tokens", 3, 2, 12, 5, vocab_size=9, max_len=7, dropout=0.2)
POINTS = SANConfig("points", 3, 3, 12, 2, point_mlp=True, dropout=0.2)


SEEDS = pytest.mark.parametrize("seeds", [[0], [0, 4]], ids=["one_seed", "two_seeds"])


def _inputs(cfg: SANConfig, dtype: torch.dtype, n_seeds: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    if cfg.input_kind == "tokens":
        x = torch.randint(0, cfg.vocab_size, (n_seeds, 4, 7), generator=gen)
    else:
        x = torch.randn(n_seeds, 4, 7, 2, generator=gen, dtype=dtype)
    mask = torch.ones(n_seeds, 4, 7, dtype=torch.bool)
    mask[:, 1, 5:] = False
    mask[-1, 3, 2:] = False
    return x, mask


def _forward_backward(model: SAN, fused_: bool, x: torch.Tensor, mask: torch.Tensor | None):
    model.train()
    model.fused = fused_
    for m, seed in zip(model.masks, model.seeds, strict=True):
        m.seed(seed + 7)
    model.zero_grad(set_to_none=True)
    out = model(x, mask)
    weights = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)
    (out * weights).sum().backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@SEEDS
@pytest.mark.parametrize("cfg", [TOKENS, POINTS], ids=["tokens", "points"])
@pytest.mark.parametrize("masked", [False, True], ids=["no_mask", "padding"])
def test_fused_training_step_equals_autograd_with_the_same_dropout(cfg, masked, seeds):
    model = SAN(cfg, seeds).double()
    x, mask = _inputs(cfg, torch.float64, len(seeds))
    m = mask if masked else None
    out_a, grads_a = _forward_backward(model, False, x, m)
    out_f, grads_f = _forward_backward(model, True, x, m)
    torch.testing.assert_close(out_f, out_a, rtol=1e-12, atol=1e-12)
    assert grads_f.keys() == grads_a.keys()
    for name in grads_a:
        torch.testing.assert_close(grads_f[name], grads_a[name], rtol=1e-10, atol=1e-12, msg=name)
    # dropout is really on: a different mask seed changes the output
    model.masks[0].seed(100)
    assert not torch.allclose(model(x, m), out_f)


@pytest.mark.slow
@SEEDS
def test_fused_layer_passes_gradcheck_with_dropout_and_padding(seeds):
    gen = torch.Generator().manual_seed(0)
    s, b, n, d, h = len(seeds), 2, 4, 6, 2

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(s, *shape, generator=gen, dtype=torch.float64).requires_grad_()

    args = (rand(b, n, d), rand(3 * d, d), rand(3 * d), rand(d, d), rand(d), rand(d), rand(d))
    masks = DropoutMasks(3)
    like = torch.zeros((), dtype=torch.float64)
    keep_p = masks.mask(torch.Size((s, b * h, n, n)), 0.3, like)
    keep_o = masks.mask(torch.Size((s, b * n, d)), 0.3, like)
    key_mask = torch.tensor([[True, True, True, True], [True, True, False, False]]).expand(s, b, n)
    assert torch.autograd.gradcheck(
        lambda *a: SANLayerFunction.apply(*a, keep_p, keep_o, key_mask, h, 1e-5), args, eps=1e-6, atol=1e-7
    )
    assert torch.autograd.gradcheck(lambda *a: SANLayerFunction.apply(*a, None, None, None, h, 1e-5), args)


@SEEDS
def test_fused_layer_without_dropout_equals_the_eval_module(seeds):
    cfg = SANConfig("tokens", 2, 3, 12, 4, vocab_size=9, max_len=7, dropout=0.0)
    model = SAN(cfg, seeds).double()
    x, mask = _inputs(cfg, torch.float64, len(seeds))
    model.train()
    train_out = model(x, mask)
    model.eval()
    torch.testing.assert_close(train_out, model(x, mask))


def test_one_seed_of_a_stack_computes_what_it_computes_alone():
    """The batched products of several seeds round like the lone seed's 2-D products up to float32 rounding; in eval
    mode every seed computes exactly what its network alone computes."""
    model = SAN(TOKENS, [0, 4])
    x, mask = _inputs(TOKENS, torch.float32, 2)
    model.eval()
    out = model(x, mask)
    for i in range(2):
        assert torch.equal(model.member(i)(x[i : i + 1], mask[i : i + 1])[0], out[i])
    model.train()
    for m, seed in zip(model.masks, model.seeds, strict=True):
        m.seed(seed)
    out = model(x, mask)
    for i in range(2):
        alone = model.member(i).train()
        torch.testing.assert_close(alone(x[i : i + 1], mask[i : i + 1])[0], out[i], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("onednn", [False, True])
def test_linear_is_an_exact_float32_product_and_sees_weight_updates(onednn, monkeypatch):
    if onednn and fused._ONEDNN_LINEAR is None:
        pytest.skip("this PyTorch build has no oneDNN linear")
    monkeypatch.setattr(fused, "USE_ONEDNN", onednn)  # test both backends whatever this CPU would pick
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(50, 24, generator=gen)
    w = torch.randn(36, 24, generator=gen)
    b = torch.randn(36, generator=gen)
    for _ in range(2):  # a primitive cached on the first call must read the updated weights
        ref = x.double() @ w.double().t() + b.double()
        torch.testing.assert_close(linear(x, w, b).double(), ref, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(linear(x.t().contiguous().t(), w), x @ w.t(), rtol=1e-5, atol=1e-4)
        w.mul_(-1.5).add_(0.25)
    g = torch.randn(50, 36, generator=gen)
    torch.testing.assert_close(linear(g.t(), x.t()), g.t() @ x, rtol=1e-5, atol=1e-4)  # weight gradient layout
    xd, wd = x.double(), w.double()
    assert torch.equal(linear(xd, wd, b.double()), torch.addmm(b.double(), xd, wd.t()))  # non-float32: addmm


def test_linear_falls_back_without_onednn(monkeypatch):
    monkeypatch.setattr(fused, "USE_ONEDNN", False)
    x, w, b = torch.randn(5, 4), torch.randn(3, 4), torch.randn(3)
    assert torch.equal(linear(x, w, b), torch.addmm(b, x, w.t()))
    assert torch.equal(linear(x, w), x @ w.t())


def test_short_row_softmax_is_the_softmax_and_handles_masked_keys():
    s = torch.randn(3, 5, 6, dtype=torch.float64) * 30
    s[0, :, 4:] = float("-inf")
    torch.testing.assert_close(softmax_last(s.clone()), torch.softmax(s, -1))


def test_dropout_masks_are_consecutive_slices_of_a_reproducible_pool():
    like = torch.zeros(())
    small = DropoutMasks(5, pool_size=1000)
    masks = [small.mask(torch.Size((30, 7)), 0.1, like) for _ in range(12)]  # refills several times
    big = small.mask(torch.Size((50, 50)), 0.1, like)  # larger than the pool
    again = DropoutMasks(5, pool_size=1000)
    assert all(torch.equal(m, again.mask(torch.Size((30, 7)), 0.1, like)) for m in masks)
    assert torch.equal(big, again.mask(torch.Size((50, 50)), 0.1, like))
    assert not torch.equal(masks[0], masks[1])
    half = small.mask(torch.Size((10,)), 0.5, like)  # another rate: a fresh pool, not the 0.1 one
    assert set(torch.unique(half).tolist()) <= {0.0, 2.0}
    f64 = small.mask(torch.Size((4,)), 0.1, torch.zeros((), dtype=torch.float64))
    assert f64.dtype == torch.float64
