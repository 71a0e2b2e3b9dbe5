"""Propagation claims (Noci et al.; Giorlandino & Goldt; Wu et al.; Nait Saada et al.): each verdict on small
hand-made sweep results, once passing and once failing, with the config's thresholds; each scientific row's
positive control failing against a right answer, and passing (no power) where the test cannot tell."""

import json

import numpy as np
import pytest
import xarray as xr

from san.core import verdicts as V
from san.propagation.claims import check_config, sweep_claims
from san.propagation.spec import INV_SQRT_DEPTH
from san.propagation.theory import recursion

from helpers import default_config

T = default_config()["report"]["propagation"]
LAYERS = 11


def _depth(inv_last: float, sub_small: float, sub_large: float, t_drop: float, seeds: int = 4) -> xr.Dataset:
    """Depth sweep: input cosine 0.2 (beta_c = 1.58, so beta 0.5 is subcritical and 4.0 supercritical); the gap to
    the recursion is, below critical, ``sub_small`` at the smallest (d, T) and ``sub_large`` at the others, and above
    critical ``0.05 + t_drop`` at the short T (0.05 at the long one); seed spreads of 0.01 on both."""
    dims = ("residual", "norm", "beta", "width", "seq_len", "layer", "seed")
    shape = (2, 1, 2, 2, 2, LAYERS, seeds)
    theory = np.empty(shape[:-1])
    for i, branch in enumerate(((LAYERS - 1) ** -0.5, 1.0)):
        for j, beta in enumerate((0.5, 4.0)):
            block = {"var_v": 0.2, "var_b": 4e-4, "var_w": 0.2, "skip": 1.0, "branch": branch, "mlp": True}
            theory[i, :, j] = recursion(0.2, beta, LAYERS - 1, **block)[None, None, None, :]
    wiggle = 0.01 * (-1.0) ** np.arange(seeds)
    gap = np.zeros(shape)
    gap[:, :, 0, ..., 1:, :] = sub_large
    gap[:, :, 0, 0, 0, 1:, :] = sub_small + wiggle
    gap[:, :, 1, ..., 1:, :] = 0.05
    gap[:, :, 1, :, 0, 1:, :] += t_drop
    gap[:, :, 1, :, 0, 1:, :] += wiggle  # seed spread of the short-T gap
    cosine = theory[..., None] + gap
    cosine[0, :, 1, ..., -1, :] = inv_last + 0.01 * wiggle  # residual inv_sqrt_depth, beta 4: last-layer cosine
    coords = {"residual": ["inv_sqrt_depth", "skip"], "norm": ["post_ln"], "beta": [0.5, 4.0], "width": [8, 64]}
    coords.update(seq_len=[8, 64], layer=np.arange(LAYERS), seed=np.arange(seeds))
    ds = xr.Dataset({"cosine": (dims, cosine), "theory_cosine": (dims[:-1], theory)}, coords=coords)
    ds.attrs.update(
        fixed=json.dumps({"var_v": 0.2, "var_b": 4e-4, "var_w": 0.2, "mlp": True}),
        residuals=json.dumps(
            {"inv_sqrt_depth": {"skip": 1.0, "branch": INV_SQRT_DEPTH}, "skip": {"skip": 1.0, "branch": 1.0}}
        ),
        inv_sqrt_depth=INV_SQRT_DEPTH,
    )
    # the last-layer cosine at the sweep's model depth, where the unscaled residual (a = b = 1) collapses above
    # critical (0.97 at beta 4): the control of Noci et al.'s claim
    final = ds["cosine"].isel(layer=-1, drop=True).expand_dims(model_depth=[LAYERS - 1], axis=-2).copy()
    final.loc[{"residual": "skip", "beta": 4.0}] = 0.97
    return ds.assign(final_cosine=final)


