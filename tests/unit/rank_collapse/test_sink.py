"""The first-token sink: its measure against a loop over heads and queries, its recording in every variant's
forward pass (the residuals unchanged), and the claim that the decoders' faster collapse is carried by the first token,
once holding and once failing."""

import numpy as np
import pytest
import torch
import xarray as xr

from san.models.ablations import variant
from san.models.load import load_model
from san.models.store import materialise_init
from san.rank_collapse.claims import first_token_sink_claims
from san.rank_collapse.experiment import layer_measures, layer_residuals
from san.rank_collapse.sink import first_token_attention, sink_share

from helpers import default_config

SINK = default_config()["report"]["first_token_sink"]
LAYER = default_config()["report"]["rank_collapse"]["layer"]


def test_first_token_attention_is_the_mean_over_queries_of_the_first_column():
    gen = torch.Generator().manual_seed(0)
    att = [torch.softmax(torch.randn(3, 2, 5, 5, generator=gen, dtype=torch.float64), -1) for _ in range(2)]
    got = first_token_attention([att[0], None, att[1]])
    assert got.shape == (3, 3, 2)
    for layer, a in ((0, att[0]), (2, att[1])):
        for s in range(3):
            for h in range(2):
                want = sum(float(a[s, h, q, 0]) for q in range(5)) / 5
                assert got[layer, s, h].item() == pytest.approx(want, rel=1e-12)
    assert torch.isnan(got[1]).all(), "a layer without matrices is NaN"


def test_sink_share_counts_the_heads_above_the_threshold():
    alpha = xr.DataArray(
        [[np.nan, np.nan, np.nan, np.nan], [0.9, 0.1, 0.31, 0.3], [0.0, 0.0, 0.0, 0.0]], dims=("layer", "head")
    )
    share = sink_share(alpha, 0.3).values
    assert np.isnan(share[0]) and share[1] == 0.5 and share[2] == 0.0


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sink") / "gpt2"
    materialise_init("gpt2", {"n_embd": 16, "n_layer": 3, "n_head": 2, "n_positions": 64}, 0, folder)
    return load_model(folder, "gpt2", torch.float64)


@pytest.mark.parametrize("name", ["SAN", "transformer"])
def test_every_variant_records_its_sink_and_keeps_its_residuals(gpt2, name):
    ids = torch.randint(0, 1000, (4, 12), generator=torch.Generator().manual_seed(1))
    with variant(gpt2, "gpt2", name):
        residuals, alpha, _ = layer_measures(gpt2, "gpt2", ids, batch_size=3)
        alone = layer_residuals(gpt2, "gpt2", ids, batch_size=3)
        with torch.inference_mode():
            att = gpt2(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True).attentions
    np.testing.assert_array_equal(residuals, alone)
    want = np.stack([a[:, :, :, 0].sum(-1).numpy() / ids.shape[1] for a in att])  # (layers, sequences, heads)
    np.testing.assert_allclose(alpha, want, rtol=1e-12)
    # causal: the first query attends only to the first token, so alpha >= 1 / tokens
    assert (alpha >= 1 / ids.shape[1] - 1e-12).all()


def _decoder(init: float, pre: float, pre_without_first: float) -> xr.Dataset:
    """A causal model's SAN ratios: ``init`` everywhere at init; pretrained ``pre`` with every token and
    ``pre_without_first`` without the first one (the other variants at 0.6); heads with alpha 0.9 and 0.1."""
    data = np.full((2, 4, 4, 2), 0.6)
    data[0, 0] = init
    no_first = data.copy()
    data[1, 0], no_first[1, 0] = pre, pre_without_first
    dims = ("weights", "variant", "layer", "sample")
    alpha = np.tile(np.array([0.9, 0.1]), (2, 4, 4, 1))
    alpha[:, :, 0] = np.nan
    return xr.Dataset(
        {
            "residual_ratio": (dims, data),
            "residual_ratio_no_first": (dims, no_first),
            "first_token_attention": (("weights", "variant", "layer", "head"), alpha),
        },
        coords={"weights": ["init", "pretrained"], "variant": ["SAN", "SAN+MLP", "SAN+skip", "transformer"]},
    )


def _rows(out):
    return {r["key"]: r for r in out["verdicts"]}


def test_the_first_token_carries_the_faster_collapse_or_not():
    # init 0.5, pretrained 0.05 (10x faster); without the first token 0.4: 1 - log(0.8)/log(0.1) = 0.903 carried
    carried = {"dec": _decoder(0.5, 0.05, 0.4)}
    out = first_token_sink_claims(carried, layer=LAYER, **SINK, causal=("dec",))
    assert out["carried_in_every_decoder"] is True
    assert out["smallest_carried"] == pytest.approx(1 - np.log(0.4 / 0.5) / np.log(0.05 / 0.5))
    assert out["per_model"]["dec"]["sink_share"] == {"init": 0.5, "pretrained": 0.5}
    row = _rows(out)["carried_in_every_decoder"]
    assert row["verdict"] == "holds" and row["positive_control"]["fails_as_it_must"]
    # without the first token still 0.06: almost all of the decrease stays, the first token does not carry it
    kept = {"dec": _decoder(0.5, 0.05, 0.06)}
    out = first_token_sink_claims(kept, layer=LAYER, **SINK, causal=("dec",))
    assert out["carried_in_every_decoder"] is False and _rows(out)["carried_in_every_decoder"]["verdict"] == "fails"
    # one decoder that fails makes the claim fail
    both = {**carried, "other": _decoder(0.5, 0.05, 0.06)}
    assert first_token_sink_claims(both, layer=LAYER, **SINK, causal=("dec", "other"))["judged"] == ["dec", "other"]
    assert (
        first_token_sink_claims(both, layer=LAYER, **SINK, causal=("dec", "other"))["carried_in_every_decoder"] is False
    )


def test_nothing_to_carry_is_not_judged():
    slower = {"dec": _decoder(0.05, 0.5, 0.5)}  # pretrained collapses slower: no faster collapse to explain
    out = first_token_sink_claims(slower, layer=LAYER, **SINK, causal=("dec",))
    assert out["carried_in_every_decoder"] is None and out["judged"] == []
    encoder = {"enc": _decoder(0.5, 0.05, 0.4)}  # not causal: outside the claim
    assert first_token_sink_claims(encoder, layer=LAYER, **SINK)["carried_in_every_decoder"] is None
    assert _rows(first_token_sink_claims(encoder, layer=LAYER, **SINK))["carried_in_every_decoder"]["verdict"] == (
        "not judged"
    )
