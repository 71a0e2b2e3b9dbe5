"""The quantisation control on a tiny model: its requantised copies (san/models/quantise.py) hold exactly what an
independent implementation of llama.cpp's Q8_0 and Q4_0 block formats gives, and the drift of the rank-collapse
measures (san/rank_collapse/quantisation.py) equals a recompute from the measures of each folder run separately;
the verdict hook (san/claims/drift.py) prints a margin within the drift as such."""

import json

import numpy as np
import pytest
import torch
import xarray as xr
from safetensors import safe_open
from transformers import LlamaConfig, LlamaForCausalLM, LlamaModel

from san.claims.drift import WITHIN_DRIFT, against_drift, drift_cell, drift_in_decades, measure_drift
from san.measures.phenomena import PHENOMENA
from san.models.folders import write_manifest
from san.models.quantise import quantise_roundtrip, quantised_copy
from san.rank_collapse.experiment import MEASURES, layer_measures


def _q8_0(x: np.ndarray) -> np.ndarray:
    """Q8_0 (ggml-quants.c quantize_row_q8_0_ref): blocks of 32, scale d = max|x| / 127, values x * (1 / d) rounded
    half away from zero (roundf) as int8, d stored as float16; dequantised q * d."""
    b = x.reshape(-1, 32).astype(np.float32)
    d = np.abs(b).max(axis=1, keepdims=True) / 127
    with np.errstate(divide="ignore", invalid="ignore"):
        y = b * np.where(d == 0, 0, 1 / d)
    q = np.sign(y) * np.floor(np.abs(y) + 0.5)
    return (q * d.astype(np.float16).astype(np.float32)).reshape(x.shape)


def _q4_0(x: np.ndarray) -> np.ndarray:
    """Q4_0 (quantize_row_q4_0_ref): blocks of 32, d = m / -8 with m the value of largest magnitude (signed), stored
    as float16; q = min(15, trunc(x / d + 8.5)); dequantised (q - 8) * d."""
    b = x.reshape(-1, 32).astype(np.float32)
    m = np.take_along_axis(b, np.abs(b).argmax(axis=1)[:, None], axis=1)
    d = m / -8
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d == 0, 0, np.minimum(15, np.trunc(b * np.where(d == 0, 0, 1 / d) + 8.5)))
    return ((q - 8) * d.astype(np.float16).astype(np.float32)).reshape(x.shape)


def _tiny(folder):
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    lm = LlamaForCausalLM(config).eval()
    lm.save_pretrained(folder)
    write_manifest(folder, {"source": "test", "family": "llama"})
    return lm


@pytest.mark.parametrize(("kind", "reference"), [("Q8_0", _q8_0), ("Q4_0", _q4_0)])
def test_roundtrip_matches_an_independent_block_quantiser(kind, reference):
    """The gguf package's round trip equals the block formats written out here; a vector (not a matrix of whole
    blocks) is kept as it is."""
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    got = quantise_roundtrip(x, kind)
    np.testing.assert_allclose(got, reference(x), rtol=0, atol=1e-6)
    assert not np.array_equal(got, x)
    assert np.array_equal(quantise_roundtrip(x[0], kind), x[0])
    with pytest.raises(ValueError, match="unknown quantisation"):
        quantise_roundtrip(x, "Q5_K")


