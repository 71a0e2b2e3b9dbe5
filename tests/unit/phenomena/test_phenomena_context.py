"""Barbero et al.'s sinks growing with the pretraining context (not judged without models pretrained at several
context lengths) and the sink share on longer prefixes (a row credited to no paper), against the growth dilution
alone predicts (the random-init twin's a placebo in the detail), on synthetic context-length runs (per sequence, so
the growth is judged after standard errors over the sequences)."""

from __future__ import annotations

import numpy as np
import pytest
from phenomena_results import REPORT, assert_rederived, context_result

from san.phenomena.context import context_claims, diluted_growth, growth, sink_by_length, uniform_first_token
from san.phenomena.spec import DECODER, ENCODER

INFERENCE = "sinks_at_longer_inference_context"
R, SHARE = REPORT["phenomena"], REPORT["first_token_sink"]["share_threshold"]
#: per sequence length (16, 32, 64) and sequence (4), the attention on the first token of every layer and head
GROWING = np.array([[0.1, 0.1, 0.1, 0.1], [0.5, 0.1, 0.5, 0.1], [0.5, 0.5, 0.5, 0.5]])
DILUTING = np.array([[0.4, 0.4, 0.4, 0.4], [0.2, 0.2, 0.2, 0.2], [0.1, 0.1, 0.1, 0.1]])
NOISY = np.array([[0.1, 0.5, 0.1, 0.5], [0.1, 0.1, 0.5, 0.5], [0.5, 0.1, 0.5, 0.1]])


def judge(pretrained, init=DILUTING, models=("dec",)):
    results = {name: context_result({"pretrained": pretrained, "init": init}) for name in models}
    return context_claims(results, {"dec": DECODER, "other": DECODER, "enc": ENCODER}, R, SHARE)


def test_the_growth_is_paired_by_sequence():
    share = sink_by_length(context_result({"pretrained": GROWING}), "pretrained", SHARE)
    assert share.dims == ("seq_len", "sample")
    np.testing.assert_array_equal(growth(share), [1.0, 1.0, 1.0, 1.0])


def test_sinks_that_grow_hold_and_dilution_alone_fails():
    out = judge(GROWING, models=("dec", "other"))[INFERENCE]
    row = out["row"]
    assert row["verdict"] == "holds" and row["value"] == 1.0 and row["se"] == 0.0 and row["evidence"] == 8
    assert row["item"] == "16 -> 64 tokens"
    # no head is a sink at 16 tokens, so dilution alone predicts none at 64: growth 0
    assert row["positive_control"]["verdict"] == "fails" and row["positive_control"]["measured_value"] == 0.0
    assert row["positive_control"]["power"] == pytest.approx(0.9)  # 1 - s stays above 0.05 below s = 0.95
    assert "sink share by length {16: 0.00, 32: 0.50, 64: 1.00}" in row["detail"]
    assert "growth by dilution alone +0.000; init twin's growth -1.000 (placebo)" in row["detail"]
    assert row["placebo"].startswith("the random-init twin")
    assert out["cells"]["enc"]["verdict"] == "n/a"
    assert_rederived(row)


def test_dilution_scales_each_head_as_uniform_causal_attention_and_can_only_lower_the_share():
    assert uniform_first_token(1) == 1.0 and uniform_first_token(2) == pytest.approx(0.75)
    # every head at 0.5 on 16 tokens: scaled by u(64) / u(16) = 0.074 / 0.211, 0.18 < 0.3: every sink is lost
    ds = context_result({"pretrained": DILUTING * 0 + 0.5, "init": DILUTING})
    np.testing.assert_allclose(diluted_growth(ds, SHARE), [-1.0] * 4)
    rng = np.random.default_rng(0)
    for _ in range(20):
        ds = context_result({"pretrained": rng.uniform(0, 1, (3, 4)), "init": DILUTING})
        assert (diluted_growth(ds, SHARE) <= 0).all(), "a near miss that can only predict a fall: its control fails"


def test_a_growth_within_the_noise_fails():
    row = judge(NOISY)[INFERENCE]["row"]
    assert row["value"] == 0.0 and row["se"] == pytest.approx(1 / np.sqrt(3)) and row["verdict"] == "fails"
    assert_rederived(row)


def test_a_run_with_the_mean_over_the_sequences_alone_is_one_item_without_spread():
    ds = context_result({"pretrained": GROWING, "init": DILUTING}).drop_vars("first_token_attention_by_sample")
    row = context_claims({"dec": ds}, {"dec": DECODER}, R, SHARE)[INFERENCE]["row"]
    # the mean attention is 0.1, 0.3 and 0.5 at the three lengths: no sink head at 16 tokens, every head at 64
    assert row["value"] == 1.0 and row["se"] == 0.0 and row["evidence"] == 1 and row["verdict"] == "holds"
    assert_rederived(row)


def test_a_decoder_without_a_context_run_is_not_judged():
    out = context_claims({}, {"dec": DECODER}, R, SHARE)[INFERENCE]
    assert out["row"]["verdict"] == "not judged" and "no context-length run" in out["row"]["detail"]
    assert out["cells"]["dec"]["verdict"] == "not judged"
    assert_rederived(out["row"])
    one = context_result({"pretrained": GROWING[:1], "init": DILUTING[:1]}, seq_lens=(16,))
    row = context_claims({"dec": one}, {"dec": DECODER}, R, SHARE)[INFERENCE]["row"]
    assert "fewer than two sequence lengths" in row["detail"]


def test_barbero_is_not_judged_without_models_pretrained_at_several_context_lengths():
    out = judge(GROWING, models=("dec", "other"))
    row = out["sinks_grow_with_context"]["row"]
    assert row["verdict"] == "not judged" and row["holds"] is None
    assert "needs models pretrained at several context lengths" in row["detail"]
    assert row["scope"]["covered"] is False and row["scope"]["sweep"] == ["pretraining context length"]
    assert out["sinks_grow_with_context"]["cells"]["dec"]["verdict"] == "not judged"
    assert out["sinks_grow_with_context"]["cells"]["enc"]["verdict"] == "n/a"
    inference = out[INFERENCE]["row"]
    assert inference["source"].startswith("this project's measurement") and "Barbero" not in inference["source"]
    assert [i["item"] for i in inference["items"]] == ["dec", "other"]
    assert [i["value"] for i in inference["items"]] == [1.0, 1.0]
    assert_rederived(row)
