"""The claims contract (san.claims.verdicts): the row constructor, the four printed states, the one spread and margin
rule, the power scan, and the verdict table split by kind; the report's loop over the registered wings."""

import math

import numpy as np
import pytest

from san.claims import verdicts as V


def _control(holds):
    return V.control("a wrong reference", 0.1, holds)


def _row(holds, control=None, kind=V.SCIENTIFIC, key="k"):
    return V.row(key, "a claim", kind=kind, form=V.QUANTITATIVE, source="a paper", holds=holds,
                 positive_control=control)  # fmt: skip


def test_a_scientific_row_holds_only_when_its_control_fails():
    assert _row(True, _control(False))["verdict"] == "holds"
    assert _row(True, _control(True))["verdict"] == "no power"
    assert _row(True, _control(None))["verdict"] == "not judged", "no evidence that the test can fail"
    assert _row(False, _control(True))["verdict"] == "fails"
    assert _row(None, _control(False))["verdict"] == "not judged"


def test_other_kinds_print_the_check_and_scientific_rows_need_a_control():
    assert _row(True, _control(True), kind=V.REGRESSION)["verdict"] == "holds"
    assert _row(True, kind=V.DEMONSTRATION)["verdict"] == "holds"
    with pytest.raises(ValueError, match="scientific verdict 'k' has no positive control"):
        _row(True)
    with pytest.raises(ValueError, match="verdict kind 'finding'"):
        _row(True, _control(False), kind="finding")
    with pytest.raises(ValueError, match="verdict form 'general'"):
        V.row("k", "s", kind=V.REGRESSION, form="general", source="p", holds=True)


def test_a_row_carries_its_value_margin_and_control():
    control = V.control("offset", 0.1, False, power=0.05, value=0.12)
    row = V.row("k", "s", kind=V.SCIENTIFIC, form=V.UNIVERSAL, source="p", holds=True, value=0.02, margin=0.03,
                test="t", detail="d", positive_control=control)  # fmt: skip
    assert {k: row[k] for k in ("key", "kind", "form", "source", "holds", "value", "margin", "test", "detail")} == {
        "key": "k", "kind": "scientific", "form": "universal", "source": "p", "holds": True, "value": 0.02,
        "margin": 0.03, "test": "t", "detail": "d",
    }  # fmt: skip
    assert row["positive_control"] == {
        "reference": "offset", "setting": 0.1, "verdict": "fails", "fails_as_it_must": True, "power": 0.05,
        "value": 0.12,
    }  # fmt: skip
    assert V.row("k", "s", kind=V.REGRESSION, form=V.UNIVERSAL, source="p", holds=True, value=math.nan)["value"] is None


def test_the_spread_is_the_standard_error_of_the_seed_mean():
    values = [0.1, 0.3, 0.2, np.nan]
    mean, se, n = V.spread(values)
    finite = np.array([0.1, 0.3, 0.2])
    assert n == 3 and mean == pytest.approx(0.2)
    assert se == pytest.approx(math.sqrt(((finite - 0.2) ** 2).sum() / 2) / math.sqrt(3))
    assert V.spread([0.4]) == (0.4, 0.0, 1)
    assert math.isnan(V.spread([])[0])


def test_the_margin_moves_the_value_towards_failing():
    # above: 0.5 - 2 x 0.1 - 0.2 = 0.1; below: 0.3 - (0.1 + 2 x 0.05) = 0.1
    assert V.margin(0.5, 0.1, 2.0, 0.2, above=True) == pytest.approx(0.1)
    assert V.margin(0.1, 0.05, 2.0, 0.3, above=False) == pytest.approx(0.1)
    # more noise never helps: the same value with a larger spread clears less
    assert V.margin(0.1, 0.2, 2.0, 0.3, above=False) < V.margin(0.1, 0.05, 2.0, 0.3, above=False)
    assert V.clears(0.1) is True and V.clears(0.0) is False and V.clears(math.nan) is None


