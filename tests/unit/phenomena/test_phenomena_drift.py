"""The quantisation control of the models x claims cells and the verdict rows (san.phenomena.drift): a cell whose
statistic (a row whose margin) requantising the weights moves across its threshold prints "within quantisation
drift", one it cannot move keeps its verdict, and verify re-derives either from its own numbers."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from phenomena_results import REPORT, text_result

from san.claims import verdicts as V
from san.claims.drift import WITHIN_DRIFT, apply_row_drift, as_pretrained, crosses, row_drift
from san.phenomena.claims import judge_all
from san.phenomena.drift import apply_drift, cell_drift, measure_table
from san.phenomena.tables import phenomena_table, quantisation_table
from san.report import published

#: a decoder whose massive ratio rises x12 at block 2 (20 -> 240, past the onset level 100) in one block and stays:
#: "appear abruptly" holds (the rise is at least x10 and carries all of its neighbourhood's, share 1 against 0.7)
ABRUPT = np.array([20.0, 20.0, 240.0, 240.0, 240.0, 240.0, 240.0, 240.0, 240.0])


def _curve(rise: float) -> np.ndarray:
    return np.where(np.arange(9) >= 2, 20.0 * rise, 20.0)


def _result() -> object:
    return text_result("decoder", {("pretrained", "transformer"): {"massive_ratio": ABRUPT}})


def _control(*rises: float) -> object:
    """The quantisation control's result: the weights (pretrained, the same curve) and one copy per rise."""
    weights = ("pretrained", *(f"Q{i}" for i in range(len(rises))))
    curves = {("pretrained", "transformer"): {"massive_ratio": ABRUPT}}
    curves |= {(w, "transformer"): {"massive_ratio": _curve(r)} for w, r in zip(weights[1:], rises, strict=True)}
    return text_result("decoder", curves, weights=weights)


def _judge(results):
    return judge_all(results, {}, {}, REPORT)["table"]


def test_crosses_reads_the_interval_around_the_statistic():
    assert crosses("holds", 12.0, 10.0, 4.0) == WITHIN_DRIFT
    assert crosses("fails", 8.0, 10.0, 2.0) == WITHIN_DRIFT, "on the threshold counts as reached"
    assert crosses("holds", 12.0, 10.0, 1.0) == "holds"
    assert crosses("no power", 12.0, 10.0, 3.0) == WITHIN_DRIFT
    for unknown in (None, float("nan")):
        assert crosses("holds", 12.0, 10.0, unknown) == "holds"
    assert crosses("not judged", 12.0, 10.0, 5.0) == "not judged" and crosses("n/a", None, None, 5.0) == "n/a"


def test_a_copy_judged_as_the_pretrained_weights_keeps_the_init_twin():
    result, control = _result(), _control(8.0)
    swapped = as_pretrained(result, control, "Q0")
    assert list(swapped["weights"].values) == ["init", "pretrained"] and swapped.attrs == result.attrs
    massive = swapped["massive_ratio"]
    np.testing.assert_allclose(massive.sel(weights="pretrained", variant="transformer").mean("sample"), _curve(8.0))
    np.testing.assert_array_equal(massive.sel(weights="init"), result["massive_ratio"].sel(weights="init"))


def test_a_rise_that_requantising_moves_across_x10_prints_within_the_drift():
    result = _result()
    drift = cell_drift("m", result, _control(8.0, 11.0), _judge)
    assert drift["massive_appear_abruptly"] == pytest.approx(1.0), "x8 is no massive rise (share 0), x11 is (1)"
    section = judge_all({"m": result}, {}, {}, REPORT)
    assert section["table"]["m"]["massive_appear_abruptly"]["verdict"] == "holds"
    apply_drift(section["table"], {"m": drift})
    cell = section["table"]["m"]["massive_appear_abruptly"]
    assert cell["verdict"] == WITHIN_DRIFT and cell["drift"] == pytest.approx(1.0)
    assert published.cell_problems({"phenomena": section}) == []


def test_a_rise_that_requantising_cannot_move_across_x10_keeps_its_verdict():
    result = _result()
    drift = cell_drift("m", result, _control(11.5, 12.5), _judge)
    assert drift["massive_appear_abruptly"] == pytest.approx(0.0), "x11.5 and x12.5: still one block's rise"
    section = judge_all({"m": result}, {}, {}, REPORT)
    apply_drift(section["table"], {"m": drift})
    assert section["table"]["m"]["massive_appear_abruptly"]["verdict"] == "holds"
    assert all(c["drift"] is None or c["drift"] >= 0 for c in section["table"]["m"].values())


def test_verify_re_derives_the_drift_state_from_the_cell():
    result = _result()
    section = judge_all({"m": result}, {}, {}, REPORT)
    apply_drift(section["table"], {"m": cell_drift("m", result, _control(8.0), _judge)})
    summary = {"phenomena": section}
    assert published.cell_problems(summary) == []
    forged = copy.deepcopy(summary)
    forged["phenomena"]["table"]["m"]["massive_appear_abruptly"]["verdict"] = V.HOLDS  # the drift hidden
    assert any("massive_appear_abruptly" in p for p in published.cell_problems(forged))
    forged = copy.deepcopy(summary)
    forged["phenomena"]["table"]["m"]["massive_appear_abruptly"]["drift"] = 0.1  # a drift edited down
    assert any("massive_appear_abruptly" in p for p in published.cell_problems(forged))


