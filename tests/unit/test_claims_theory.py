"""Theorem claims and the adversarial search: each verdict on small hand-made datasets, once passing, once failing."""

import json

import numpy as np
import pytest
import xarray as xr

from san.theory import adversarial as A
from san.theory.claims import adversarial_claims, pair_tables, theorem_claims

from helpers import default_config

THRESHOLDS = default_config()["report"]["theorem"]
SMALL = {
    "tokens": 3,
    "width": 3,
    "d_qk": 3,
    "heads": 1,
    "starts": 2,
    "steps": 15,
    "lr": 0.05,
    "init_spread": 1.0,
    "seed": 0,
    "draws": 3,
    "controls": ["skip", "layernorm"],
    "control_draws": 3,
}


def _adversarial(top: float, controls: tuple[float, ...]) -> xr.Dataset:
    return xr.Dataset(
        {
            "log10_gamma_adversarial": ("draw", np.array([top - 1.0, top, np.nan])),
            "log10_gamma_control": (("control", "control_draw"), np.array([[c, c - 1] for c in controls])),
            "control_violated": ("control", np.array([int(c > max(0.0, top)) for c in controls], dtype=np.int8)),
        },
        coords={"control": ["skip", "layernorm"][: len(controls)]},
    )


def test_adversarial_claim_passes_below_and_fails_above_the_threshold():
    ds = _adversarial(-0.9, (5.0, 2.0))
    ds["log10_gamma_adversarial"].attrs.update(n=np.int64(4), steps=np.int64(300))  # as read back from netCDF
    ok = adversarial_claims(ds, THRESHOLDS["log10_gamma_max"])
    assert json.loads(json.dumps(ok))["settings"] == {"n": 4, "steps": 300}
    assert ok["holds"] and ok["controls_detected"] and ok["draws"] == 2
    assert ok["gamma_max"] == pytest.approx(10**-0.9)
    bad = adversarial_claims(_adversarial(0.3, (5.0, 0.1)), THRESHOLDS["log10_gamma_max"])
    assert not bad["holds"] and not bad["controls_detected"] and not bad["controls"]["layernorm"]["violated"]


def test_editing_the_gamma_threshold_flips_the_verdict():
    ds = _adversarial(-0.9, (5.0, 2.0))
    assert adversarial_claims(ds, THRESHOLDS["log10_gamma_max"])["holds"]
    assert not adversarial_claims(ds, -1.0)["holds"]


def test_adversarial_claim_fails_without_a_measured_draw():
    ds = _adversarial(-0.9, (5.0, 2.0))
    ds["log10_gamma_adversarial"][:] = np.nan
    assert not adversarial_claims(ds, 0.0)["holds"]


def _verdicts() -> xr.Dataset:
    # input x layernorm x (sample, layer) pairs: 1 respects, -1 violates, 2 float floor, NaN the input layer
    v = np.array([[[np.nan, 1, 1, 2], [np.nan, 1, -1, 2]]] * 1)  # (input, layernorm, layer)
    return xr.Dataset(
        {"verdict": (("input", "layernorm", "layer"), v)}, coords={"input": ["gaussian"], "layernorm": [0, 1]}
    )


def test_pair_tables_keep_layernorm_and_the_float_floor_out_of_the_totals():
    t = pair_tables(_verdicts())
    assert t["theorem_pairs"]["all"]["decided"] == 2 and t["theorem_pairs"]["all"]["float_floor"] == 1
    assert t["theorem_pairs"]["all"]["violates"] == 0
    assert t["layernorm_pairs"]["all"]["violates"] == 1


def test_search_finds_gamma_below_one_for_attention_and_above_for_the_skip_control():
    ds = A.run(SMALL, 1e-12, 30, 1e-13)
    assert np.nanmax(ds["log10_gamma_adversarial"]) < 0.0
    assert int(ds["control_violated"].sel(control="skip")) == 1
    assert ds["log10_gamma_adversarial"].attrs["steps"] == 15


def test_stored_worst_draw_reproduces_its_gamma():
    ds = A.run(SMALL, 1e-12, 30, 1e-13)
    cand = [ds[k].values[None] for k in ("worst_x", "worst_w_q", "worst_w_k", "worst_w_v", "worst_w_o")]
    gamma, _ = A.certified_log10_gamma(cand, "theorem", 1e-12, 30, 1e-13)
    assert gamma[0] == pytest.approx(float(ds["log10_gamma_adversarial"].max()))


def test_certified_gamma_is_below_the_other_end_of_the_brackets():
    """The certified value uses the lower end of res(Y) and the upper end of res(X); the gamma the layer needs lies
    between it and the value from the opposite ends."""
    from san.theory.residual import min_residual, norm_1, norm_inf

    x, *w = A.starting_points(SMALL, 8, 0)
    gamma, _ = A.certified_log10_gamma([x, *w], "theorem", 1e-12, 30, 1e-13)
    y = A._layer(x, w, "theorem", 1e-12, np)
    w_qk, w_h = w[0] @ np.swapaxes(w[1], -1, -2), w[2] @ w[3]
    beta = (norm_1(w_qk) * np.sqrt(norm_1(w_h) * norm_inf(w_h))).max(axis=-1)
    other = np.log10(min_residual(y, 30).upper / (4 * beta / np.sqrt(3) * min_residual(x, 30).lower ** 3))
    ok = np.isfinite(gamma)
    assert ok.sum() >= 4 and np.all(gamma[ok] <= other[ok] + 1e-12)


def test_theorem_claims_nominal_verdict_flips_with_a_violation():
    from test_theory import _tiny_sweep

    ds = _tiny_sweep()
    assert theorem_claims(ds, THRESHOLDS)["nominal"]["holds"]
    broken = ds.copy(deep=True)
    broken["verdict"].loc[{"layernorm": 0, "layer": 1}] = -1
    assert not theorem_claims(broken, THRESHOLDS)["nominal"]["holds"]
    assert theorem_claims(broken, {**THRESHOLDS, "nominal_violations_max": 10**6})["nominal"]["holds"]