def claims(results: dict, t: dict) -> dict[str, list[dict]]:
    """The rows of :func:`sweep_claims` by sweep (the first part of each key)."""
    out: dict[str, list[dict]] = {name: [] for name in results}
    for r in sweep_claims(results, t):
        out[r["key"].split(".")[0]].append(r)
    return out


NOCI, EXACT, FINITE = "depth.noci", "depth.recursion_exact_in_limit", "depth.finite_size_dominated_by_T"


def _by_key(cs: list[dict]) -> dict[str, bool | None]:
    return {c["key"]: c["holds"] for c in cs}


def _row(cs: list[dict], key: str) -> dict:
    return next(c for c in cs if c["key"] == key)


def test_every_row_states_its_kind_form_source_and_control():
    cs = claims({"depth": _depth(0.5, 0.2, 0.01, 0.2), "masks": _masks(1.5, 0.5, 0.3, True)}, T)
    for c in (c for sweep in cs.values() for c in sweep):
        assert c["kind"] in ("scientific", "demonstration") and c["form"] in V.FORMS
        assert c["source"] and c["test"]
        if c["kind"] == "scientific":
            # every control of these passing sweeps fails as it must, so the printed verdict is the check's
            assert c["positive_control"]["fails_as_it_must"] is True, c["key"]
            assert c["verdict"] == "holds", c["key"]
    construction = _row(cs["masks"], "masks.layernorm_construction")
    assert construction["kind"] == "demonstration" and construction["form"] == "existential"


def test_depth_claims_pass_and_fail():
    good = _by_key(claims({"depth": _depth(0.5, 0.2, 0.01, 0.2)}, T)["depth"])
    assert good == {NOCI: True, EXACT: True, FINITE: True}
    bad = _by_key(claims({"depth": _depth(0.95, 0.01, 0.2, -0.04)}, T)["depth"])
    assert not any(bad.values())


def test_noci_claim_is_widened_by_the_seed_spread():
    near = _depth(0.895, 0.2, 0.01, 0.2)
    near["final_cosine"][0, :, 1, ..., -1, :] = 0.895 + 0.02 * (-1.0) ** np.arange(4)
    assert _by_key(claims({"depth": near}, T)["depth"])[NOCI] is False
    assert _by_key(claims({"depth": near}, {**T, "sigmas": 0.0})["depth"])[NOCI] is True


def test_noci_claim_is_judged_over_the_model_depths():
    ds = _depth(0.5, 0.2, 0.01, 0.2)
    final = np.full((2, 1, 2, 2, 2, 3, 4), 0.5)
    final[1] = np.nan  # only the 1/sqrt(L) points run at the other depths
    dims = ("residual", "norm", "beta", "width", "seq_len", "model_depth", "seed")
    ds = ds.drop_vars(["final_cosine", "model_depth"])
    ds = ds.assign(final_cosine=(dims, final)).assign_coords(model_depth=[6, 10, 96])
    assert _by_key(claims({"depth": ds}, T)["depth"])[NOCI] is True
    deep = ds.copy(deep=True)
    deep["final_cosine"][0, ..., -1, :] = 0.95  # collapsed at the deepest model only
    noci = _row(claims({"depth": deep}, T)["depth"], NOCI)
    assert noci["holds"] is False and "L = 96: 0.950" in noci["detail"]
    assert "1/sqrt(L) collapses at 8 of 24 grid points" in noci["detail"]


def test_noci_control_is_the_unscaled_residual():
    ds = _depth(0.5, 0.2, 0.01, 0.2)
    noci = _row(claims({"depth": ds}, T)["depth"], NOCI)
    # the unscaled residual's last-layer cosine collapses above critical (0.97) at the 4 grid points of beta 4
    last = ds["final_cosine"].sel(residual="skip")
    upper = last.mean("seed") + T["sigmas"] * last.std("seed", ddof=1) / 2.0
    collapsed = int((upper >= T["collapsed_cosine"]).sum())
    assert noci["positive_control"]["fails_as_it_must"] is (collapsed > 0)
    assert f"the unscaled residual (a = b = 1) collapses at {collapsed} of {upper.size}" in noci["detail"]
    # an unscaled residual that stays apart everywhere: the test cannot tell the two scalings apart
    apart = ds.copy(deep=True)
    apart["final_cosine"].loc[{"residual": "skip"}] = 0.3
    row = _row(claims({"depth": apart}, T)["depth"], NOCI)
    assert row["holds"] is True and row["verdict"] == "no power"