def test_the_verdict_table_splits_rows_by_kind():
    sections = {
        "a": {"verdicts": [_row(True, _control(False), key="x"), _row(True, kind=V.REGRESSION, key="y")]},
        "b": {"verdicts": [_row(True, kind=V.DEMONSTRATION, key="z")]},
        "c": None,
    }
    table = V.collect(sections)
    assert {k: [r["claim"] for r in rows] for k, rows in table.items()} == {
        "scientific": ["a.x"], "regression": ["a.y"], "demonstration": ["b.z"],
    }  # fmt: skip
    assert V.verdict_of(sections["a"], "x") == "holds" and V.verdict_of(None, "x") == "not judged"
    with pytest.raises(KeyError, match="no verdict row 'w'"):
        V.verdict_of(sections["a"], "w")


def test_every_wing_answers_the_same_contract():
    import inspect

    from san.experiments import WINGS

    names = [wing.name for wing in WINGS]
    assert names == ["rank_collapse", "series", "circle", "paths", "theory", "propagation", "vision", "phenomena"]
    for wing in WINGS:
        assert list(inspect.signature(wing.spec.check_config).parameters) == ["config", "schemas"], wing.name
        assert list(inspect.signature(wing.claims.claims).parameters) == ["inputs", "params"], wing.name
        assert list(inspect.signature(wing.claims.check_config).parameters) == ["report"], wing.name
        for build in wing.tables.TABLES.values():
            assert list(inspect.signature(build).parameters) == ["summary", "data"], wing.name


def test_plots_do_not_import_claims():
    import ast
    from pathlib import Path

    import san

    for plots in Path(san.__file__).parent.glob("*/plots.py"):
        imported = [n.module for n in ast.walk(ast.parse(plots.read_text())) if isinstance(n, ast.ImportFrom)]
        assert not any(m and m.endswith(".claims") for m in imported), plots


# The one check: a statistic against a parametrised reference, its near-miss control and its power.


def _offset_check(gap: float, tolerance: float = 0.05, setting: float = 0.1, se: float = 0.0, evidence: int = 1):
    """A test "the data lie within ``tolerance`` of the theory": the data sit ``gap`` away from the theory, so
    against the theory moved by ``s`` they sit ``|gap - s|`` away."""
    return V.check(
        "gap", "the theory predicts the data", form=V.QUANTITATIVE, source="a paper", test="gap <= tolerance",
        statistic=lambda s: V.Measure(abs(gap - s), se, evidence),
        threshold=V.Threshold(tolerance, above=False, key="report.x.tolerance", sigmas=2.0),
        wrong=V.Wrong("the theory offset by {s:+g}", 0.0, setting, "report.x.offset", (0.0, 0.02, 0.04, 0.06, 0.08,
                                                                                       0.1, 0.12)),
    )  # fmt: skip


def test_the_check_holds_with_its_control_failing_and_prints_its_power():
    r = _offset_check(0.01)
    assert r["verdict"] == "holds" and r["holds"] is True
    assert r["margin"] == pytest.approx(0.04) and r["threshold"]["key"] == "report.x.tolerance"
    pc = r["positive_control"]
    assert pc["verdict"] == "fails" and pc["setting"] == 0.1 and pc["key"] == "report.x.offset"
    assert pc["measured_value"] == pytest.approx(0.09) and pc["margin"] == pytest.approx(-0.04)
    # |0.01 - s| <= 0.05 up to s = 0.06: the reference can move 0.06 before the test fails
    assert pc["power"] == pytest.approx(0.06) and pc["scan"][-1] == pytest.approx(0.08)
    assert pc["reference"] == "the theory offset by +0.1"


def test_data_that_fit_the_wrong_reference_too_print_no_power():
    # data halfway between the theory and its offset: both lie within the tolerance
    r = _offset_check(0.05, tolerance=0.06)
    assert r["holds"] is True and r["positive_control"]["verdict"] == "holds" and r["verdict"] == "no power"
    assert r["positive_control"]["power"] == pytest.approx(0.1)


def test_the_check_fails_and_is_not_judged_by_its_measure():
    assert _offset_check(0.2)["verdict"] == "fails" and _offset_check(0.2)["positive_control"]["power"] is None
    assert _offset_check(0.01, se=0.1)["verdict"] == "fails", "the spread moves the statistic towards failing"
    nothing = _offset_check(0.01, evidence=0)
    assert nothing["verdict"] == "not judged" and nothing["holds"] is None


