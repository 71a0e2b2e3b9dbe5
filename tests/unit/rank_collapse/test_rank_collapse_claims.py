"""The rank-collapse wing's Fig. 2 and appendix rows, each on data built here: where the claim holds and its
near-miss control fails (a numeric power), where the control holds too ("no power"), and where the claim fails;
the causal decoders left out alike, zero evidence not judged, and every row re-derived from its own numbers."""

import json

import numpy as np
import pytest
import xarray as xr

from san.claims import verdicts as V
from san.rank_collapse.claims import (
    attention_product_claims,
    pretrained_collapse_claims,
    pretrained_slower_claims,
    rank_collapse_claims,
)

from helpers import default_config

REPORT = default_config()["report"]
RC = REPORT["rank_collapse"]
P = REPORT["pretrained_collapse"]
VARIANTS = ["SAN", "SAN+MLP", "SAN+skip", "transformer"]


def _model(curves: dict[str, list[float]], other: float = 0.6) -> xr.Dataset:
    """One model's ``residual_ratio`` (two identical samples): the SAN curve of each weight set in ``curves``
    (SAN+MLP follows SAN at init), every other variant at ``other``."""
    weights = list(curves)
    layers = len(next(iter(curves.values())))
    data = np.full((len(weights), 4, layers, 2), other)
    for i, w in enumerate(weights):
        data[i, 0] = np.asarray(curves[w])[:, None]
        if w == "init":
            data[i, 1] = data[i, 0]
    return xr.Dataset(
        {"residual_ratio": (("weights", "variant", "layer", "sample"), data)},
        coords={"weights": weights, "variant": VARIANTS, "layer": range(layers)},
    )


def _row(out: dict) -> dict:
    return out["verdicts"][0]


def _init_row(*curves: list[float], causal: tuple[str, ...] = (), **report) -> dict:
    results = {f"m{i}": _model({"init": c}) for i, c in enumerate(curves)}
    return rank_collapse_claims(results, **{**RC, **report}, causal=causal)


# ------------------------------------------------------------------------------------------ Fig. 2 at initialisation


#: r_(l+1) = r_l^3 / 2 from 0.3: the theorem's cubic rate (contraction exponent 3), at the float floor by layer 4
CUBIC = [0.9, 0.3, 0.3**3 / 2, (0.3**3 / 2) ** 3 / 2, 1e-16, 1e-16]
#: r_(l+1) = 0.02 r_l: an exponential decay at a steep factor (exponent 1), below 1e-3 by layer 2 all the same
STEEP = [0.9 * 0.02**layer for layer in range(6)]


def _rows(out: dict) -> dict[str, dict]:
    return {r["key"]: r for r in out["verdicts"]}


def test_doubly_exponential_holds_on_a_cubic_rate_and_its_exponential_control_fails():
    row = _rows(_init_row(CUBIC))["pure_collapses"]
    assert row["verdict"] == "holds" and row["value"] == pytest.approx(3.0)
    pc = row["positive_control"]
    assert pc["key"] == "report.rank_collapse.exponential_control" and pc["verdict"] == "fails"
    assert pc["measured_value"] == pytest.approx(1.0), "the fitted exponential decay has exponent 1"
    # moved s of the way in log, the exponent falls from 3 toward 1; it clears 2 until about half way
    assert 0.3 <= pc["power"] < 1.0
    print(f"pure_collapses: power {pc['power']}")


def test_doubly_exponential_fails_on_an_exponential_decay_that_the_layer_test_passes():
    """The old reading of Fig. 2 ("below 1e-3 by layer 2") passes a steep exponential decay; the rate row does
    not."""
    rows = _rows(_init_row(STEEP))
    assert rows["pure_collapses"]["verdict"] == "fails" and rows["pure_collapses"]["value"] == pytest.approx(1.0)
    assert rows["pure_falls_by_layer"]["verdict"] == "holds" and rows["pure_falls_by_layer"]["kind"] == V.DEMONSTRATION


