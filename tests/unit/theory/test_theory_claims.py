"""Theorem claims and the adversarial search: each verdict on small hand-made datasets, once passing, once failing."""

import json

import numpy as np
import pytest
import xarray as xr

from san.claims import verdicts as V
from san.core.config import ConfigError
from san.theory import adversarial as A
from san.theory.claims import adversarial_claims, check_config, factor_scan, pair_tables, theorem_claims

from helpers import default_config

THRESHOLDS = default_config()["report"]["theorem"]
SMALL = {
    "tokens": [2, 3],
    "width": 3,
    "d_qk": 3,
    "heads": [1, 2],
    "starts": 2,
    "steps": 15,
    "lr": 0.05,
    "init_spread": 1.0,
    "seed": 0,
    "draws": 3,
    "controls": ["skip", "layernorm"],
    "control_draws": 3,
}


def _adversarial(top: float, controls: tuple[float, ...], start: float | None = None) -> xr.Dataset:
    """A search result at two sizes (n = 2, 4; H = 1): the largest value ``top`` at n = 4, starts ``start``."""
    g = np.array([[[top - 2.0, top - 1.5, np.nan]], [[top - 1.0, top, np.nan]]])
    start = top - 1.0 if start is None else start
    return xr.Dataset(
        {
            "log10_gamma_adversarial": (("search_tokens", "search_heads", "draw"), g),
            "log10_gamma_start": (("search_tokens", "search_heads", "draw"), np.minimum(g, start)),
            "log10_gamma_control": (
                ("control", "search_tokens", "search_heads", "control_draw"),
                np.array([[[[c, c - 1]], [[c - 2, c - 3]]] for c in controls]),
            ),
        },
        coords={"control": ["skip", "layernorm"][: len(controls)], "search_tokens": [2, 4], "search_heads": [1]},
    )


def _adv(ds: xr.Dataset, log10_gamma_max: float = 0.0, **kw) -> dict:
    kw = {"factor": THRESHOLDS["control_factor"], "negative_control_log10_gamma": 0.0, **kw}
    return adversarial_claims(ds, log10_gamma_max, **kw)


def test_adversarial_claim_passes_below_and_fails_above_the_threshold():
    ds = _adversarial(-0.9, (5.0, 2.0))
    ds["log10_gamma_adversarial"].attrs.update(d=np.int64(4), steps=np.int64(300))  # as read back from netCDF
    ok = _adv(ds, THRESHOLDS["log10_gamma_max"])
    assert json.loads(json.dumps(ok))["settings"] == {"d": 4, "steps": 300}
    assert ok["holds"] is True and ok["controls_detected"] is True and ok["draws"] == 4
    assert ok["gamma_max"] == pytest.approx(10**-0.9)
    bad = _adv(_adversarial(0.3, (5.0, 0.1)), THRESHOLDS["log10_gamma_max"])
    assert bad["holds"] is False and bad["controls_detected"] is False
    assert bad["controls"]["layernorm"]["violated"] is False


def test_adversarial_claim_reports_sizes_per_size_maxima_and_the_ascent_gain():
    out = _adv(_adversarial(-0.5, (5.0, 2.0), start=-1.25))
    assert out["sizes"] == {"n": [2, 4], "H": [1]}
    assert out["per_size"]["n=4, H=1"]["log10_gamma_max"] == pytest.approx(-0.5)
    assert out["per_size"]["n=2, H=1"]["log10_gamma_max"] == pytest.approx(-2.0)
    assert out["ascent_gain"] == pytest.approx(0.75) and out["per_size"]["n=4, H=1"]["ascent_gain"] == 0.75


