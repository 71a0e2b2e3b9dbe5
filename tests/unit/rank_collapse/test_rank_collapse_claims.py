"""Rank-collapse, attention-product and circle claims: each verdict once passing, once failing, with the config's
thresholds (and one edited threshold flipping a verdict)."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from san.circle.claims import circle_claims
from san.rank_collapse.claims import (
    attention_product_claims,
    pretrained_collapse_claims,
    pretrained_slower_claims,
    rank_collapse_claims,
)

from helpers import default_config, synthetic_pretrained, synthetic_rank_collapse

REPORT = default_config()["report"]


def test_causal_models_stay_out_of_the_rank_collapse_verdict():
    results = {"enc": synthetic_rank_collapse(2e-7, 0.3), "dec": synthetic_rank_collapse(5e-2, 0.3)}
    assert not rank_collapse_claims(results, **REPORT["rank_collapse"])["pure_collapses"]
    out = rank_collapse_claims(results, **REPORT["rank_collapse"], causal=("dec",))
    assert out["pure_collapses"] and out["judged"] == ["enc"] and out["causal"] == ["dec"]


def test_pretrained_collapse_must_be_fast():
    cfg = REPORT["pretrained_collapse"]
    fast = {"m": synthetic_pretrained([0.9, 0.1, 1e-4, 1e-9, 1e-9, 1e-9])}
    slow = {"m": synthetic_pretrained([0.9, 0.5, 0.1, 0.05, 2e-3, 5e-4])}  # below 1e-3 only at layer 5 of 5
    kw = {"threshold": cfg["threshold"], "max_layer_fraction": cfg["max_layer_fraction"]}
    assert pretrained_collapse_claims(fast, **kw)["pure_collapses_in_every_model"]
    assert not pretrained_collapse_claims(slow, **kw)["pure_collapses_in_every_model"]
    assert pretrained_collapse_claims(slow, **{**kw, "max_layer_fraction": 1.0})["pure_collapses_in_every_model"]


def test_pretrained_collapse_is_slower_than_init_only_by_the_configured_factor():
    kw = {"layer": REPORT["rank_collapse"]["layer"], "min_factor": REPORT["pretrained_collapse"]["slower_factor"]}
    ds = synthetic_pretrained([0.9, 0.5, 0.3, 0.1])  # init: 0.6 everywhere
    ds["residual_ratio"].loc[{"weights": "init", "variant": "SAN"}] = 1e-3
    out = pretrained_slower_claims({"m": ds}, **kw)
    assert out["slower_in_every_model"] and np.isclose(out["smallest_factor"], 300)
    ds["residual_ratio"].loc[{"weights": "init", "variant": "SAN"}] = 0.1  # pretrained only 3x above: not slower
    assert not pretrained_slower_claims({"m": ds}, **kw)["slower_in_every_model"]
    assert pretrained_slower_claims({"m": ds}, **kw, causal=("m",))["slower_in_every_model"] is None, "nothing judged"


def _products(longest: float) -> xr.Dataset:
    rank1 = np.array([[0.5, 0.5], [1e-2, 1e-2], [longest, longest]])[None]
    return xr.Dataset(
        {"rank1_residual": (("weights", "depth", "path"), rank1)}, coords={"weights": ["init"], "depth": [1, 2, 3]}
    )


def test_attention_products_must_shrink_by_the_configured_ratio():
    assert attention_product_claims({"m": _products(1e-6)}, **REPORT["attention_products"])[
        "longer_paths_closer_to_rank1"
    ]
    # a decrease, but by less than max_ratio: fails
    assert not attention_product_claims({"m": _products(0.4)}, **REPORT["attention_products"])[
        "longer_paths_closer_to_rank1"
    ]
    assert attention_product_claims({"m": _products(0.4)}, max_ratio=0.9)["longer_paths_closer_to_rank1"]


def _circle(pure: int, skip: int) -> pd.DataFrame:
    return pd.DataFrame(
        {"variant": ["SAN", "SAN+skip"], "hidden_dim": [8, 8], "n_seeds": [10, 10], "n_collapsed": [pure, skip]}
    )


def test_circle_claim_needs_pure_collapse_in_most_runs_and_few_with_skips():
    assert circle_claims(_circle(9, 1), **REPORT["circle"])["pure_collapses_more"]
    assert not circle_claims(_circle(3, 1), **REPORT["circle"])["pure_collapses_more"], "pure collapses too rarely"
    assert not circle_claims(_circle(9, 8), **REPORT["circle"])["pure_collapses_more"], "skips collapse too"


def test_the_three_rank_collapse_verdicts_leave_causal_decoders_out_alike():
    """One rule for causal decoders: a causal model that would fail each verdict changes none of them."""
    enc = synthetic_pretrained([0.9, 0.1, 1e-4, 1e-9, 1e-9, 1e-9])
    enc["residual_ratio"].loc[{"weights": "init", "variant": ["SAN", "SAN+MLP"]}] = 1e-8
    enc["residual_ratio"].loc[{"weights": "init", "variant": "SAN", "layer": 0}] = 0.9
    dec = synthetic_pretrained([0.9, 0.9, 0.9, 0.9, 0.9, 0.9])  # never collapses, not slower than init by 10x
    results, causal = {"enc": enc, "dec": dec}, ("dec",)
    p = REPORT["pretrained_collapse"]
    layer = REPORT["rank_collapse"]["layer"]
    init = rank_collapse_claims(results, **REPORT["rank_collapse"], causal=causal)
    fast = pretrained_collapse_claims(
        results, threshold=p["threshold"], max_layer_fraction=p["max_layer_fraction"], causal=causal
    )
    slower = pretrained_slower_claims(results, layer=layer, min_factor=p["slower_factor"], causal=causal)
    assert init["causal"] == fast["causal"] == slower["causal"] == ["dec"]
    assert init["judged"] == fast["judged"] == slower["judged"] == ["enc"]
    assert fast["pure_collapses_in_every_model"] is True
    counted = pretrained_collapse_claims(results, threshold=p["threshold"], max_layer_fraction=p["max_layer_fraction"])
    assert counted["pure_collapses_in_every_model"] is False, "the decoder alone fails it when counted"


def test_claims_on_zero_evidence_are_not_judged():
    """No model, no product, no run: every verdict says "not judged" (None), never a pass or a fail."""
    assert rank_collapse_claims({}, **REPORT["rank_collapse"])["pure_collapses"] is None
    assert rank_collapse_claims({}, **REPORT["rank_collapse"])["skip_survives"] is None
    kw = {"threshold": 1e-3, "max_layer_fraction": 0.5}
    assert pretrained_collapse_claims({}, **kw)["pure_collapses_in_every_model"] is None
    assert attention_product_claims({}, **REPORT["attention_products"])["longer_paths_closer_to_rank1"] is None
    empty = pd.DataFrame({"variant": ["SAN"], "hidden_dim": [8], "n_seeds": [0], "n_collapsed": [0]})
    out = circle_claims(empty, **REPORT["circle"])
    assert out["pure_collapses_more"] is None and out["verdicts"][0]["verdict"] == "not judged"


def test_circle_claim_needs_a_margin_beyond_the_seed_spread():
    """9/10 against 1/10 clears a margin of 0.2 after two binomial standard errors; 6/10 against 4/10 (a 0.2 lead,
    within the spread) does not, though both fractions meet their thresholds."""
    cfg = REPORT["circle"]
    assert circle_claims(_circle(9, 1), **cfg)["pure_collapses_more"] is True
    close = circle_claims(_circle(6, 4), **cfg)
    assert close["pure_collapses_more"] is False and close["difference"] == pytest.approx(0.2)
    assert circle_claims(_circle(6, 4), **{**cfg, "margin": 0.0, "sigmas": 0.0})["pure_collapses_more"] is True


def _rows(out: dict) -> dict[str, dict]:
    return {r["key"]: r for r in out["verdicts"]}


def test_rank_collapse_control_is_the_skip_variants():
    """Pure attention below the threshold by the layer; the skip variants (0.4 at layer 2) through the same test
    fail, so the row holds; skip variants that collapse as fast leave the test without power."""
    row = _rows(rank_collapse_claims({"m": synthetic_rank_collapse(2e-7, 0.3)}, **REPORT["rank_collapse"]))[
        "pure_collapses"
    ]
    assert row["kind"] == "scientific" and row["form"] == "universal"
    assert row["positive_control"]["fails_as_it_must"] is True and row["verdict"] == "holds"
    assert row["margin"] == pytest.approx(np.log10(REPORT["rank_collapse"]["threshold"] / 2e-7))
    fast = synthetic_rank_collapse(2e-7, 0.3)
    fast["residual_ratio"].loc[{"variant": ["SAN+skip", "transformer"], "layer": 2}] = 1e-8
    row = _rows(rank_collapse_claims({"m": fast}, **REPORT["rank_collapse"]))["pure_collapses"]
    assert row["holds"] is True and row["verdict"] == "no power"


def test_pretrained_controls_are_the_full_transformer():
    p = REPORT["pretrained_collapse"]
    kw = {"threshold": p["threshold"], "max_layer_fraction": p["max_layer_fraction"]}
    fast = {"m": synthetic_pretrained([0.9, 0.1, 1e-4, 1e-9, 1e-9, 1e-9])}  # the transformer stays at 0.6 / 0.5
    row = _rows(pretrained_collapse_claims(fast, **kw))["pure_collapses_in_every_model"]
    assert row["positive_control"]["fails_as_it_must"] is True and row["verdict"] == "holds"
    both = {"m": synthetic_pretrained([0.9, 0.1, 1e-4, 1e-9, 1e-9, 1e-9])}
    both["m"]["residual_ratio"].loc[{"weights": "pretrained", "variant": "transformer", "layer": [2, 3, 4, 5]}] = 1e-9
    assert _rows(pretrained_collapse_claims(both, **kw))["pure_collapses_in_every_model"]["verdict"] == "no power"

    slow_kw = {"layer": REPORT["rank_collapse"]["layer"], "min_factor": p["slower_factor"]}
    ds = synthetic_pretrained([0.9, 0.5, 0.3, 0.1])
    ds["residual_ratio"].loc[{"weights": "init", "variant": "SAN"}] = 1e-3
    row = _rows(pretrained_slower_claims({"m": ds}, **slow_kw))["slower_in_every_model"]
    # the transformer: 0.6 pretrained against 0.6 at init, a factor 1
    assert row["positive_control"]["fails_as_it_must"] is True and row["verdict"] == "holds"
    ds["residual_ratio"].loc[{"weights": "init", "variant": "transformer"}] = 1e-3
    assert _rows(pretrained_slower_claims({"m": ds}, **slow_kw))["slower_in_every_model"]["verdict"] == "no power"


def test_attention_products_control_exchanges_the_path_lengths():
    row = _rows(attention_product_claims({"m": _products(1e-6)}, **REPORT["attention_products"]))
    row = row["longer_paths_closer_to_rank1"]
    assert row["positive_control"]["fails_as_it_must"] is True and row["verdict"] == "holds"
    # residuals that do not depend on the length pass in either order with a ratio of 1: no power
    flat = attention_product_claims({"m": _products(0.5)}, max_ratio=1.0)
    assert _rows(flat)["longer_paths_closer_to_rank1"]["verdict"] == "no power"


def test_circle_control_is_the_skip_variants_through_the_pure_test():
    row = _rows(circle_claims(_circle(9, 1), **REPORT["circle"]))["pure_collapses_more"]
    assert row["positive_control"]["fails_as_it_must"] is True and row["verdict"] == "holds"
    # skip variants collapsing in half their runs pass pure attention's "at least half" as well
    loose = {**REPORT["circle"], "margin": 0.0}
    row = _rows(circle_claims(_circle(10, 5), **loose))["pure_collapses_more"]
    assert row["holds"] is True and row["verdict"] == "no power"


def test_check_config_names_the_keys():
    from san.experiments import check_report as check_config

    check_config(REPORT)
    with pytest.raises(ValueError, match="report.circle.skip_fraction_max"):
        check_config({**REPORT, "circle": {**REPORT["circle"], "skip_fraction_max": 0.6}})
    with pytest.raises(ValueError, match="report.rank_collapse.floor"):
        check_config({**REPORT, "rank_collapse": {**REPORT["rank_collapse"], "floor": 1e-4}})
    with pytest.raises(ValueError, match="report.paths.seeds.min_share"):
        check_config({**REPORT, "paths": {**REPORT["paths"], "seeds": {"rule": "every_seed", "min_share": 0.5}}})
    with pytest.raises(ValueError, match="report.theorem.negative_control_log10_gamma"):
        check_config({**REPORT, "theorem": {**REPORT["theorem"], "negative_control_log10_gamma": -1.0}})
