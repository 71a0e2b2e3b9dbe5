"""Theorem 2.2 check: the bound, the res minimiser, one pure-SAN layer and the exponent, against independent values."""

import itertools

import numpy as np
import pytest

from san.theory import bound as B
from san.theory.experiment import san_layer
from san.theory.residual import min_residual

from helpers import default_config, tiny_theory_sweep

THRESHOLDS = default_config()["report"]["theorem"]  # the config's report.theorem thresholds


def test_bound_one_layer_by_hand():
    # W_Q W_K^T = [[1, 2], [0, -1]]: ||.||_1 = max column abs sum = 3; W_V W_O = [[2, 0], [1, 1]]:
    # ||.||_1 = 3, ||.||_inf = 2, ||.||_{1,inf} = sqrt(6); beta = 3 sqrt(6); d_qk = 4, r = 0.5:
    # bound = 4 * beta / 2 * 0.125 = 0.75 sqrt(6)
    beta = 3 * np.sqrt(6)
    assert np.isclose(10 ** B.log10_step_bound(0.5, beta, 4), 0.75 * np.sqrt(6))
    # closed form over 2 layers equals the recursion applied twice: c^(1+3) r0^9
    c = 4 * beta / 2
    assert np.isclose(10 ** B.log10_closed_bound(0.5, np.array([beta, beta]), 4)[-1], c**4 * 0.5**9)
    assert np.isclose(10 ** B.log10_step_bound(0.5, beta, 4, heads=3), 3 * 0.75 * np.sqrt(6))


@pytest.mark.slow
def test_residual_against_brute_force():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 2))
    grid = np.linspace(-3, 3, 241)
    for m in x:
        best = min(
            np.sqrt(np.abs(m - c).sum(0).max() * np.abs(m - c).sum(1).max()) for c in itertools.product(grid, grid)
        )
        res = min_residual(m, iterations=200)
        assert res.lower <= best + 1e-9  # certified lower bound
        assert res.upper <= best * 1.05  # attained value close to the optimum
        x_hat = res.x
        attained = np.sqrt(np.abs(m - x_hat).sum(0).max() * np.abs(m - x_hat).sum(1).max())
        assert np.isclose(attained, res.upper)


def test_san_layer_explicit():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 4))
    wq, wk, wv, wo = (rng.normal(size=s) for s in [(2, 4, 2), (2, 4, 2), (2, 4, 2), (2, 2, 4)])
    expected = np.zeros((3, 4))
    for h in range(2):
        logits = (x @ wq[h]) @ (x @ wk[h]).T / np.sqrt(2)
        p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        expected += p @ x @ wv[h] @ wo[h]
    assert np.allclose(san_layer(x, wq, wk, wv, wo), expected)


def test_exponent_doubly_exponential():
    r = 0.5 ** (3.0 ** np.arange(5))
    assert np.allclose(B.exponent(r), 3.0)


def test_certified_bound_holds_one_layer():
    from san.theory.experiment import base_distribution_max, head_norms

    rng = np.random.default_rng(2)
    for scale in (0.05, 0.3, 1.0):
        x = rng.normal(size=(6, 8))
        w = [rng.normal(size=s) * scale for s in [(1, 8, 4), (1, 8, 4), (1, 8, 4), (1, 4, 8)]]
        res = min_residual(x, iterations=100)
        nrm = head_norms(*w)
        q = base_distribution_max(x, res.x, w[0], w[1])
        cert = B.log10_certified_step(res.norm_1, res.norm_inf, nrm["qk_1"][0], nrm["v_1"][0], nrm["v_inf"][0], q, 6, 4)
        assert min_residual(san_layer(x, *w), iterations=100).lower <= 10**cert


@pytest.mark.slow
def test_certified_bound_sits_at_the_layer_it_bounds():
    """Layer 1's certified bound is finite and equals the one-layer step computed from the input (layer 0)."""
    from san.theory.experiment import base_distribution_max, draw_weights, scaled_weights

    ds = tiny_theory_sweep()
    cert = ds["log10_bound_certified"].sel(layernorm=0)
    assert np.isfinite(cert.sel(layer=1)).all()
    assert np.isnan(cert.sel(layer=0)).all()
    # recompute layer 1 of one cell independently of the sweep's bookkeeping
    from helpers import tiny_config

    cfg = tiny_config()["theory"]
    cell = ds.sel(input="gaussian", layernorm=0).isel(d_qk=0, scale=0, sample=0)
    d_qk = int(cell["d_qk"])
    from san.theory.experiment import gaussian_inputs

    x = gaussian_inputs(cfg["seed"], cfg["n_sequences"], cfg["tokens"], cfg["gaussian_width"])[0]
    raw = draw_weights(
        np.random.default_rng(np.random.SeedSequence([cfg["seed"], d_qk, 0])),
        cfg["layers"],
        cfg["heads"],
        x.shape[-1],
        d_qk,
    )
    r0_all = min_residual(
        gaussian_inputs(cfg["seed"], cfg["n_sequences"], cfg["tokens"], cfg["gaussian_width"]),
        cfg["residual_iterations"],
    ).upper
    beta = float(cell["scale"]) * np.sqrt(d_qk) / (4 * cfg["heads"] * float(np.median(r0_all)) ** 2)
    w, nrm = scaled_weights(raw, beta)
    res = min_residual(x, cfg["residual_iterations"])
    q = base_distribution_max(x, res.x, w[0][0], w[1][0])
    expected = B.log10_certified_step(
        res.norm_1, res.norm_inf, nrm["qk_1"][0], nrm["v_1"][0], nrm["v_inf"][0], q, x.shape[0], d_qk
    )
    assert np.isclose(float(cell["log10_bound_certified"].sel(layer=1)), float(expected))


@pytest.mark.slow
def test_certified_claim_fails_when_layer_one_exceeds_its_bound():
    from san.theory.claims import theorem_claims

    ds = tiny_theory_sweep()
    assert theorem_claims(ds, THRESHOLDS)["certified_holds_no_ln"] is True
    broken = ds.copy(deep=True)
    target = {"input": "gaussian", "layernorm": 0, "sample": 0, "layer": 1}
    cert = float(broken["log10_bound_certified"].sel(target).isel(d_qk=0, scale=0))
    lower = broken["residual_lower"].loc[target]
    lower[0, 0] = 10 ** (cert + 1)  # residual ten times its certified bound at layer 1
    broken["residual_lower"].loc[target] = lower
    out = theorem_claims(broken, THRESHOLDS)
    assert out["certified_holds_no_ln"] is False
    assert out["certified_margin_min_no_ln"] < 0


def test_certified_claim_fails_when_a_bound_is_missing():
    from san.theory.claims import theorem_claims

    ds = tiny_theory_sweep()
    broken = ds.copy(deep=True)
    broken["log10_bound_certified"].loc[{"layer": 1}] = np.nan
    out = theorem_claims(broken, THRESHOLDS)
    assert out["certified_missing_no_ln"] > 0
    assert out["certified_holds_no_ln"] is False