def test_exact_in_the_limit_is_judged_at_the_largest_size():
    # a gap that shrinks from the smallest to the largest size but stays above the tolerance there fails
    shrinking = _row(claims({"depth": _depth(0.5, 0.3, 0.07, 0.2)}, T)["depth"], EXACT)
    assert shrinking["holds"] is False and shrinking["verdict"] == "fails"
    # a small gap at the largest size holds, however little it shrank; its recursion offset by +0.1 fails
    flat = _row(claims({"depth": _depth(0.5, 0.012, 0.012, 0.2)}, T)["depth"], EXACT)
    assert flat["holds"] is True and flat["verdict"] == "holds"
    control = flat["positive_control"]
    assert control["setting"] == T["recursion_offset"] and control["fails_as_it_must"] is True
    # power: |0.012 - offset| < 0.05 up to an offset of 0.06 (grid 0.005)
    assert control["power"] == pytest.approx(0.06)
    assert flat["value"] == pytest.approx(0.012) and flat["margin"] == pytest.approx(0.038)
    one_size = _depth(0.5, 0.2, 0.01, 0.2).isel(width=[0], seq_len=[0])
    # one size: that size is the largest; the gap there is the smallest size's
    assert _row(claims({"depth": one_size}, T)["depth"], EXACT)["holds"] is False


def test_exact_in_the_limit_averages_the_seeds_before_taking_the_largest_gap():
    # at the largest size each seed strays by 0.06 at a layer of its own: every seed's own largest gap is 0.06,
    # above the tolerance, but the seed-mean curve strays by 0.015 with a standard error of 0.015 (0.045 < 0.05)
    ds = _depth(0.5, 0.2, 0.0, 0.2)
    for seed in range(4):
        ds["cosine"].loc[{"width": 64, "seq_len": 64, "beta": 0.5, "seed": seed, "layer": 1 + seed}] += 0.06
    row = _row(claims({"depth": ds}, T)["depth"], EXACT)
    assert row["holds"] is True and row["value"] == pytest.approx(0.015)
    assert "each seed's own largest gap at (64, 64): 0.060 on average" in row["detail"]


def test_exact_in_the_limit_has_no_power_with_a_loose_tolerance():
    loose = {**T, "agreement": 0.5}  # looser than the control's offset: both pass (check_config refuses it)
    row = _row(claims({"depth": _depth(0.5, 0.01, 0.01, 0.2)}, loose)["depth"], EXACT)
    assert row["holds"] is True and row["positive_control"]["fails_as_it_must"] is False
    assert row["verdict"] == "no power"
    with pytest.raises(ValueError, match="report.propagation.recursion_offset"):
        check_config({"propagation": loose})


def test_exact_in_the_limit_is_harder_to_pass_with_more_noise():
    noisy = _depth(0.5, 0.2, 0.04, 0.2)
    spread = 0.03 * (-1.0) ** np.arange(4)  # seed spread at the largest size: s.e. 0.017, 2 s.e. 0.035
    noisy["cosine"].loc[{"width": 64, "seq_len": 64, "beta": 0.5}] = noisy["cosine"].sel(
        width=64, seq_len=64, beta=0.5
    ) + xr.DataArray(spread, dims="seed") * (noisy.layer > 0)
    assert _row(claims({"depth": noisy}, T)["depth"], EXACT)["holds"] is False
    assert _row(claims({"depth": noisy}, {**T, "sigmas": 0.0})["depth"], EXACT)["holds"] is True


