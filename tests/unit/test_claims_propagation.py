"""Propagation claims (Noci et al.; Giorlandino & Goldt; Wu et al.; Nait Saada et al.): each verdict on small
hand-made sweep results, once passing and once failing, with the config's thresholds."""

import json

import numpy as np
import pytest
import xarray as xr

from san.propagation.claims import claims, predicted_critical_beta
from san.propagation.spec import INV_SQRT_DEPTH

from helpers import default_config

T = default_config()["report"]["propagation"]
LAYERS = 11


def _depth(inv_last: float, sub_gap: float, t_drop: float, seeds: int = 4) -> xr.Dataset:
    """Depth sweep: input cosine 0.2 (beta_c = 1.58, so beta 0.5 is subcritical and 4.0 supercritical); the gap to
    the recursion is ``sub_gap`` below critical and, above, ``0.05 + t_drop`` at the short T (0.05 at the long one),
    with a seed spread of 0.01 on the short-T gap."""
    dims = ("residual", "norm", "beta", "width", "seq_len", "layer", "seed")
    shape = (2, 1, 2, 2, 2, LAYERS, seeds)
    theory = np.full(shape[:-1], 0.5)
    theory[..., 0] = 0.2
    gap = np.zeros(shape)
    gap[:, :, 0, ..., 1:, :] = sub_gap
    gap[:, :, 1, ..., 1:, :] = 0.05
    gap[:, :, 1, :, 0, 1:, :] += t_drop
    gap[:, :, 1, :, 0, 1:, :] += 0.01 * (-1.0) ** np.arange(seeds)  # seed spread of the short-T gap
    cosine = theory[..., None] + gap
    cosine[0, ..., -1, :] = inv_last  # residual inv_sqrt_depth: last-layer cosine
    coords = {"residual": ["inv_sqrt_depth", "skip"], "norm": ["post_ln"], "beta": [0.5, 4.0], "width": [8, 64]}
    coords.update(seq_len=[8, 64], layer=np.arange(LAYERS), seed=np.arange(seeds))
    return xr.Dataset({"cosine": (dims, cosine), "theory_cosine": (dims[:-1], theory)}, coords=coords)


def _by_paper(cs: list[dict]) -> dict[str, bool | None]:
    return {c["paper"]: c["holds"] for c in cs}


def test_depth_claims_pass_and_fail():
    good = _by_paper(claims({"depth": _depth(0.5, 0.01, 0.2)}, T)["depth"])
    assert good == {
        "Noci et al. 2022": True,
        "Giorlandino & Goldt 2026": True,
        "Giorlandino & Goldt 2026 (finite-size)": True,
    }
    bad = _by_paper(claims({"depth": _depth(0.95, 0.2, -0.04)}, T)["depth"])
    assert not any(bad.values())


def test_finite_size_needs_a_seed_spread():
    one = _by_paper(claims({"depth": _depth(0.5, 0.01, 0.2, seeds=1)}, T)["depth"])
    assert one["Giorlandino & Goldt 2026 (finite-size)"] is None
    # a T effect within the seed spread does not count
    noisy = _depth(0.5, 0.01, 0.001)
    out = _by_paper(claims({"depth": noisy}, T)["depth"])
    assert out["Giorlandino & Goldt 2026 (finite-size)"] is False
    assert _by_paper(claims({"depth": noisy}, {**T, "finite_size_sigmas": 0.0})["depth"])[
        "Giorlandino & Goldt 2026 (finite-size)"
    ]


def _qk(shift: float) -> xr.Dataset:
    """qk_variance sweep whose participation follows the REM law Y = 1 - beta_c / beta around beta_c * shift."""
    beta = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    ds = xr.Dataset({"cosine": (("beta", "layer", "seed"), np.full((6, 4, 1), 0.2))}, coords={"beta": beta})
    ds.attrs.update(
        fixed=json.dumps({"residual": "skip", "var_v": 1.0, "var_b": 0.0, "var_w": 2.0, "mlp": True}),
        residuals=json.dumps({"skip": {"skip": 1.0, "branch": 1.0}}),
        inv_sqrt_depth=INV_SQRT_DEPTH,
    )
    bc = predicted_critical_beta(ds) * shift
    y = np.clip(1 - bc / beta, 0, None)
    ds["attention_overlap"] = (("beta", "layer", "seed"), np.repeat(y[:, None, None], 4, axis=1))
    return ds


def test_critical_variance_claim_within_the_configured_factor():
    assert claims({"qk_variance": _qk(1.0)}, T)["qk_variance"][0]["holds"]
    assert not claims({"qk_variance": _qk(3.0)}, T)["qk_variance"][0]["holds"]
    assert claims({"qk_variance": _qk(3.0)}, {**T, "critical_factor": 4.0})["qk_variance"][0]["holds"]


def _masks(causal_rate: float, sliding_rate: float, ln_level: float) -> xr.Dataset:
    layers = np.arange(LAYERS)
    r = np.empty((3, 2, LAYERS, 1))
    for i, rate in enumerate((2.0, causal_rate, sliding_rate)):
        r[i, 0, :, 0] = np.exp(-rate * layers)
    r[:, 1, :, 0] = ln_level
    coords = {"mask": ["full", "causal", "sliding"], "norm": ["none", "post_ln"], "layer": layers}
    return xr.Dataset({"relative_residual": (("mask", "norm", "layer", "seed"), r)}, coords=coords)


def test_mask_claims_pass_and_fail():
    good = [c["holds"] for c in claims({"masks": _masks(1.5, 0.5, 0.3)}, T)["masks"]]
    assert good == [True, True, True]
    bad = [c["holds"] for c in claims({"masks": _masks(0.5, 3.0, 1e-9)}, T)["masks"]]
    assert bad == [False, False, False]


def _lengths(centred_long: float) -> xr.Dataset:
    sr = np.array([[2.0, 2.0], [2.2, centred_long]])[:, :, None, None].repeat(3, axis=2)  # (seq_len, centred, layer)
    coords = {"seq_len": [16, 256], "centred": [0, 1], "layer": np.arange(3)}
    return xr.Dataset({"stable_rank": (("seq_len", "centred", "layer", "seed"), sr)}, coords=coords)


@pytest.mark.parametrize(("centred_long", "holds"), [(8.0, True), (2.5, False)])
def test_rank_collapse_in_width_claim(centred_long, holds):
    assert claims({"sequence_length": _lengths(centred_long)}, T)["sequence_length"][0]["holds"] is holds


def test_a_claim_the_results_cannot_test_is_not_printed_as_no():
    from san.report.captions import yes_no

    assert [yes_no(True), yes_no(False), yes_no(None)] == ["yes", "no", "not judged"]
