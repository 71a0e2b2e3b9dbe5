"""The placebo of the first-token measure: the paper's ratio without one random token (never the first), recomputed
with numpy from transformers' own hidden states, its positions drawn from the config's seed, and the other measures
of the run unchanged by it."""

import numpy as np
import pytest
import torch
import xarray as xr

from san.models.ablations import variant
from san.models.load import load_model
from san.models.store import materialise_init
from san.rank_collapse.experiment import control_tokens, layer_residuals, run
from san.rank_collapse.spec import METRICS, PLACEBO

SETTINGS = {"variants": ["SAN", "transformer"], "dtype": "float64", "batch_size": 2,
            "albert_no_mlp": "identity_linears", "control_token_seed": 3, "massive_token_factor": 10.0}  # fmt: skip


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("placebo") / "bert"
    arch = {"hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32}
    materialise_init("bert", arch, 0, folder)
    ids = np.random.default_rng(0).integers(1000, 2000, size=(5, 9))
    inputs = xr.Dataset({"input_ids": (("sample", "token"), ids)}, attrs={"input_sha256": "0" * 64})
    return folder, inputs, run("bert", {"init": folder}, {"init": inputs}, SETTINGS)


def _ratio_without(x: np.ndarray, drop: int) -> float:
    """``||res(X)||_{1,inf} / ||X||_{1,inf}`` of the tokens of ``x`` (tokens, width) but ``drop``, with numpy."""
    kept = np.delete(x, drop, axis=0)
    res = kept - kept.mean(axis=0, keepdims=True)

    def norm(a):
        return np.sqrt(np.linalg.norm(a, 1) * np.linalg.norm(a, np.inf))

    return float(norm(res) / norm(kept))


def test_the_excluded_tokens_are_drawn_from_the_seed_and_never_the_first(bert):
    _, _, ds = bert
    drawn = ds["control_token"].values
    assert ds["control_token"].dims == ("sample",)
    np.testing.assert_array_equal(drawn, control_tokens(5, 9, SETTINGS["control_token_seed"]).numpy())
    assert ((drawn >= 1) & (drawn <= 8)).all()
    many = control_tokens(2000, 9, 0).numpy()
    assert set(many) == set(range(1, 9)), "every position but the first is drawn"
    assert not np.array_equal(control_tokens(50, 9, 0).numpy(), control_tokens(50, 9, 1).numpy())
    with pytest.raises(ValueError, match="rank_collapse.control_token_seed"):
        control_tokens(2, 1, 0)


def test_the_placebo_is_the_ratio_without_that_token(bert):
    """The unmodified BERT's hidden states (the residual stream of a post-norm encoder) without the drawn token,
    through numpy's norms."""
    folder, inputs, ds = bert
    model = load_model(folder, "bert", torch.float64)
    ids = torch.as_tensor(inputs["input_ids"].values)
    with torch.inference_mode():
        states = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True).hidden_states
    got = ds["residual_ratio_no_random"].sel(weights="init", variant="transformer").values
    for layer, h in enumerate(states):
        for i, drop in enumerate(ds["control_token"].values):
            assert got[layer, i] == pytest.approx(_ratio_without(h[i].numpy(), int(drop)), rel=1e-12)
    assert ds["residual_ratio_no_random"].attrs["long_name"] == PLACEBO["residual_ratio_no_random"]
    assert "control_token" in ds["residual_ratio_no_random"].attrs["description"]
    assert ds["control_token"].attrs["units"] == "1" and "seed" in ds["control_token"].attrs["description"]


def test_the_other_measures_are_those_of_the_stream_alone(bert):
    """Adding the placebo leaves every other measure as :func:`layer_residuals` gives it, bit for bit."""
    folder, inputs, ds = bert
    model = load_model(folder, "bert", torch.float64)
    ids = torch.as_tensor(inputs["input_ids"].values)
    for name in SETTINGS["variants"]:
        with variant(model, "bert", name):
            alone = layer_residuals(model, "bert", ids, batch_size=2)
        for i, metric in enumerate(METRICS):
            np.testing.assert_array_equal(ds[metric].sel(weights="init", variant=name).values, alone[i])


def test_a_run_without_the_seed_names_the_key(bert):
    folder, inputs, _ = bert
    settings = {k: v for k, v in SETTINGS.items() if k != "control_token_seed"}
    with pytest.raises(KeyError, match="rank_collapse.control_token_seed"):
        run("bert", {"init": folder}, {"init": inputs}, settings)