def test_finite_size_needs_a_seed_spread():
    one = _by_key(claims({"depth": _depth(0.5, 0.2, 0.01, 0.2, seeds=1)}, T)["depth"])
    assert one[FINITE] is None
    # a T effect within the seed spread does not count
    noisy = _depth(0.5, 0.2, 0.01, 0.001)
    assert _by_key(claims({"depth": noisy}, T)["depth"])[FINITE] is False
    assert _by_key(claims({"depth": noisy}, {**T, "sigmas": 0.0})["depth"])[FINITE]


def test_finite_size_control_is_the_effect_with_alternating_signs():
    row = _row(claims({"depth": _depth(0.5, 0.2, 0.01, 0.2)}, T)["depth"], FINITE)
    assert row["positive_control"]["fails_as_it_must"] is True
    # per-seed differences near 0.2 with a spread of 0.01 -> alternating signs: a mean near 0
    assert abs(row["positive_control"]["value"]) < 0.1 * row["value"]
    # without a spread to judge by, the null of alternating signs passes too: no power
    row = _row(claims({"depth": _depth(0.5, 0.2, 0.01, 0.2)}, {**T, "sigmas": 0.0})["depth"], FINITE)
    assert row["verdict"] == "no power"


BETAS = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0])


def _rem(critical: float) -> np.ndarray:
    return np.clip(1 - critical / BETAS, 0, None)


def _qk(observed_critical: float, layer_gap: float, trend: bool, seeds: int = 8) -> xr.Dataset:
    """qk_variance sweep at two T whose last-layer participation follows the REM law at ``observed_critical``; the
    finite-T recursion puts it at 1.5, the infinite-T recursion at 1.9 (the same statistic on each). Per layer the
    simulation sits ``layer_gap`` above the finite-T prediction; its gap to the REM limit shrinks with T if
    ``trend``."""
    seq = [32, 256]
    dims = ("beta", "seq_len", "layer", "seed")
    shape = (len(BETAS), 2, 4, seeds)
    wiggle = 0.002 * (-1.0) ** np.arange(seeds)
    finite = np.repeat(_rem(1.5)[:, None, None], 2, axis=1).repeat(4, axis=2)
    y = np.repeat(_rem(observed_critical)[:, None, None, None], 2, axis=1).repeat(4, axis=2).repeat(seeds, axis=3)
    y = y + wiggle
    prediction = y.mean(-1, keepdims=True) - layer_gap + np.zeros(shape)
    limit = y.copy()
    limit[:, 0] -= 0.1
    limit[:, 1] -= 0.05 if trend else 0.1
    ds = xr.Dataset(
        {
            "cosine": (dims, np.full(shape, 0.2)),
            "attention_overlap": (dims, y),
            "finite_overlap": (dims, prediction),
            "theory_overlap": (dims, limit),
            "finite_recursion_overlap": (dims[:-1], finite),
            "recursion_overlap": (dims[:-1], np.repeat(_rem(1.9)[:, None, None], 2, axis=1).repeat(4, axis=2)),
        },
        coords={"beta": BETAS, "seq_len": seq, "layer": np.arange(4), "seed": np.arange(seeds)},
    )
    ds.attrs.update(
        fixed=json.dumps({"residual": "skip", "var_v": 1.0, "var_b": 0.0, "var_w": 2.0, "mlp": True}),
        residuals=json.dumps({"skip": {"skip": 1.0, "branch": 1.0}}),
        inv_sqrt_depth=INV_SQRT_DEPTH,
    )
    return ds


CRITICAL, PER_LAYER, TREND = "qk_variance.critical_variance", "qk_variance.per_layer_rem", "qk_variance.rem_limit_in_T"


def _qk_verdicts(ds: xr.Dataset, t=T) -> list:
    return [c["holds"] for c in claims({"qk_variance": ds}, t)["qk_variance"]]