def test_the_worst_item_decides_a_universal_claim():
    t = V.Threshold(1.0, above=True, key="k")
    items = [V.Measure(3.0, item="a"), V.Measure(1.5, item="b"), V.Measure(2.0, item="c")]
    assert V.worst(items, t) == V.Measure(1.5, 0.0, 3, "b")
    assert V.worst([*items, V.Measure(0.5, item="d"), V.Measure(math.nan, evidence=0)], t).item == "d"
    assert V.worst([*items, V.Measure(math.nan, evidence=0)], t).evidence == 0, "one item without evidence"
    assert V.worst([], t).evidence == 0


def test_thresholds_in_decades():
    below = V.Threshold(1e-3, above=False, key="k", log=True)
    assert below.margin(V.Measure(1e-5)) == pytest.approx(2.0)
    assert below.margin(V.Measure(0.0)) == math.inf, "a ratio of zero clears a 'below' claim"
    above = V.Threshold(10.0, above=True, key="k", log=True)
    assert above.margin(V.Measure(1000.0)) == pytest.approx(2.0) and math.isnan(above.margin(V.Measure(0.0)))


def test_every_verdict_is_rederived_from_its_row():
    import json

    for r in (
        _offset_check(0.01),
        _offset_check(0.05, tolerance=0.06),
        _offset_check(0.2),
        _offset_check(0.01, evidence=0),
    ):
        r = json.loads(json.dumps(r))
        assert V.rederive(r) == []
        flipped = {**r, "verdict": "holds" if r["verdict"] != "holds" else "fails"}
        assert V.rederive(flipped), "a printed verdict its numbers do not give"
    r = json.loads(json.dumps(_offset_check(0.01)))
    both = {**r, "holds": False, "verdict": "fails"}
    assert any("does not follow from its margin" in p for p in V.rederive(both))
    margin = {**r, "margin": 0.5}
    assert any("margin 0.5 does not follow" in p for p in V.rederive(margin))
    control = {**r, "positive_control": {**r["positive_control"], "verdict": "holds", "fails_as_it_must": False}}
    assert any("control's check" in p for p in V.rederive(control))
    power = {**r, "positive_control": {**r["positive_control"], "power": 1.0}}
    assert any("power 1.0 does not follow" in p for p in V.rederive(power))
    legacy = _row(True, _control(False))
    assert any("without the numbers of its check" in p for p in V.rederive(legacy))
    assert V.rederive(_row(True, kind=V.REGRESSION)) == []


def test_a_summary_is_rederived_section_by_section():
    sections = {"a": {"verdicts": [_offset_check(0.01)]}, "provenance": {"commit": "x"}}
    summary = {**sections, "verdicts": V.collect({"a": sections["a"]})}
    assert V.rederive_summary(summary) == []
    summary["verdicts"]["scientific"][0] = {**summary["verdicts"]["scientific"][0], "verdict": "no power"}
    problems = V.rederive_summary(summary)
    assert any("differs from the sections" in p for p in problems)


def test_a_wrong_reference_is_scanned_twice_the_way_to_its_setting():
    w = V.Wrong.toward("an exponential {s:g} of the way", 1.0, "report.k", steps=4)
    assert w.scan == pytest.approx((0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0)) and w.setting == 1.0
    assert V.Wrong.toward("x", 0.2, "k", right=0.0, steps=2).scan == pytest.approx((0.0, 0.1, 0.2, 0.3, 0.4))


def test_a_measurement_moves_towards_a_wrong_prediction():
    assert V.toward(1e-6, 1e-2, 0.5, log=True) == pytest.approx(1e-4)
    assert V.toward(0.2, 0.6, 0.25) == pytest.approx(0.3)
    assert V.toward(1e-6, 1e-2, 0.0, log=True) == pytest.approx(1e-6)


def test_a_measurement_is_itself_at_zero_and_the_prediction_at_one():
    """No round trip through a logarithm at the claim's own reference, and a wrong theory without a prediction
    (NaN) leaves the claim's reading untouched."""
    assert V.toward(0.3, math.nan, 0.0) == 0.3 and V.toward(1e-7, math.nan, 0.0, log=True) == 1e-7
    assert V.toward(0.0, 1e-3, 1.0, log=True) == 1e-3, "0 x log(0) is no NaN at the wrong theory itself"
    assert V.toward([0.1, 0.2], 0.5, 1.0).tolist() == [0.5, 0.5]