@pytest.mark.slow
def test_drift_equals_an_independent_recompute(tmp_path):
    """A tiny llama's Q8_0 and Q4_0 copies: each matrix is the independent block quantiser's, norms untouched,
    the manifest says what was quantised; the drift of the measures equals the absolute difference of the sample
    means of the measures recomputed on each folder loaded by transformers; Q4_0 drifts more than Q8_0."""
    lm = _tiny(tmp_path / "pretrained")
    ref = {"Q8_0": _q8_0, "Q4_0": _q4_0}
    for kind in ref:
        manifest = quantised_copy(tmp_path / "pretrained", kind, tmp_path / kind)
        assert manifest["quantisation"] == kind and "model.layers.0.mlp.up_proj.weight" in manifest["quantised_tensors"]
        assert "model.norm.weight" not in manifest["quantised_tensors"]
        with safe_open(tmp_path / kind / "model.safetensors", "np") as fh:
            for name, p in lm.state_dict().items():
                want = ref[kind](p.numpy()) if p.ndim == 2 else p.numpy()
                np.testing.assert_allclose(fh.get_tensor(name), want, rtol=0, atol=1e-6, err_msg=name)
    ids = torch.randint(0, 64, (3, 16), generator=torch.Generator().manual_seed(1))
    control = torch.tensor([3, 5, 7])
    measured = {}
    for w in ("pretrained", "Q8_0", "Q4_0"):
        model = LlamaModel.from_pretrained(tmp_path / w, dtype=torch.float64).eval()
        residuals, _, phenomena = layer_measures(model, "llama", ids, 3, control_token=control, factor=10.0)
        measured[w] = np.concatenate([residuals, phenomena])  # (measures, layers, samples)
    names = [*MEASURES, *PHENOMENA]
    arr = np.stack([measured[w] for w in measured])[:, None]  # (weights, variant, measures, layer, sample)
    dims = ("weights", "variant", "layer", "sample")
    ds = xr.Dataset(
        {m: (dims, arr[:, :, i].astype(np.int64) if m in ("massive_token", "massive_dim") else arr[:, :, i])
         for i, m in enumerate(names)},
        coords={"weights": list(measured), "variant": ["transformer"]},
    )  # fmt: skip
    drift = measure_drift(ds)
    assert "massive_ratio" in drift and "massive_token" not in drift
    for i, m in enumerate(names):
        if m in ("massive_token", "massive_dim"):
            continue
        for kind in ref:
            want = np.abs(measured[kind][i].mean(-1) - measured["pretrained"][i].mean(-1))
            np.testing.assert_allclose(drift[m].sel(copy=kind, variant="transformer").values, want, rtol=1e-12)
        assert np.array_equal(drift[f"max_drift_{m}"].values, drift[m].max("copy").values)
    ratio = drift["residual_ratio"].sel(variant="transformer")
    assert ratio.sel(copy="Q4_0").values[1:].sum() > ratio.sel(copy="Q8_0").values[1:].sum() > 0
    with pytest.raises(ValueError, match="no quantised copy"):
        measure_drift(ds.sel(weights=["pretrained"]))
    assert json.loads((tmp_path / "Q4_0" / "manifest.json").read_text())["of"]["source"] == "test"


def test_a_margin_within_the_drift_prints_as_such():
    """A margin no larger than the drift prints "within quantisation drift" whatever the verdict; a larger one keeps
    the verdict; no drift measured keeps it too; the cell prints both numbers."""
    assert against_drift("holds", 0.02, 0.05) == WITHIN_DRIFT
    assert against_drift("fails", -0.04, 0.05) == WITHIN_DRIFT
    assert against_drift("holds", 0.2, 0.05) == "holds"
    assert against_drift("fails", -0.2, 0.05) == "fails"
    assert against_drift("holds", 0.2, None) == "holds"
    assert drift_cell(0.123, 0.0314) == "margin 0.12, drift 0.031"
    assert drift_in_decades(1.0, 0.5) == pytest.approx(np.log10(2))


@pytest.mark.slow
def test_the_control_runs_the_copies_as_weight_sets_of_one_result(tmp_path):
    """The control of a tiny llama: the result holds the weights and each copy, the weights' own measures equal a run
    of the folder alone, and the drift read from the result (:func:`measure_drift`) is larger for Q4_0 than for Q8_0."""
    from san.models.store import materialise_init
    from san.rank_collapse.experiment import run
    from san.rank_collapse.quantisation import quantisation_control

    arch = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 256}  # fmt: skip
    materialise_init("llama", arch, 0, tmp_path / "pretrained")
    ids = np.random.default_rng(0).integers(0, 256, size=(3, 12))
    inputs = xr.Dataset({"input_ids": (("sample", "token"), ids)}, attrs={"input_sha256": "0" * 64})
    settings = {"variants": ["SAN", "transformer"], "dtype": "float64", "batch_size": 3,
                "albert_no_mlp": "identity_linears", "control_token_seed": 0, "massive_token_factor": 10.0}  # fmt: skip
    result = quantisation_control("llama", tmp_path / "pretrained", inputs, settings, ["Q4_0", "Q8_0"], tmp_path)
    assert list(result["weights"].values) == ["pretrained", "Q4_0", "Q8_0"]
    alone = run("llama", {"pretrained": tmp_path / "pretrained"}, {"pretrained": inputs}, settings)
    np.testing.assert_array_equal(result["residual_ratio"].sel(weights="pretrained"), alone["residual_ratio"].sel(
        weights="pretrained"))  # fmt: skip
    ratio = measure_drift(result)["massive_ratio"].sel(variant="transformer")
    assert float(ratio.sel(copy="Q4_0").sum()) > float(ratio.sel(copy="Q8_0").sum()) > 0