def test_critical_variance_against_the_finite_t_recursion():
    assert _qk_verdicts(_qk(1.5, 0.0, True)) == [True, True, True]
    # the infinite-T statistic fails the finite-T comparison (the control the claim's detail states)
    assert _qk_verdicts(_qk(1.9, 0.0, True))[0] is False
    assert _qk_verdicts(_qk(1.9, 0.0, True), {**T, "critical_tolerance": 0.3})[0] is True
    row = _row(claims({"qk_variance": _qk(1.5, 0.0, True)}, T)["qk_variance"], CRITICAL)
    # the infinite-T recursion's statistic (1.9 against the observed 1.5: 21 %) fails the 15 % comparison
    assert row["positive_control"]["fails_as_it_must"] is True and row["verdict"] == "holds"
    # power: the observed 1.5 stays within 15 % of 1.5 (1 + s) up to s = 0.17 (1.5 / 1.76 - 1 = -0.148)
    assert row["positive_control"]["power"] == pytest.approx(0.17)


def test_per_layer_participation_and_its_trend_in_t():
    assert _qk_verdicts(_qk(1.5, 2 * T["overlap_tolerance"], True))[1] is False
    assert _qk_verdicts(_qk(1.5, 0.0, False))[2] is False
    one_t = _qk(1.5, 0.0, True).isel(seq_len=[0])
    assert _qk_verdicts(one_t)[2] is None


def test_per_layer_gap_is_widened_not_narrowed_by_the_spread():
    ds = _qk(1.5, 0.045, True)  # raw gap 0.045, within the tolerance 0.05
    assert _row(claims({"qk_variance": ds}, T)["qk_variance"], PER_LAYER)["holds"] is True
    noisy = ds.copy(deep=True)
    noisy["attention_overlap"] = noisy["attention_overlap"] + xr.DataArray(0.02 * (-1.0) ** np.arange(8), dims="seed")
    # s.e. 0.02 sqrt(8 / 7) / sqrt(8) = 0.0076: gap + 2 s.e. = 0.060 > 0.05
    assert _row(claims({"qk_variance": noisy}, T)["qk_variance"], PER_LAYER)["holds"] is False
    assert _row(claims({"qk_variance": noisy}, {**T, "sigmas": 0.0})["qk_variance"], PER_LAYER)["holds"] is True


def test_per_layer_control_is_the_offset_prediction():
    row = _row(claims({"qk_variance": _qk(1.5, 0.0, True)}, T)["qk_variance"], PER_LAYER)
    assert row["holds"] is True and row["positive_control"]["fails_as_it_must"] is True
    # the measured participation's own spread (s.e. 0.00076, 2 s.e. 0.0015) leaves offsets up to 0.045 passing
    assert row["positive_control"]["power"] == pytest.approx(0.045)
    with pytest.raises(ValueError, match="report.propagation.overlap_offset"):
        check_config({"propagation": {**T, "overlap_offset": 0.05}})


def test_rem_trend_has_no_power_when_an_offset_limit_shrinks_too():
    # gap to the limit 0.1 -> 0.05: against the limit + 0.1 the gap grows (0 -> 0.05): the control fails
    row = _row(claims({"qk_variance": _qk(1.5, 0.0, True)}, T)["qk_variance"], TREND)
    assert row["verdict"] == "holds" and row["positive_control"]["fails_as_it_must"] is True
    # |0.1 - offset| - |0.05 - offset| > 0 up to an offset of 0.075 (a tie there, decided by round-off)
    assert row["positive_control"]["power"] == pytest.approx(0.0725, abs=0.003)
    # gap 0.3 -> 0.2: a limit offset by 0.1 is approached as well (0.2 -> 0.1): the trend has no power
    far = _qk(1.5, 0.0, True)
    far["theory_overlap"].loc[{"seq_len": 32}] = far["attention_overlap"].sel(seq_len=32) - 0.3
    far["theory_overlap"].loc[{"seq_len": 256}] = far["attention_overlap"].sel(seq_len=256) - 0.2
    row = _row(claims({"qk_variance": far}, T)["qk_variance"], TREND)
    assert row["holds"] is True and row["verdict"] == "no power"