def test_positive_control_fails_when_the_search_reaches_the_tightened_bound():
    """The same comparison against the bound divided by control_factor: a search reaching gamma 0.8 (above 1/2)
    has power at factor 2 (its control fails); one reaching only 0.11 would pass a bound 9x too tight."""
    strong = _adv(_adversarial(np.log10(0.8), (5.0, 2.0)), factor=2.0)
    assert strong["holds"] is True and strong["control"]["verdict"] == "fails"
    assert strong["control"]["fails_as_it_must"] is True
    weak = _adv(_adversarial(np.log10(0.11), (5.0, 2.0)), factor=2.0)
    assert weak["holds"] is True and weak["control"]["fails_as_it_must"] is False
    assert weak["power_factor"] == pytest.approx(1 / 0.11)
    assert _adv(_adversarial(np.log10(0.11), (5.0, 2.0)), factor=10.0)["control"]["fails_as_it_must"] is True


def test_adversarial_row_holds_with_power_has_none_and_fails():
    """The check judged against the bound divided by the control factor (10): a search reaching gamma 0.5 passes
    the bound and fails the tightened one (power 2); one reaching 0.05 passes both ("no power"); one above the
    bound fails. Every row follows from its own numbers."""
    from san.theory.claims import adversarial_check

    rows = {}
    for name, gamma in (("power", 0.5), ("no power", 0.05), ("fails", 2.0)):
        adv = _adv(_adversarial(np.log10(gamma), (5.0, 2.0)), factor=10.0)
        rows[name] = json.loads(json.dumps(adversarial_check(adv, 10.0)))
        assert V.rederive(rows[name]) == [], name
    assert rows["power"]["verdict"] == "holds" and rows["power"]["positive_control"]["power"] == pytest.approx(
        max(f for f in factor_scan(10.0) if f < 2.0)
    )
    assert rows["power"]["positive_control"]["key"] == "report.theorem.control_factor"
    assert rows["power"]["threshold"]["key"] == "report.theorem.log10_gamma_max"
    assert rows["no power"]["holds"] is True and rows["no power"]["verdict"] == "no power"
    assert rows["fails"]["verdict"] == "fails" and rows["fails"]["positive_control"]["power"] is None


def test_a_factor_raised_after_a_result_was_seen_says_so_in_the_detail():
    adv = _adv(_adversarial(-0.9, (5.0, 2.0)), factor=10.0)
    from san.theory.claims import adversarial_check

    notes = THRESHOLDS["threshold_notes"]
    assert "raised to 10 after" in notes["control_factor"]
    assert notes["control_factor"] in adversarial_check(adv, 10.0, notes)["detail"]
    assert "report.theorem.control_factor" not in adversarial_check(adv, 10.0, {})["detail"]
    report = default_config()["report"]
    check_config(report)
    with pytest.raises(ConfigError, match="threshold_notes names no key"):
        check_config({**report, "theorem": {**THRESHOLDS, "threshold_notes": {"control": "x"}}})


def test_negative_control_criterion_comes_from_config():
    ds = _adversarial(-0.9, (1.5, 2.0))
    assert _adv(ds)["controls_detected"] is True
    out = _adv(ds, negative_control_log10_gamma=1.8)
    assert out["controls"]["skip"]["violated"] is False and out["controls_detected"] is False
    assert out["negative_control_criterion"] == 1.8


def test_editing_the_gamma_threshold_flips_the_verdict():
    ds = _adversarial(-0.9, (5.0, 2.0))
    assert _adv(ds, THRESHOLDS["log10_gamma_max"])["holds"]
    assert not _adv(ds, -1.0)["holds"]


def test_adversarial_claim_is_not_judged_without_a_measured_draw():
    ds = _adversarial(-0.9, (5.0, 2.0))
    ds["log10_gamma_adversarial"][:] = np.nan
    out = _adv(ds)
    assert out["holds"] is None and out["control"]["verdict"] == "not judged"


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