def test_doubly_exponential_without_power_when_its_control_barely_moves_the_data():
    row = _rows(_init_row(CUBIC, exponential_control=0.05))["pure_collapses"]
    assert row["holds"] is True and row["positive_control"]["verdict"] == "holds" and row["verdict"] == "no power"


def test_doubly_exponential_fails_in_one_model_and_names_it():
    row = _rows(_init_row(CUBIC, STEEP))["pure_collapses"]
    assert row["verdict"] == "fails" and row["item"] == "m1 init" and row["positive_control"]["power"] is None


def test_a_curve_too_fast_to_fit_leaves_the_rate_not_judged():
    # one layer between the limit and the floor: no pair of pairs to fit a slope from
    row = _rows(_init_row([0.9, 1e-3, 1e-16, 1e-16]))["pure_collapses"]
    assert row["verdict"] == "not judged" and row["evidence"] == 0


def test_the_decoders_are_judged_by_wu_et_als_exponential_rate_not_the_papers():
    exponential = [0.9 * 0.6**layer for layer in range(16)]
    power_law = [0.9 * (layer + 1.0) ** -4 for layer in range(16)]
    out = _init_row(CUBIC, exponential, causal=("m1",))
    rows = _rows(out)
    assert rows["pure_collapses"]["verdict"] == "holds" and out["judged"] == ["m0"] and out["causal"] == ["m1"]
    wu = rows["causal_collapses_exponentially"]
    assert wu["verdict"] == "holds" and wu["value"] == pytest.approx(0.5) and wu["item"] == "m1 init"
    assert wu["positive_control"]["verdict"] == "fails", "a power law's later half carries less of the fall"
    assert wu["positive_control"]["measured_value"] == pytest.approx(np.log(2) / np.log(15), rel=0.2)
    print(f"causal_collapses_exponentially: power {wu['positive_control']['power']}")
    slows = _rows(_init_row(CUBIC, power_law, causal=("m1",)))["causal_collapses_exponentially"]
    assert slows["verdict"] == "fails"
    assert _rows(_init_row(CUBIC))["causal_collapses_exponentially"]["verdict"] == "not judged"


def test_the_rate_table_reads_each_rate_off_its_curve():
    out = _init_row(CUBIC, STEEP)
    assert out["rate"]["m0"]["init"]["exponent"] == pytest.approx(3.0)
    steep = out["rate"]["m1"]["init"]
    assert steep["exponent"] == pytest.approx(1.0) and steep["factor"] == pytest.approx(0.02)
    assert steep["late_share"] == pytest.approx(0.5) and steep["r2"] == pytest.approx(1.0)


def test_fig2_layer_test_fails_above_the_threshold_in_one_model():
    out = _init_row([0.6, 0.1, 1e-7, 1e-16], [0.6, 0.1, 5e-3, 1e-4])
    row = _rows(out)["pure_falls_by_layer"]
    assert row["verdict"] == "fails" and "m1 SAN" in row["detail"]
    assert out["pure_max"] == pytest.approx(5e-3)


def test_causal_models_stay_out_of_the_papers_rows():
    enc, dec = [0.6, 0.1, 1e-7, 1e-16], [0.6, 0.5, 0.4, 0.3]
    assert _rows(_init_row(enc, dec))["pure_falls_by_layer"]["verdict"] == "fails"
    out = _init_row(enc, dec, causal=("m1",))
    assert _rows(out)["pure_falls_by_layer"]["verdict"] == "holds" and out["causal"] == ["m1"]


def test_the_skip_variants_stay_above_the_floor_or_fail_the_regression_row():
    assert _rows(_init_row([0.6, 0.1, 1e-7, 1e-16]))["skip_survives"]["verdict"] == "holds"
    low = rank_collapse_claims({"m": _model({"init": [0.6, 0.1, 1e-7, 1e-16]}, other=0.01)}, **RC)
    assert low["skip_survives"] is False and _rows(low)["skip_survives"]["kind"] == V.REGRESSION


# -------------------------------------------------------------------------------------------- pretrained weights


def _pretrained(curve: list[float]) -> dict[str, xr.Dataset]:
    return {"m": _model({"init": [0.6] * len(curve), "pretrained": curve})}


