"""Propagation claims (Noci et al.; Giorlandino & Goldt; Wu et al.; Nait Saada et al.): each verdict on small
hand-made sweep results, once passing and once failing, with the config's thresholds."""

import json

import numpy as np
import pytest
import xarray as xr

from san.propagation.claims import claims
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
    return ds


def _by_paper(cs: list[dict]) -> dict[str, bool | None]:
    return {c["paper"]: c["holds"] for c in cs}


def test_every_claim_states_its_kind_source_and_verdict():
    cs = claims({"depth": _depth(0.5, 0.2, 0.01, 0.2), "masks": _masks(1.5, 0.5, 0.3, True)}, T)
    for c in (c for sweep in cs.values() for c in sweep):
        assert c["kind"].split(" ")[0] in ("universal", "existential", "quantitative", "observation")
        assert c["source"] and c["test"]
        assert c["verdict"] == {True: "holds", False: "fails", None: "not judged"}[c["holds"]]


def test_depth_claims_pass_and_fail():
    good = _by_paper(claims({"depth": _depth(0.5, 0.2, 0.01, 0.2)}, T)["depth"])
    assert good == {
        "Noci et al. 2022": True,
        "Giorlandino & Goldt 2026": True,
        "Giorlandino & Goldt 2026 (finite-size)": True,
    }
    bad = _by_paper(claims({"depth": _depth(0.95, 0.01, 0.2, -0.04)}, T)["depth"])
    assert not any(bad.values())


def test_noci_claim_is_widened_by_the_seed_spread():
    near = _depth(0.895, 0.2, 0.01, 0.2)
    near["cosine"][0, :, 1, ..., -1, :] = 0.895 + 0.02 * (-1.0) ** np.arange(4)
    assert _by_paper(claims({"depth": near}, T)["depth"])["Noci et al. 2022"] is False
    assert _by_paper(claims({"depth": near}, {**T, "spread_sigmas": 0.0})["depth"])["Noci et al. 2022"] is True


def test_noci_claim_is_judged_over_the_model_depths():
    ds = _depth(0.5, 0.2, 0.01, 0.2)
    final = np.full((2, 1, 2, 2, 2, 3, 4), 0.5)
    final[1] = np.nan  # only the 1/sqrt(L) points run at the other depths
    dims = ("residual", "norm", "beta", "width", "seq_len", "model_depth", "seed")
    ds = ds.assign(final_cosine=(dims, final)).assign_coords(model_depth=[6, 10, 96])
    assert _by_paper(claims({"depth": ds}, T)["depth"])["Noci et al. 2022"] is True
    deep = ds.copy(deep=True)
    deep["final_cosine"][0, ..., -1, :] = 0.95  # collapsed at the deepest model only
    noci = [c for c in claims({"depth": deep}, T)["depth"] if c["paper"] == "Noci et al. 2022"][0]
    assert noci["holds"] is False and "L = 96: 0.950" in noci["detail"]


def test_agreement_is_a_trend_in_d_and_t():
    # a gap that does not shrink from the smallest to the largest size fails, however small it is
    flat = _by_paper(claims({"depth": _depth(0.5, 0.01, 0.01, 0.2)}, T)["depth"])
    assert flat["Giorlandino & Goldt 2026"] is False
    one_size = _depth(0.5, 0.2, 0.01, 0.2).isel(width=[0], seq_len=[0])
    out = claims({"depth": one_size}, T)["depth"]
    assert [c["verdict"] for c in out if c["paper"] == "Giorlandino & Goldt 2026"] == ["not judged"]


def test_finite_size_needs_a_seed_spread():
    one = _by_paper(claims({"depth": _depth(0.5, 0.2, 0.01, 0.2, seeds=1)}, T)["depth"])
    assert one["Giorlandino & Goldt 2026 (finite-size)"] is None
    # a T effect within the seed spread does not count
    noisy = _depth(0.5, 0.2, 0.01, 0.001)
    out = _by_paper(claims({"depth": noisy}, T)["depth"])
    assert out["Giorlandino & Goldt 2026 (finite-size)"] is False
    assert _by_paper(claims({"depth": noisy}, {**T, "spread_sigmas": 0.0})["depth"])[
        "Giorlandino & Goldt 2026 (finite-size)"
    ]


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


def _qk_verdicts(ds: xr.Dataset, t=T) -> list:
    return [c["holds"] for c in claims({"qk_variance": ds}, t)["qk_variance"]]


def test_critical_variance_against_the_finite_t_recursion():
    assert _qk_verdicts(_qk(1.5, 0.0, True)) == [True, True, True]
    # the infinite-T statistic fails the finite-T comparison (the control the claim's detail states)
    assert _qk_verdicts(_qk(1.9, 0.0, True))[0] is False
    assert _qk_verdicts(_qk(1.9, 0.0, True), {**T, "critical_tolerance": 0.3})[0] is True
    detail = claims({"qk_variance": _qk(1.5, 0.0, True)}, T)["qk_variance"][0]["detail"]
    assert "the infinite-T statistic fails the same comparison" in detail


def test_per_layer_participation_and_its_trend_in_t():
    assert _qk_verdicts(_qk(1.5, 2 * T["overlap_tolerance"], True))[1] is False
    assert _qk_verdicts(_qk(1.5, 0.0, False))[2] is False
    one_t = _qk(1.5, 0.0, True).isel(seq_len=[0])
    assert _qk_verdicts(one_t)[2] is None


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

    ratio = _masks(1.5, 0.5, 0.3, True)["construction_ratio"].isel(layer=-1)
    assert construction_holds(ratio.sel(construction_norm="layer_norm").values, T)
    assert not construction_holds(ratio.sel(construction_norm="none").values, T)


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
    assert claims({"sequence_length": spread}, {**T, "spread_sigmas": 0.0})["sequence_length"][0]["holds"] is True


@pytest.mark.parametrize(("centred_long", "holds"), [(8.0, True), (2.5, False)])
def test_rank_collapse_in_width_claim(centred_long, holds):
    assert claims({"sequence_length": _lengths(centred_long)}, T)["sequence_length"][0]["holds"] is holds


def test_a_claim_the_results_cannot_test_is_not_printed_as_no():
    from san.report.captions import yes_no

    assert [yes_no(True), yes_no(False), yes_no(None)] == ["yes", "no", "not judged"]
