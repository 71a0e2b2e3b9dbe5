"""Barbero et al.'s growth of sinks with model size, judged only within a family at several sizes
(``phenomena.size_ladders``), pair by pair, on synthetic context-length runs (per sequence, so the difference is
judged after standard errors over the same sequences), against the near miss of one sink profile over relative
depth for the whole family."""

from __future__ import annotations

import numpy as np
import pytest
from phenomena_results import REPORT, assert_rederived, context_result

from san.core.config import ConfigError
from san.phenomena.size import KEY, pairs, size_claims
from san.phenomena.spec import DECODER, ENCODER, check_config

R, SHARE = REPORT["phenomena"], REPORT["first_token_sink"]["share_threshold"]
KINDS = {"small": DECODER, "large": DECODER, "alone": DECODER, "enc": ENCODER}
#: per sequence length (16, 32, 64) and sequence (4), the attention on the first token of every layer and head: the
#: share of sink heads (above 0.3) of a sequence is 0 or 1
SOME = np.array([[0.1, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.1], [0.1, 0.1, 0.5, 0.1]])
ALL = np.array([[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]])
INIT = np.full((3, 4), 0.1)


def judge(small, large, ladders=(("small", "large"),)):
    results = {"small": context_result({"pretrained": small, "init": INIT}),
               "large": context_result({"pretrained": large, "init": INIT}),
               "alone": context_result({"pretrained": ALL, "init": INIT})}  # fmt: skip
    return size_claims(results, KINDS, R, SHARE, ladders)[KEY]


def test_the_pairs_of_a_ladder_skip_the_models_a_run_does_not_hold():
    assert pairs([["a", "b", "c"]], {"a": 1, "b": 1, "c": 1}) == [("a", "b"), ("b", "c")]
    assert pairs([["a", "b", "c"]], {"a": 1, "c": 1}) == [("a", "c")]
    assert pairs([["a", "b"]], {"a": 1}) == []


def test_a_larger_model_with_more_sink_heads_holds_and_the_same_share_fails():
    out = judge(SOME, ALL)
    row = out["row"]
    # per sequence at 64 tokens: shares 0, 0, 1, 0 against 1, 1, 1, 1: differences 1, 1, 0, 1
    assert row["verdict"] == "holds" and row["value"] == 0.75 and row["se"] == pytest.approx(0.25)
    assert row["item"] == "small -> large, 64 tokens" and row["evidence"] == 4
    assert row["positive_control"]["verdict"] == "fails" and row["positive_control"]["measured_value"] == 0.0
    assert "small 0.25 -> large 1.00 at 64 tokens (paired over 4 sequences; one pair)" in row["detail"]
    assert row["scope"]["covered"] is True and row["scope"]["sweep"] == ["model size within one family"]
    assert [i["item"] for i in row["items"]] == ["small -> large"] and row["items"][0]["value"] == 0.75
    assert out["cells"]["large"]["verdict"] == out["cells"]["small"]["verdict"] == "holds"
    assert out["cells"]["large"]["note"].startswith("small -> large: small 0.25 -> large 1.00")
    assert out["cells"]["alone"]["verdict"] == "not judged" and "no other size" in out["cells"]["alone"]["note"]
    assert out["cells"]["enc"]["verdict"] == "n/a"
    assert_rederived(row)


def test_a_larger_model_with_the_same_sinks_fails():
    row = judge(ALL, ALL)["row"]
    assert row["verdict"] == "fails" and row["value"] == 0.0 and row["margin"] < 0
    assert_rederived(row)


def test_a_smaller_shift_than_the_noise_fails():
    # differences 1, 0, 0, 0: mean 0.25, standard error 0.25, less than 2 standard errors above 0.05
    row = judge(np.array([[0.1] * 4, [0.1] * 4, [0.1, 0.5, 0.5, 0.5]]), ALL)["row"]
    assert row["value"] == 0.25 and row["verdict"] == "fails"
    assert_rederived(row)


def test_the_power_is_how_far_the_larger_model_can_move_toward_the_smaller():
    row = judge(np.full((3, 4), 0.1), ALL)["row"]
    # differences 1 on every sequence, no spread: (1 - s) > 0.05 below s = 0.95
    assert row["value"] == 1.0 and row["positive_control"]["power"] == pytest.approx(0.9)
    assert_rederived(row)


def test_without_two_sizes_of_one_family_the_claim_is_not_judged_with_what_it_needs():
    for ladders in ((), (("small", "missing"),)):
        out = judge(SOME, ALL, ladders)
        row = out["row"]
        assert row["verdict"] == "not judged" and row["holds"] is None and row["scope"]["covered"] is False
        assert "needs one family pretrained at two sizes" in row["detail"]
        assert out["cells"]["small"]["verdict"] == "not judged" and out["cells"]["enc"]["verdict"] == "n/a"
        assert_rederived(row)


def test_a_ladder_naming_an_undefined_model_is_refused_by_key():
    config = {"models": {"small": {}}, "phenomena": {"size_ladders": [["small", "typo"]]}}
    with pytest.raises(ConfigError, match=r"phenomena\.size_ladders\.0\.1.*'typo'"):
        check_config(config, None)


def by_layer(profile):
    """A context-length run whose pretrained first-token attention at the longest length is 0.5 (a sink) on the
    layers of ``profile`` that are True and 0.1 on the others, the same on every head and sequence."""
    ds = context_result({"pretrained": ALL, "init": INIT}, layers=len(profile))
    for name in ("first_token_attention_by_sample", "first_token_attention"):
        ds[name].values[0, -1, 1:] = np.where(np.asarray(profile), 0.5, 0.1).reshape(
            (-1,) + (1,) * (ds[name].values.ndim - 3)
        )
    return ds


def test_a_shallow_sink_profile_read_at_the_deeper_models_depths_leaves_no_power():
    # the smaller model: a sink in its first of 2 layers (share 0.5); read at the 4 relative depths of the larger,
    # that profile predicts 1, 1, 0.5, 0 (share 0.625), and the larger model measures 0.75: both clear 0.05 over 0.5
    results = {"small": by_layer([True, False]), "large": by_layer([True, True, True, False])}
    row = size_claims(results, {"small": DECODER, "large": DECODER}, R, SHARE, [["small", "large"]])[KEY]["row"]
    assert row["value"] == 0.25 and row["holds"] is True
    assert row["positive_control"]["measured_value"] == pytest.approx(0.125)
    assert row["verdict"] == "no power"
    assert "small's profile at large's relative depths 0.62" in row["detail"]
    assert_rederived(row)