def _fast(results, **kw) -> dict:
    kw = {"threshold": P["threshold"], "max_layer_fraction": P["max_layer_fraction"],
          "plateau_control": P["plateau_control"], **kw}  # fmt: skip
    return pretrained_collapse_claims(results, **kw)


def test_still_fast_holds_where_a_plateau_after_the_first_block_never_collapses():
    # below 1e-3 first at layer 2 of 5, crossing it 2/3 of the way from layer 1 (log 0.1 -> log 1e-4): at 1.67 / 5;
    # a plateau at r_1 = 0.1 never falls below it
    out = _fast(_pretrained([0.9, 0.1, 1e-4, 1e-9, 1e-9, 1e-9]))
    row = _row(out)
    assert row["verdict"] == "holds" and row["value"] == pytest.approx((1 + 2 / 3) / 5) and out["within_layers"] == 2
    assert row["positive_control"]["measured_value"] == pytest.approx(6 / 5), "never: counted at depth + 1"
    # moved toward the plateau the crossing passes layer 2 at s = 1/3 and 2.5 (half the depth) at s = 7/11
    power = row["positive_control"]["power"]
    assert power == pytest.approx(0.6)
    print(f"pure_collapses_in_every_model: power {power}")


def test_still_fast_has_no_power_where_the_first_block_already_collapses():
    row = _row(_fast(_pretrained([0.9, 1e-4, 1e-9, 1e-9, 1e-9, 1e-9])))
    assert row["holds"] is True and row["verdict"] == "no power"