@pytest.mark.slow
def test_search_finds_gamma_below_one_for_attention_and_above_for_the_skip_control():
    ds = A.run(SMALL, 1e-12, 30, 1e-13)
    assert np.nanmax(ds["log10_gamma_adversarial"]) < 0.0
    assert list(ds["search_tokens"].values) == [2, 3] and list(ds["search_heads"].values) == [1, 2]
    assert np.isfinite(ds["log10_gamma_adversarial"]).any(dim="draw").all(), "every size searched"
    out = adversarial_claims(ds, 0.0)
    assert out["controls"]["skip"]["violated"] is True
    assert ds["log10_gamma_adversarial"].attrs["steps"] == 15


@pytest.mark.slow
def test_stored_worst_draw_reproduces_its_gamma():
    ds = A.run(SMALL, 1e-12, 30, 1e-13)
    cand = [ds[k].values[None] for k in ("worst_x", "worst_w_q", "worst_w_k", "worst_w_v", "worst_w_o")]
    gamma, _ = A.certified_log10_gamma(cand, "theorem", 1e-12, 30, 1e-13)
    assert gamma[0] == pytest.approx(float(ds["log10_gamma_adversarial"].max()))
    attrs = ds["log10_gamma_adversarial"].attrs
    assert ds["worst_x"].shape[0] == attrs["worst_tokens"] and ds["worst_w_q"].shape[0] == attrs["worst_heads"]


def test_ascent_keeps_its_best_iterate_not_its_last():
    """With a learning rate that overshoots, the last iterate is worse than the best one met: the ascent returns
    the best (its surrogate never below the start's), and more steps never lower it."""
    cfg = {**SMALL, "lr": 3.0, "steps": 40}
    start = A.starting_points(cfg, 6, 0, (3, 1))
    x0 = A.surrogate(*(lambda t: (t[0], t[1:]))([A.torch.tensor(a) for a in start]), "theorem", 1e-12)
    best = A.ascend(start, "theorem", cfg, 1e-12)
    obj = A.surrogate(*(lambda t: (t[0], t[1:]))([A.torch.tensor(a) for a in best]), "theorem", 1e-12)
    ok = A.torch.isfinite(x0)
    assert bool((obj[ok] >= x0[ok] - 1e-12).all())
    longer = A.ascend(start, "theorem", {**cfg, "steps": 80}, 1e-12)
    obj80 = A.surrogate(*(lambda t: (t[0], t[1:]))([A.torch.tensor(a) for a in longer]), "theorem", 1e-12)
    assert bool((obj80[ok] >= obj[ok] - 1e-12).all())


def test_zero_steps_keep_the_starts():
    start = A.starting_points(SMALL, 4, 0, (2, 1))
    kept = A.ascend(start, "theorem", {**SMALL, "steps": 0}, 1e-12)
    assert all(np.array_equal(a, b) for a, b in zip(start, kept, strict=True))


def test_certified_gamma_is_below_the_other_end_of_the_brackets():
    """The certified value uses the lower end of res(Y) and the upper end of res(X); the gamma the layer needs lies
    between it and the value from the opposite ends."""
    from san.theory.residual import min_residual, norm_1, norm_inf

    x, *w = A.starting_points(SMALL, 8, 0, (3, 1))
    gamma, _ = A.certified_log10_gamma([x, *w], "theorem", 1e-12, 30, 1e-13)
    y = A._layer(x, w, "theorem", 1e-12, np)
    w_qk, w_h = w[0] @ np.swapaxes(w[1], -1, -2), w[2] @ w[3]
    beta = (norm_1(w_qk) * np.sqrt(norm_1(w_h) * norm_inf(w_h))).max(axis=-1)
    other = np.log10(min_residual(y, 30).upper / (4 * beta / np.sqrt(3) * min_residual(x, 30).lower ** 3))
    ok = np.isfinite(gamma)
    assert ok.sum() >= 4 and np.all(gamma[ok] <= other[ok] + 1e-12)