def test_the_table_explains_the_state_under_it():
    result = _result()
    section = judge_all({"m": result}, {}, {}, REPORT)
    apply_drift(section["table"], {"m": cell_drift("m", result, _control(8.0), _judge)})
    section["quantisation_models"] = ["m"]
    text = phenomena_table({"phenomena": section}, {})
    assert f"{WITHIN_DRIFT}: 1" in text and "the weights of m requantised" in text and "(m); the drift" in text


def test_a_control_without_a_copy_is_refused():
    with pytest.raises(ValueError, match="needs its 'pretrained' weights and a copy"):
        cell_drift("m", _result(), text_result("decoder", weights=("pretrained",)), _judge)


@pytest.mark.parametrize(
    ("models", "message"),
    [
        (["gone"], r"'phenomena.quantisation.models.0': model 'gone' is not defined under 'models'"),
        (["enc"], r"'phenomena.quantisation.models.0': model 'enc' has no pretrained weights"),
    ],
)
def test_the_control_names_only_defined_models_with_pretrained_weights(tmp_path, models, message):
    from san.core.config import ConfigError
    from san.phenomena.spec import check_config, quantisation_models

    config = {"rank_collapse": {"models": ["dec", "enc"]}, "vision": {"models": []},
              "models": {"dec": {"pretrained": {"source": "x"}}, "enc": {"init": {}}},
              "phenomena": {"quantisation": {"models": ["dec"]}}}  # fmt: skip
    check_config(config, tmp_path)
    other = {**config, "rank_collapse": {"models": ["enc"]}}
    check_config(other, tmp_path)
    assert quantisation_models(config) == ["dec"] and quantisation_models(other) == [], "a run without it leaves it out"
    with pytest.raises(ConfigError, match=message):
        check_config({**config, "phenomena": {"quantisation": {"models": models}}}, tmp_path)


def _margins(results):
    return {r["key"]: r.get("margin") for r in judge_all(results, {}, {}, REPORT)["verdicts"]}


def _row(section, key):
    return next(r for r in section["verdicts"] if r["key"] == key)


def test_a_row_whose_margin_requantising_moves_as_far_prints_within_the_drift():
    """The row's drift is the largest change of its margin over the copies judged in place of the weights, computed
    here from the margins themselves; a margin no larger prints within the drift, verify re-derives it, and the
    verdict table prints the drift beside the margin."""
    from san.claims.cells import margin_cell

    result, control = _result(), _control(8.0, 11.0)
    section = judge_all({"m": result}, {}, {}, REPORT)
    row = _row(section, "massive_appear_abruptly")
    assert row["verdict"] == V.HOLDS
    drift = row_drift({"m": result}, {"m": control}, _margins)
    reference = _margins({"m": as_pretrained(result, control, "pretrained")})["massive_appear_abruptly"]
    moved = [_margins({"m": as_pretrained(result, control, w)})["massive_appear_abruptly"] for w in ("Q0", "Q1")]
    assert drift["massive_appear_abruptly"] == pytest.approx(max(abs(m - reference) for m in moved))
    assert drift["massive_appear_abruptly"] >= abs(row["margin"]), "x8 moves the rise below x10: past the margin"
    apply_row_drift(section["verdicts"], drift)
    assert row["verdict"] == WITHIN_DRIFT and row["drift"] == drift["massive_appear_abruptly"]
    assert V.rederive(row) == []
    assert "(quantisation drift " in margin_cell(row)
    forged = {**row, "verdict": V.HOLDS}  # the drift hidden
    assert any("within quantisation drift" in p for p in V.rederive(forged))


def test_a_row_requantising_cannot_move_far_keeps_its_verdict_and_one_it_cannot_read_has_no_drift():
    result, control = _result(), _control(11.5, 12.5)
    section = judge_all({"m": result}, {}, {}, REPORT)
    drift = row_drift({"m": result}, {"m": control}, _margins)
    apply_row_drift(section["verdicts"], drift)
    row = _row(section, "massive_appear_abruptly")
    assert row["verdict"] == V.HOLDS and 0 <= row["drift"] < abs(row["margin"])
    assert V.rederive(row) == []
    # a copy identical to the weights moves no margin: a drift of 0 where the row is judged, none where it is not
    same = row_drift({"m": result}, {"m": _control(12.0)}, _margins)
    assert same["massive_appear_abruptly"] == 0.0
    unjudged = [r["key"] for r in section["verdicts"] if r.get("margin") is None]
    assert unjudged and all(same[k] is None for k in unjudged), same


def test_the_drift_table_is_the_relative_change_per_measure_and_layer():
    """measure_table against a direct recompute: per copy and measure, the largest |copy - weights| / |weights| of
    the unmodified model's means over the sequences, and its layer."""
    control = _control(8.0, 11.0)
    table = measure_table(control)
    assert set(table) == {"Q0", "Q1"}
    weights = ABRUPT
    for copy_name, rise in (("Q0", 8.0), ("Q1", 11.0)):
        relative = np.abs(_curve(rise) - weights) / weights
        entry = table[copy_name]["massive_ratio"]
        assert entry["relative"] == pytest.approx(relative.max())
        assert entry["layer"] == int(np.argmax(relative))
        assert entry["absolute"] == pytest.approx(np.abs(_curve(rise) - weights).max())
    section = judge_all({"m": _result()}, {}, {}, REPORT)
    section["quantisation"] = {"m": table}
    text = quantisation_table({"phenomena": section, "verdicts": {"scientific": []}}, {})
    assert "| m | float32 | Q0 |" in text and "massive ratio" in text and "nan" not in text
    assert "No quantisation control" in quantisation_table({"phenomena": {}}, {})