@pytest.mark.parametrize("depth", [4, 6, 12])
def test_the_interpolated_crossing_judges_as_the_first_layer_below_a_whole_number_of_layers(depth):
    """Below half of an even depth the crossing lies within it exactly when the first layer below does."""
    from san.rank_collapse.pretrained_claims import crossing

    rng = np.random.default_rng(depth)
    for _ in range(200):
        curve = np.cumprod(rng.uniform(0.01, 1.0, depth + 1))
        first = np.flatnonzero(curve < 1e-3)
        old = bool(first.size) and first[0] <= depth // 2
        at = crossing(curve, 1e-3)
        assert old == (at is not None and at < depth // 2), curve


def test_still_fast_fails_for_a_slow_or_never_collapsing_model():
    slow = _row(_fast(_pretrained([0.9, 0.5, 0.1, 0.05, 2e-3, 5e-4])))  # crossing half way through block 5 of 5
    assert slow["verdict"] == "fails" and slow["value"] == pytest.approx(4.5 / 5)
    assert _row(_fast(_pretrained([0.9, 0.5, 0.1, 0.05, 2e-3, 5e-4]), max_layer_fraction=1.0))["holds"] is True
    never = _fast(_pretrained([0.9, 0.5, 0.4]))
    assert _row(never)["verdict"] == "fails" and never["within_layers"] is None


def _slower(init: list[float], pre: list[float], **kw) -> dict:
    kw = {"layer": RC["layer"], "min_factor": P["slower_factor"], "init_rate_control": P["init_rate_control"], **kw}
    return pretrained_slower_claims({"m": _model({"init": init, "pretrained": pre})}, **kw)


def test_slower_holds_where_the_init_rate_from_the_pretrained_start_is_not_slower():
    # factor 0.3 / 1e-3 = 300 at layer 2; at the init rate from the pretrained layer 0 (both 0.6): factor 1
    out = _slower([0.6, 1e-2, 1e-3], [0.6, 0.4, 0.3])
    row = _row(out)
    assert row["verdict"] == "holds" and out["smallest_factor"] == pytest.approx(300)
    assert row["positive_control"]["measured_value"] == pytest.approx(1.0)
    # log10 300 (1 - s) > 1 up to s = 0.596
    power = row["positive_control"]["power"]
    assert power == pytest.approx(0.55)
    print(f"slower_in_every_model: power {power}")


def test_slower_has_no_power_where_the_embedding_output_alone_explains_the_factor():
    # the pretrained layer 0 is already 200x the init one: the init rate from there gives a factor of 200
    row = _row(_slower([3e-3, 2e-3, 1e-3], [0.6, 0.4, 0.3]))
    assert row["holds"] is True and row["verdict"] == "no power"


def test_slower_fails_below_the_factor_and_is_not_judged_for_decoders():
    assert _row(_slower([0.6, 0.3, 0.1], [0.6, 0.4, 0.3]))["verdict"] == "fails"
    kw = {"layer": RC["layer"], "min_factor": P["slower_factor"], "init_rate_control": P["init_rate_control"]}
    causal = pretrained_slower_claims({"m": _model({"init": [0.6] * 3, "pretrained": [0.6] * 3})}, **kw, causal=("m",))
    assert _row(causal)["verdict"] == "not judged" and causal["judged"] == []


def test_the_pretrained_verdicts_leave_causal_decoders_out_alike():
    """One rule for causal decoders: a causal model that would fail each verdict changes none of them."""
    enc = _model({"init": [0.6, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6], "pretrained": [0.9, 0.1, 1e-4, 1e-9, 1e-9, 1e-9]})
    dec = _model({"init": [0.9] * 6, "pretrained": [0.9] * 6})
    results, causal = {"enc": enc, "dec": dec}, ("dec",)
    fast = _fast(results, causal=causal)
    slower = pretrained_slower_claims(results, layer=RC["layer"], min_factor=P["slower_factor"],
                                      init_rate_control=P["init_rate_control"], causal=causal)  # fmt: skip
    assert fast["causal"] == slower["causal"] == ["dec"] and fast["judged"] == slower["judged"] == ["enc"]
    assert fast["pure_collapses_in_every_model"] is True
    assert _fast(results)["pure_collapses_in_every_model"] is False, "the decoder alone fails it when counted"


# --------------------------------------------------------------------------------------------- attention products


def _products(single: list[float], longest: float) -> dict[str, xr.Dataset]:
    """Rank-1 residuals of paths of depth 1 (``single``), 2 and 3 (``longest``, every path)."""
    n = len(single)
    rank1 = np.array([single, [1e-2] * n, [longest] * n])[None]
    ds = xr.Dataset(
        {"rank1_residual": (("weights", "depth", "path"), rank1)}, coords={"weights": ["init"], "depth": [1, 2, 3]}
    )
    return {"m": ds}


def test_longer_paths_hold_where_the_best_single_factor_is_far_from_rank_one():
    out = attention_product_claims(_products([0.5] * 8, 1e-6), **REPORT["attention_products"])
    row = _row(out)
    assert row["verdict"] == "holds" and row["value"] == pytest.approx(2e-6)
    assert row["positive_control"]["measured_value"] == pytest.approx(1.0), "the best of 3 factors is 0.5 too"
    # log10(1e-6 (1 - s) ... ): ratio below 0.1 up to s = 0.8245
    power = row["positive_control"]["power"]
    assert power == pytest.approx(0.8)
    print(f"longer_paths_closer_to_rank1: power {power}")


def test_longer_paths_have_no_power_where_some_single_matrices_are_rank_one_already():
    # a quarter of the single matrices at 1e-4: the best of 3 factors (the 1/4 quantile) is 0.1 % of the median
    out = attention_product_claims(_products([1e-4] * 3 + [0.5] * 5, 1e-6), **REPORT["attention_products"])
    assert _row(out)["holds"] is True and _row(out)["verdict"] == "no power"


def test_longer_paths_fail_by_less_than_the_ratio():
    assert _row(attention_product_claims(_products([0.5] * 8, 0.4), **REPORT["attention_products"]))["holds"] is False
    loose = attention_product_claims(_products([0.5] * 8, 0.4), max_ratio=0.9, best_factor_control=1.0)
    assert _row(loose)["holds"] is True


# ------------------------------------------------------------------------------------------- evidence, config


def test_claims_on_zero_evidence_are_not_judged():
    """No model, no product: every verdict says "not judged" (None), never a pass or a fail."""
    assert rank_collapse_claims({}, **RC)["pure_collapses"] is None
    assert rank_collapse_claims({}, **RC)["skip_survives"] is None
    assert _fast({})["pure_collapses_in_every_model"] is None
    assert attention_product_claims({}, **REPORT["attention_products"])["longer_paths_closer_to_rank1"] is None


def test_every_row_is_rederived_from_its_own_numbers():
    rows = [
        *_init_row([0.6, 0.1, 1e-7, 1e-16])["verdicts"],
        *_init_row(CUBIC, [0.9 * 0.6**layer for layer in range(16)], causal=("m1",))["verdicts"],
        *_init_row(STEEP, [0.9 * (layer + 1.0) ** -4 for layer in range(16)], causal=("m1",))["verdicts"],
        *_init_row(CUBIC, exponential_control=0.05)["verdicts"],
        _row(_init_row([0.6, 0.1, 5e-3, 1e-4])),
        _row(_fast(_pretrained([0.9, 0.1, 1e-4, 1e-9, 1e-9, 1e-9]))),
        _row(_fast(_pretrained([0.9, 0.5, 0.4]))),
        _row(_slower([0.6, 1e-2, 1e-3], [0.6, 0.4, 0.3])),
        _row(_slower([3e-3, 2e-3, 1e-3], [0.6, 0.4, 0.3])),
        _row(attention_product_claims(_products([0.5] * 8, 1e-6), **REPORT["attention_products"])),
        _row(rank_collapse_claims({}, **RC)),
    ]
    for r in rows:
        r = json.loads(json.dumps(r))
        assert V.rederive(r) == [], r["key"]
        if r["kind"] == V.SCIENTIFIC:
            assert r["positive_control"]["key"].startswith("report.") and r["threshold"]["key"].startswith("report.")
            assert V.rederive({**r, "verdict": "holds" if r["verdict"] != "holds" else "fails"})


def test_check_config_names_the_keys():
    from san.experiments import check_report as check_config

    check_config(REPORT)
    with pytest.raises(ValueError, match="report.circle.skip_fraction_max"):
        check_config({**REPORT, "circle": {**REPORT["circle"], "skip_fraction_max": 0.6}})
    with pytest.raises(ValueError, match="report.rank_collapse.floor"):
        check_config({**REPORT, "rank_collapse": {**RC, "floor": 1e-4}})
    with pytest.raises(ValueError, match="report.rank_collapse.exponent_limit"):
        check_config({**REPORT, "rank_collapse": {**RC, "exponent_limit": 1e-14}})
    for section, key in (("rank_collapse", "exponential_control"), ("rank_collapse", "power_law_control"),
                         ("pretrained_collapse", "plateau_control"),
                         ("pretrained_collapse", "init_rate_control"), ("attention_products", "best_factor_control"),
                         ("first_token_sink", "random_token_control")):  # fmt: skip
        with pytest.raises(ValueError, match=f"report.{section}.{key} = 0"):
            check_config({**REPORT, section: {**REPORT[section], key: 0}})
    with pytest.raises(ValueError, match="report.paths.seeds.min_share"):
        check_config({**REPORT, "paths": {**REPORT["paths"], "seeds": {"rule": "every_seed", "min_share": 0.5}}})
    with pytest.raises(ValueError, match="report.theorem.negative_control_log10_gamma"):
        check_config({**REPORT, "theorem": {**REPORT["theorem"], "negative_control_log10_gamma": -1.0}})


def test_the_exponent_threshold_prints_its_history():
    row = _rows(_init_row(CUBIC))["pure_collapses"]
    assert "threshold set to 2, the midpoint" in row["detail"], "config's report.rank_collapse.threshold_notes"
    assert "threshold set" not in _rows(_init_row(CUBIC, threshold_notes={}))["pure_collapses"]["detail"]


def test_the_fig2_table_states_the_rate_verdicts_under_it():
    from san.rank_collapse.tables import rate_line

    out = _init_row(CUBIC, STEEP, [0.9 * 0.6**layer for layer in range(16)], causal=("m2",))
    section = json.loads(json.dumps(out))
    line = rate_line(section)
    assert "`rank_collapse.pure_collapses`: exponent at least 2 in every bidirectional model, medians 1 to 3" in line
    assert "model, medians 1 to 3): **fails**" in line, line
    assert "(Wu et al. 2024, `rank_collapse.causal_collapses_exponentially`): **holds**" in line
    assert rate_line({"verdicts": []}) == "", "a summary from before the rate rows"


def test_a_row_on_quantised_weights_carries_the_drift_of_its_margin(monkeypatch):
    """The wing's rows judged again with a model's pretrained weights replaced by each requantised copy of its
    quantisation control: each row's ``drift`` is the largest change of its margin (a margin no larger prints within
    the drift); without a control the rows carry none."""
    import numpy as np
    import xarray as xr

    from san.claims.drift import WITHIN_DRIFT
    from san.rank_collapse import claims as module

    def result(weights, levels):
        data = np.array(levels, dtype=float)
        return xr.Dataset({"residual_ratio": (("weights", "layer"), data)}, coords={"weights": list(weights)})

    files = {"dec.nc": result(("init", "pretrained"), [[0.5], [0.30]]),
             "ctl.nc": result(("pretrained", "Q4_0", "Q8_0"), [[0.30], [0.18], [0.29]])}  # fmt: skip

    def sections(results, products, t):
        value = float(results["dec"]["residual_ratio"].sel(weights="pretrained").mean())
        row = {"key": "k", "kind": "scientific", "verdict": "holds", "margin": value - 0.2}
        return {"first_token_sink": {"verdicts": [row]}, "attention_products": None}

    monkeypatch.setattr(module, "_sections", sections)
    monkeypatch.setattr("san.core.storage.read_netcdf", lambda path: files[path])
    params = {"models": ["dec"], "attention_product_models": [], "report": {}}
    inputs = {"rank_collapse": ["dec.nc"], "attention_products": []}
    alone = module.claims(inputs, params)
    assert "drift" not in alone["first_token_sink"]["verdicts"][0]
    out = module.claims({**inputs, "quantisation": ["ctl.nc"]}, {**params, "quantisation_models": ["dec"]})
    row = out["first_token_sink"]["verdicts"][0]
    assert row["drift"] == pytest.approx(0.12) and row["margin"] == pytest.approx(0.1)
    assert row["verdict"] == WITHIN_DRIFT


@pytest.mark.slow
def test_every_pretrained_control_moves_with_the_data_it_tests():
    """The pretrained rows the tiny run cannot judge, on data where each holds: judged again on a seeded
    multiplicative perturbation of their results (:mod:`perturb`), every control's measured value moves, except the
    plateau's crossing, a layer count at its bound (a plateau that never crosses is counted at depth + 1)."""
    from perturb import perturbed_dataset

    rng = np.random.default_rng(0)
    enc = _model({"init": [0.6, 1e-2, 1e-3], "pretrained": [0.6, 0.4, 0.3]})
    cases = {
        "pretrained_collapse": (lambda r: _fast(r), _pretrained([0.9, 0.1, 1e-4, 1e-9, 1e-9, 1e-9])),
        "pretrained_slower": (lambda r: pretrained_slower_claims(r, layer=RC["layer"], min_factor=P["slower_factor"],
                                                                 init_rate_control=P["init_rate_control"]),
                              {"m": enc}),
        "attention_products": (lambda r: attention_product_claims(r, **REPORT["attention_products"]),
                               _products([0.5, 0.4, 0.6, 0.5], 1e-6)),
    }  # fmt: skip
    bounded = {"pretrained_collapse": 6 / 5}
    for name, (judge, results) in cases.items():
        before = _row(judge(results))
        after = _row(judge({m: perturbed_dataset(ds, rng) for m, ds in results.items()}))
        assert before["holds"] is True, name
        b, a = before["positive_control"]["measured_value"], after["positive_control"]["measured_value"]
        if name in bounded:
            assert b == a == pytest.approx(bounded[name]), name
        else:
            assert not np.isclose(a, b, rtol=1e-9, atol=0), f"{name}: control {b} does not move"