def _masks(causal_rate: float, local_rate: float, ln_level: float, construction_ok: bool) -> xr.Dataset:
    layers = np.arange(LAYERS)
    masks = ["full", "causal", "sliding", "sliding_causal"]
    r = np.empty((4, 2, LAYERS, 2))
    for i, rate in enumerate((2.0, causal_rate, local_rate, local_rate)):
        for s in range(2):
            r[i, 0, :, s] = np.exp(-(rate + 0.001 * s) * layers)
    r[:, 1] = (ln_level ** (layers / layers[-1]))[:, None]
    ratio = np.full((3, 16, LAYERS), 0.24)
    ratio[2, :, -1] = 1e-3  # without LayerNorm the construction collapses
    if not construction_ok:
        ratio[1, :, -1] = 1e-3
    coords = {"mask": masks, "norm": ["none", "post_ln"], "layer": layers, "seed": [0, 1]}
    coords.update(construction_norm=["sphere", "layer_norm", "none"], draw=np.arange(16))
    dims = ("mask", "norm", "layer", "seed")
    ds = xr.Dataset(
        {
            "relative_residual": (dims, r),
            "mu": (dims, r * 8.0),
            "construction_ratio": (("construction_norm", "draw", "layer"), ratio),
        },
        coords=coords,
    )
    ds.attrs.update(
        construction=json.dumps({"tokens": 8, "width": 8, "draws": 16, "perturbation": 0.1}),
        construction_equilibrium_ratio=0.24,
    )
    return ds


def test_mask_claims_pass_and_fail():
    good = [c["holds"] for c in claims({"masks": _masks(1.5, 0.5, 0.3, True)}, T)["masks"]]
    assert good == [True, True, True, True]
    bad = [c["holds"] for c in claims({"masks": _masks(0.5, 3.0, 1e-9, False)}, T)["masks"]]
    assert bad == [False, False, False, False]


def test_local_masks_need_the_configured_margin():
    # the sliding windows barely slower than the global masks: below the margin
    close = claims({"masks": _masks(1.5, 1.49, 0.3, True)}, T)["masks"][1]
    assert close["holds"] is False
    assert claims({"masks": _masks(1.5, 1.49, 0.3, True)}, {**T, "rate_margin": 0.0})["masks"][1]["holds"]


def test_the_construction_without_layernorm_fails():
    from san.propagation.claims import construction_holds

    ratio = _masks(1.5, 0.5, 0.3, True)["construction_ratio"].isel(layer=slice(1, None))
    assert construction_holds(ratio.sel(construction_norm="layer_norm").values, T)
    assert not construction_holds(ratio.sel(construction_norm="none").values, T)


CONSTRUCTION = "masks.layernorm_construction"


def test_a_construction_shrunk_to_round_off_counts_as_collapsed():
    ds = _masks(1.5, 0.5, 0.3, True)
    # without LayerNorm the tokens fall to rank one by layer 5; past it their s2/s1 is round-off, above the
    # threshold in 15 of 16 draws at the last layer (a last-layer reading would call 94 % of them rank 2)
    none = ds["construction_ratio"].sel(construction_norm="none").values
    none[:, 1:6] = np.geomspace(0.2, 1e-4, 5)
    none[:, 6:] = 1e-4
    none[:15, -1] = 0.5
    ds["construction_ratio"].loc[{"construction_norm": "none"}] = none
    row = _row(claims({"masks": ds}, T)["masks"], CONSTRUCTION)
    assert row["holds"] is True and "none 0%" in row["detail"]
    # the same draws kept rank 2 at every layer: the "without LayerNorm it collapses" half fails the row
    ds["construction_ratio"].loc[{"construction_norm": "none"}] = 0.24
    assert _row(claims({"masks": ds}, T)["masks"], CONSTRUCTION)["holds"] is False


