"""The claims contract (san.core.verdicts): the row constructor, the four printed states, the one spread and margin
rule, the power scan, and the verdict table split by kind; the report's loop over the registered wings."""

import math

import numpy as np
import pytest

from san.core import verdicts as V


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


def test_power_is_the_largest_wrongness_that_still_passes():
    assert V.largest_passing(lambda s: s < 0.25, [0.0, 0.1, 0.2, 0.3, 0.4]) == 0.2
    assert V.largest_passing(lambda s: False, [0.0, 0.1]) is None


def test_rejudged_rows_keep_the_no_power_rule():
    row = _row(True, _control(True))
    assert V.rejudged(row, False)["verdict"] == "fails"
    assert V.rejudged(_row(False, _control(True)), True)["verdict"] == "no power"


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
    assert names == ["rank_collapse", "series", "circle", "paths", "theory", "propagation", "vision"]
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
