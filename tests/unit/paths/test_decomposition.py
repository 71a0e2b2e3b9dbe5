"""Exact path-length decomposition (san.paths.decomposition) against brute-force enumeration of every path."""

from __future__ import annotations

import copy
import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import san.paths.decomposition as decomposition
from san.paths.evaluate import model_accuracy
from san.paths.model import SAN, SANConfig
from san.paths.spec import IGNORE

TOL = 1e-12


def _random_san(cfg: SANConfig, seed: int) -> SAN:
    """A float64 SAN with every parameter random (nonzero biases, LayerNorm scales and shifts), in eval mode."""
    gen = torch.Generator().manual_seed(seed)
    model = SAN(cfg, [seed]).double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=p.dtype)
            p.copy_(noise * 0.5 + (1.0 if name.endswith("norm.weight") else 0.0))
    return model


def _one(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t[None]


def _forward(model: SAN, inputs: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The one-seed network's logits on its inputs."""
    return model(inputs[None], _one(mask))[0]


def _tokens_case() -> tuple[SAN, torch.Tensor, torch.Tensor, torch.Tensor]:
    cfg = SANConfig("tokens", n_layers=3, n_heads=2, dim=8, n_classes=3, vocab_size=7, max_len=5, dropout=0.0)
    model = _random_san(cfg, 0)
    gen = torch.Generator().manual_seed(1)
    inputs = torch.randint(0, 7, (4, 5), generator=gen)
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[1, 3:] = False
    mask[3, 4] = False
    labels = torch.randint(0, 3, (4, 5), generator=gen)
    labels[~mask] = IGNORE
    labels[0, 0] = IGNORE
    return model, inputs, labels, mask


def _points_case() -> tuple[SAN, torch.Tensor, torch.Tensor, None]:
    cfg = SANConfig("points", n_layers=2, n_heads=3, dim=6, n_classes=2, point_mlp=True, dropout=0.0)
    model = _random_san(cfg, 2)
    gen = torch.Generator().manual_seed(3)
    inputs = torch.randn(3, 4, 2, generator=gen, dtype=torch.float64)
    labels = torch.randint(0, 2, (3, 4), generator=gen)
    return model, inputs, labels, None


CASES = {"tokens": _tokens_case, "points": _points_case}


def _brute_force(model: SAN, inputs: torch.Tensor, mask: torch.Tensor | None):
    """Every one of the (H+1)^L paths with attention and LayerNorm scales frozen at the model's own pass, summed by
    length; the constant part as the frozen affine network applied to a zero input; and the model's final state."""
    L, H, d = model.cfg.n_layers, model.cfg.n_heads, model.cfg.dim
    dh = d // H
    x0 = x = model.embed(inputs[None])[0]
    layers = []
    for layer in model.layers:
        a = layer.attn
        wq, wk, wv = a.qkv.weight[0].view(3, H, dh, d)
        bq, bk, bv = a.qkv.bias[0].view(3, H, dh)
        wo = [a.out.weight[0, :, h * dh : (h + 1) * dh] for h in range(H)]
        norm = SimpleNamespace(weight=layer.norm.weight[0], bias=layer.norm.bias[0], eps=layer.norm.eps)
        probs = []
        for h in range(H):
            scores = (x @ wq[h].T + bq[h]) @ (x @ wk[h].T + bk[h]).transpose(-1, -2) / math.sqrt(dh)
            if mask is not None:
                scores = scores.masked_fill(~mask[:, None, :], -math.inf)
            probs.append(torch.softmax(scores, -1))
        heads = [(probs[h], wv[h], bv[h], wo[h]) for h in range(H)]
        z = x + sum(p @ (x @ v.T + b) @ o.T for p, v, b, o in heads) + a.out.bias[0]
        sigma = (z.var(-1, unbiased=False, keepdim=True) + norm.eps).sqrt()
        x_next = layer(x[None], _one(mask))[0]
        manual = norm.weight * (z - z.mean(-1, keepdim=True)) / sigma + norm.bias
        assert torch.allclose(manual, x_next, atol=TOL, rtol=0), "brute force: the manual layer is not the model's"
        layers.append((heads, sigma, norm, a.out.bias[0]))
        x = x_next

    def centre_scale(y, sigma, norm):
        return norm.weight * (y - y.mean(-1, keepdim=True)) / sigma

    parts = torch.zeros(L + 1, *x0.shape, dtype=x0.dtype)
    for path in itertools.product(range(-1, H), repeat=L):
        y = x0
        for h, (heads, sigma, norm, _) in zip(path, layers, strict=True):
            if h >= 0:
                p, v, _, o = heads[h]
                y = p @ y @ v.T @ o.T
            y = centre_scale(y, sigma, norm)
        parts[sum(h >= 0 for h in path)] += y
    c = torch.zeros_like(x0)
    for heads, sigma, norm, b_out in layers:
        c = centre_scale(c + sum(p @ (c @ v.T + b) @ o.T for p, v, b, o in heads) + b_out, sigma, norm) + norm.bias
    return parts, c, x


@pytest.mark.parametrize("case", sorted(CASES))
def test_dp_matches_enumeration_of_every_path(case: str) -> None:
    model, inputs, _, mask = CASES[case]()
    with torch.no_grad():
        parts, constant, output = _brute_force(model, inputs, mask)
        dec = decomposition.decompose(model, inputs, mask)
    assert dec.parts.shape == parts.shape == (model.cfg.n_layers + 1, *inputs.shape[:2], model.cfg.dim)
    assert (parts.abs().amax(dim=(1, 2, 3)) > 1e-3).all(), "every length must contribute for the test to bite"
    assert constant.abs().max() > 1e-3
    torch.testing.assert_close(dec.parts, parts, atol=TOL, rtol=0)
    torch.testing.assert_close(dec.constant, constant, atol=TOL, rtol=0)
    # the brute force itself reconstructs the model
    torch.testing.assert_close(parts.sum(0) + constant, output, atol=TOL, rtol=0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_reconstruction_at_round_off(case: str) -> None:
    model, inputs, _, mask = CASES[case]()
    with torch.no_grad():
        x = model.embed(inputs[None])
        for layer in model.layers:
            x = layer(x, _one(mask))
        x = x[0]
        dec = decomposition.decompose(model, inputs, mask)
    assert float((dec.output - x).abs().max()) < TOL
    assert float((dec.reconstruction - x).abs().max()) < TOL


@pytest.mark.parametrize("case", sorted(CASES))
def test_truncated_at_full_length_is_the_model(case: str) -> None:
    model, inputs, _, mask = CASES[case]()
    L = model.cfg.n_layers
    with torch.no_grad():
        logits = _forward(model, inputs, mask)
        dec = decomposition.decompose(model, inputs, mask)
        truncated, single = decomposition.length_logits(model, dec)
        only_constant = model.classifier(dec.constant[None])[0]
    assert truncated.shape == single.shape == (L + 1, *logits.shape)
    torch.testing.assert_close(truncated[L], logits, atol=TOL, rtol=0)
    assert torch.equal(truncated[L].argmax(-1), logits.argmax(-1))
    torch.testing.assert_close(truncated[0], single[0], atol=0, rtol=0)
    # linearity: the single lengths add up to the model once the constant's extra copies are removed
    torch.testing.assert_close(single.sum(0) - L * only_constant, logits, atol=TOL, rtol=0)


def test_run_dataset() -> None:
    model, inputs, labels, mask = _tokens_case()
    model = model.float()  # stored models are float32: run works on a float64 copy
    init = decomposition.initial_model(model)
    ev = SimpleNamespace(inputs=inputs, labels=labels, mask=mask)
    ds = decomposition.run(model, [ev], init_model=init, chances=[0.25]).isel(seed=0)
    assert next(model.parameters()).dtype == torch.float32, "run must not change the model"
    model = copy.deepcopy(model).double()
    L = model.cfg.n_layers
    assert list(ds["state"].values) == ["trained", "init"]
    assert ds["norm_share"].dims == ("state", "path_length") and ds.sizes["path_length"] == L + 1
    assert ds["truncated_accuracy"].dims == ("state", "max_path_length")
    assert ds["norm_share_per_input"].dims == ("state", "sample", "path_length")
    assert (ds["reconstruction_error"] < TOL).all()
    np.testing.assert_allclose(ds["norm_share_per_input"].sum("path_length"), 1.0, atol=1e-12)
    np.testing.assert_allclose(ds["norm_share"].sum("path_length"), 1.0, atol=1e-12)
    # K = L is the model itself: its accuracy, counted independently, and full agreement
    expected = model_accuracy(model, inputs[None], labels[None], _one(mask))[0]
    assert float(ds["full_accuracy"].sel(state="trained")) == pytest.approx(expected, abs=1e-12)
    np.testing.assert_allclose(ds["truncated_accuracy"].isel(max_path_length=-1), ds["full_accuracy"], atol=1e-12)
    np.testing.assert_allclose(ds["truncated_agreement"].isel(max_path_length=-1), 1.0)
    np.testing.assert_allclose(ds["truncated_accuracy"].isel(max_path_length=0), ds["single_length_accuracy"][:, 0])
    # the initialisation has zero biases and shifts: no constant part
    assert float(ds["constant_norm_ratio"].sel(state="init")) == 0.0
    assert float(ds["constant_norm_ratio"].sel(state="trained")) > 0.0
    assert float(ds["chance_accuracy"]) == 0.25
    for name, var in {**ds.data_vars, **ds.coords}.items():
        assert "long_name" in var.attrs and "units" in var.attrs, name


def test_chunking_does_not_change_results(monkeypatch: pytest.MonkeyPatch) -> None:
    model, inputs, labels, mask = _tokens_case()
    whole = decomposition.summarise(model, inputs, labels, mask)
    monkeypatch.setattr(decomposition, "CHUNK_BYTES", 1)  # one input per chunk
    chunked = decomposition.summarise(model, inputs, labels, mask)
    np.testing.assert_allclose(chunked.norms, whole.norms, rtol=1e-12)
    np.testing.assert_array_equal(chunked.truncated_accuracy, whole.truncated_accuracy)
    np.testing.assert_array_equal(chunked.single_length_accuracy, whole.single_length_accuracy)


def test_initial_model_is_the_trainings_initialisation() -> None:
    cfg = SANConfig("tokens", n_layers=2, n_heads=2, dim=8, n_classes=3, vocab_size=7, max_len=5)
    trained = SAN(cfg, [3, 4])
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(1.0)
    torch.manual_seed(11)
    before = torch.random.get_rng_state()
    init = decomposition.initial_model(trained)
    assert torch.equal(torch.random.get_rng_state(), before), "the global RNG state must be left alone"
    expected = SAN(cfg, [3, 4])  # as the training builds it
    assert init.seeds == [3, 4] and not init.training
    for (name, a), b in zip(init.state_dict().items(), expected.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
