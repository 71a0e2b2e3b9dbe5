"""Compression is not rank collapse: at the compressed layers (sigma1 share high) Dong's residual of the tokens other
than the massive ones stays above the collapse level, against pure attention's there, on synthetic rank-collapse
results; the whole matrix's residual, about 1 by construction under one massive token, decides nothing."""

from __future__ import annotations

import numpy as np
import pytest
from phenomena_results import REPORT, assert_rederived, text_result

from san.models.folders import result_family
from san.phenomena.compression import compressed_layers, compression_claims
from san.phenomena.spec import IMAGE_ENCODER, model_kind

R = REPORT["phenomena"]
SHARE = np.array([0.95, 0.5, 0.95, 0.95, 0.95, 0.5, 0.5, 0.5, 0.5])  # layer 0 (the embedding) is not a block


def result(kind: str, others: float | np.ndarray, pure: float | np.ndarray, share: np.ndarray = SHARE):
    """A model whose whole matrix keeps a residual of 0.9 (one massive token), whose other tokens keep ``others``
    and whose pure attention's other tokens keep ``pure``."""
    curves = {("pretrained", "transformer"): {"sigma1_share": share, "residual_ratio": 0.9,
                                              "residual_ratio_no_massive": others},
              ("pretrained", "SAN"): {"residual_ratio_no_massive": pure}}  # fmt: skip
    return text_result(kind, curves)


def judge(results: dict):
    kinds = {name: model_kind(result_family(ds.attrs)) for name, ds in results.items()}
    return compression_claims(results, {**kinds, "vit": IMAGE_ENCODER}, R)["compression_is_not_collapse"]


def test_compressed_layers_are_block_outputs():
    assert compressed_layers(SHARE, 0.9) == [2, 3, 4]


def test_compressed_layers_that_keep_their_tokens_apart_hold_and_pure_attention_fails():
    out = judge({"dec": result("decoder", 0.3, 1e-8), "enc": result("encoder", 0.2, 1e-9)})
    row = out["row"]
    assert row["verdict"] == "holds" and row["value"] == pytest.approx(0.2) and row["item"] == "layer 2"
    assert row["positive_control"]["verdict"] == "fails"
    # 0.2 -> 1e-9 in decades crosses 1e-3 at log(200) / log(2e8) ~ 0.28 of the way
    assert row["positive_control"]["power"] == pytest.approx(0.25)
    assert "without the massive tokens 0.2" in row["detail"] and "the whole matrix's 0.9" in row["detail"]
    assert "SAN there 1e-09" in row["detail"]
    assert out["cells"]["vit"]["verdict"] == "n/a" and out["cells"]["dec"]["verdict"] == "holds"
    assert_rederived(row)


def test_pure_attention_that_keeps_its_tokens_apart_too_leaves_no_power():
    row = judge({"dec": result("decoder", 0.3, 0.1)})["row"]
    assert row["holds"] is True and row["verdict"] == "no power"
    assert_rederived(row)


def test_a_compressed_layer_whose_other_tokens_collapse_fails_though_the_whole_matrix_does_not():
    others = np.full(9, 0.3)
    others[3] = 1e-5
    row = judge({"dec": result("decoder", others, 1e-8), "enc": result("encoder", 0.2, 1e-9)})["row"]
    assert row["verdict"] == "fails" and row["item"] == "layer 3" and row["value"] == pytest.approx(1e-5)
    assert_rederived(row)


def test_a_model_without_compressed_layers_is_not_judged():
    out = judge({"dec": result("decoder", 0.3, 1e-8, share=np.full(9, 0.5))})
    assert out["row"]["verdict"] == "not judged"
    assert "no layer with sigma1 share >= 0.9 (largest 0.5)" in out["row"]["detail"]
    assert out["cells"]["dec"]["verdict"] == "not judged"
    assert_rederived(out["row"])