def test_theorem_claims_nominal_verdict_flips_with_a_violation():
    from helpers import tiny_theory_sweep as _tiny_sweep

    ds = _tiny_sweep()
    assert theorem_claims(ds, THRESHOLDS)["nominal"]["holds"] is True
    broken = ds.copy(deep=True)
    # the lower end of the residual ten times the nominal bound at layer 1 of every sample
    target = {"layernorm": 0, "layer": 1}
    broken["residual_lower"].loc[target] = 10 ** (broken["log10_bound"].loc[target] + 1)
    assert theorem_claims(broken, THRESHOLDS)["nominal"]["holds"] is False
    assert theorem_claims(broken, {**THRESHOLDS, "nominal_violations_max": 10**6})["nominal"]["holds"]


def test_every_theorem_check_is_not_judged_on_zero_evidence():
    """Every pair at the float floor: nothing is judged, so neither the nominal nor the certified check passes (the
    certified check must not fill the missing margins and pass)."""
    from helpers import tiny_theory_sweep as _tiny_sweep

    ds = _tiny_sweep()
    floored = ds.copy(deep=True)
    floored["verdict"] = floored["verdict"].where(floored["layer"] == 0, 2)  # every pair at the float floor
    out = theorem_claims(floored, THRESHOLDS)
    assert out["nominal"]["holds"] is None and out["certified_holds_no_ln"] is None
    assert out["certified_control"]["verdict"] == "not judged"
    labels = {r["key"]: r["verdict"] for r in out["verdicts"]}
    assert labels["nominal.holds"] == "not judged" and labels["certified_holds_no_ln"] == "not judged"


def test_theorem_checks_carry_positive_controls_and_kinds():
    from helpers import tiny_theory_sweep as _tiny_sweep

    ds = _tiny_sweep()
    out = theorem_claims(ds, THRESHOLDS)
    kinds = {r["key"]: r["kind"] for r in out["verdicts"]}
    assert kinds == {
        "nominal.holds": "regression",
        "certified_holds_no_ln": "regression",
        "adversarial.holds": "scientific",
        "adversarial.controls_detected": "regression",
    }
    rows = {r["key"]: r for r in out["verdicts"]}
    for key in ("nominal.holds", "certified_holds_no_ln", "adversarial.holds"):
        assert rows[key]["positive_control"]["setting"] == THRESHOLDS["control_factor"]
    # the adversarial row prints its power (the largest factor that still passes) beside the verdict, and "no
    # power" where the bound divided by the control factor passes too
    adv = rows["adversarial.holds"]
    power = 10 ** (THRESHOLDS["log10_gamma_max"] - out["adversarial"]["log10_gamma_max"])
    # the scan's grid (geometric, to the control factor squared) reads the largest factor at or below the exact one
    scan = factor_scan(THRESHOLDS["control_factor"])
    assert adv["positive_control"]["power"] == pytest.approx(max(f for f in scan if f < power))
    assert out["adversarial"]["power_factor"] == pytest.approx(power)
    assert adv["verdict"] == ("no power" if power > THRESHOLDS["control_factor"] else "holds")
    assert V.rederive(json.loads(json.dumps(adv))) == []
    weak = theorem_claims(ds, {**THRESHOLDS, "control_factor": power / 2})
    assert {r["key"]: r["verdict"] for r in weak["verdicts"]}["adversarial.holds"] == "no power"
    strong = theorem_claims(ds, {**THRESHOLDS, "control_factor": power * 2})
    assert {r["key"]: r["verdict"] for r in strong["verdicts"]}["adversarial.holds"] == "holds"
    # regression rows report their controls but never print "no power": a proven inequality passes tighter bounds
    assert rows["nominal.holds"]["verdict"] == "holds"
    # a factor beyond the certified bound's smallest margin makes its control fail
    wide = 10 ** (out["certified_margin_min_no_ln"] + 0.5)
    tight = theorem_claims(ds, {**THRESHOLDS, "control_factor": wide})
    assert tight["certified_holds_no_ln"] is True and tight["certified_control"]["fails_as_it_must"] is True
    assert out["certified_control"]["fails_as_it_must"] is bool(out["certified_margin_min_no_ln"] < np.log10(2.0))