def test_a_construction_that_dips_below_rank_two_fails():
    ds = _masks(1.5, 0.5, 0.3, True)
    ln = ds["construction_ratio"].sel(construction_norm="layer_norm").values
    ln[:4, 3] = 0.05  # a quarter of the draws dips below 0.1 mid-way, recovering by the last layer
    ds["construction_ratio"].loc[{"construction_norm": "layer_norm"}] = ln
    assert _row(claims({"masks": ds}, T)["masks"], CONSTRUCTION)["holds"] is False


def test_mask_controls_are_masks_and_norms_of_the_other_kind():
    cs = claims({"masks": _masks(1.5, 0.5, 0.3, True)}, T)["masks"]
    # the one-directional sliding window (rate 0.5: last residual 7e-3) does not collapse below 1e-6
    assert _row(cs, "masks.causal_collapse")["positive_control"]["fails_as_it_must"] is True
    # a local window decaying as fast as causal attention: the control collapses too, the test has no power
    fast = claims({"masks": _masks(1.5, 4.0, 0.3, True)}, T)["masks"]
    assert _row(fast, "masks.causal_collapse")["verdict"] == "no power"
    # without LayerNorm mu falls (full: exp(-20)), so the with-LayerNorm reading's control fails
    assert _row(cs, "masks.layernorm_mu_kept")["positive_control"]["fails_as_it_must"] is True
    assert _row(cs, "masks.local_slows")["positive_control"]["fails_as_it_must"] is True


def _lengths(centred_long: float) -> xr.Dataset:
    sr = np.array([[2.0, 2.0], [2.2, centred_long]])[:, :, None, None].repeat(3, axis=2)  # (seq_len, centred, layer)
    coords = {"seq_len": [16, 256], "centred": [0, 1], "layer": np.arange(3)}
    return xr.Dataset({"stable_rank": (("seq_len", "centred", "layer", "seed"), sr)}, coords=coords)


def test_rank_collapse_in_width_is_judged_against_the_seed_spread():
    ds = _lengths(3.6)
    spread = xr.concat([ds, ds.copy(deep=True)], "seed")
    # growth with A - 11^T/T: 3x in one seed, 1.2x in the other: 2.1x on average (above 1.5x), s.e. 0.9
    spread["stable_rank"][1, 1, :, 1] = 6.0
    spread["stable_rank"][1, 1, :, 0] = 2.4
    assert claims({"sequence_length": spread}, T)["sequence_length"][0]["holds"] is False
    assert claims({"sequence_length": spread}, {**T, "sigmas": 0.0})["sequence_length"][0]["holds"] is True


@pytest.mark.parametrize(("centred_long", "holds"), [(8.0, True), (2.5, False)])
def test_rank_collapse_in_width_claim(centred_long, holds):
    row = claims({"sequence_length": _lengths(centred_long)}, T)["sequence_length"][0]
    assert row["holds"] is holds
    # the control, A and A - 11^T/T exchanged, fails either way on these sweeps
    assert row["positive_control"]["fails_as_it_must"] is True


def test_a_claim_the_results_cannot_test_is_not_printed_as_no():
    from san.report.captions import yes_no

    assert [yes_no(True), yes_no(False), yes_no(None)] == ["yes", "no", "not judged"]


def test_the_wing_section_lists_rows_under_verdicts(tmp_path):
    from san.core.storage import write_netcdf
    from san.propagation.claims import claims as wing_claims

    path = tmp_path / "sequence_length.nc"
    write_netcdf(_lengths(8.0), path, {"sweep": "sequence_length"})
    params = {"sweeps": ["sequence_length"], "report": {"propagation": T}}
    section = wing_claims({"propagation": [str(path)]}, params)["propagation"]
    assert [r["key"] for r in section["verdicts"]] == ["sequence_length.rank_collapse_in_width"]
    assert wing_claims({"propagation": []}, {**params, "sweeps": []}) == {"propagation": None}
