"""The first-token sink: its measure against a loop over heads and queries, its recording in every variant's
forward pass (the residuals unchanged), and the hypothesis that the first token carries the unmodified decoder's
composite residual where it has sinks: holding with its random-token control failing, holding with the control
holding too ("no power"), failing, and not judged."""

import numpy as np
import pytest
import torch
import xarray as xr

from san.claims import verdicts as V
from san.measures.sink import sink_share
from san.models.ablations import variant
from san.models.load import load_model
from san.models.store import materialise_init
from san.rank_collapse.claims import first_token_sink_claims
from san.rank_collapse.experiment import control_tokens, layer_measures, layer_residuals
from san.rank_collapse.sink import first_token_attention
from san.rank_collapse.spec import METRICS

from helpers import default_config

SINK = default_config()["report"]["first_token_sink"]


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
        residuals, alpha, _ = layer_measures(gpt2, "gpt2", ids, batch_size=3, control_token=control_tokens(4, 12, 0))
        alone = layer_residuals(gpt2, "gpt2", ids, batch_size=3)
        with torch.inference_mode():
            att = gpt2(input_ids=ids, attention_mask=torch.ones_like(ids), output_attentions=True).attentions
    np.testing.assert_array_equal(residuals[: len(METRICS)], alone)
    want = np.stack([a[:, :, :, 0].sum(-1).numpy() / ids.shape[1] for a in att])  # (layers, sequences, heads)
    np.testing.assert_allclose(alpha, want, rtol=1e-12)
    # causal: the first query attends only to the first token, so alpha >= 1 / tokens
    assert (alpha >= 1 / ids.shape[1] - 1e-12).all()


def _decoder(without_first: float, without_random: float, *, layer1_without_first: float = 0.4,
             sinks: bool = True) -> xr.Dataset:  # fmt: skip
    """A causal model with four layers: the unmodified pretrained model's (transformer variant) relative residual 1.0
    at every layer, without the first token ``without_first`` at layers 2 and 3 (``layer1_without_first`` at layer 1)
    and without a random one ``without_random``; every other variant and weight set at 0.6. The unmodified pretrained
    model's heads (alpha 0.9 or 0.1): one of two sinks at layer 1 (a share of 0.5, not above the rule's 0.5), both
    at layers 2 and 3 (none with ``sinks`` False); the SAN variant has none."""
    dims = ("weights", "variant", "layer", "sample")
    data = np.full((2, 4, 4, 2), 0.6)
    data[1, 3] = 1.0
    no_first, no_random = data.copy(), data.copy()
    no_first[1, 3, 1:] = np.array([layer1_without_first, without_first, without_first])[:, None]
    no_random[1, 3, 1:] = without_random
    alpha = np.full((2, 4, 4, 2), 0.1)
    if sinks:
        alpha[1, 3, 1] = [0.9, 0.1]
        alpha[1, 3, 2:] = 0.9
    alpha[:, :, 0] = np.nan
    return xr.Dataset(
        {
            "residual_ratio": (dims, data),
            "residual_ratio_no_first": (dims, no_first),
            "residual_ratio_no_random": (dims, no_random),
            "first_token_attention": (("weights", "variant", "layer", "head"), alpha),
        },
        coords={"weights": ["init", "pretrained"], "variant": ["SAN", "SAN+MLP", "SAN+skip", "transformer"]},
    )


def _sink(results, causal=("dec",), **kw):
    config = {k: v for k, v in SINK.items() if k != "threshold_notes"}
    return first_token_sink_claims(results, **{**config, **kw}, causal=causal)


def _row(out):
    return out["verdicts"][0]


def test_the_first_token_carries_the_residual_where_the_sinks_are_and_a_random_token_does_not():
    # without the first token 0.4 (0.40 decades moved), without a random one 0.999 (0.0004 decades)
    out = _sink({"dec": _decoder(0.4, 0.999, layer1_without_first=0.99)})
    row = _row(out)
    assert out["per_model"]["dec"]["sink_layers"] == [2, 3], "layer 1 (one sink head of two) is not above the rule"
    assert row["verdict"] == "holds" and out["smallest_move"] == pytest.approx(-np.log10(0.4))
    assert row["positive_control"]["measured_value"] == pytest.approx(-np.log10(0.999))
    assert row["positive_control"]["key"] == "report.first_token_sink.random_token_control"
    # 0.398 (1 - s) + 0.0004 s > 0.1 up to s = 0.749: the last scanned value below it
    power = row["positive_control"]["power"]
    assert power == pytest.approx(0.7)
    print(f"first_token_carries_the_residual: power {power}")
    assert "2: share 1.00, r 1, moved 0.40 / 0.00043" in row["detail"]
    assert row["source"].startswith("this project's hypothesis"), "credited to no paper"


def test_a_random_token_that_moves_it_as_much_leaves_the_test_without_power():
    row = _row(_sink({"dec": _decoder(0.4, 0.4)}))
    assert row["holds"] is True and row["positive_control"]["verdict"] == "holds" and row["verdict"] == "no power"


def test_the_first_token_moves_the_residual_too_little_at_a_sink_layer():
    out = _sink({"dec": _decoder(0.9, 0.999)})
    assert _row(out)["verdict"] == "fails" and out["smallest_move"] == pytest.approx(-np.log10(0.9))
    both = _sink({"dec": _decoder(0.4, 0.999), "other": _decoder(0.9, 0.999)}, causal=("dec", "other"))
    assert (
        _row(both)["verdict"] == "fails"
        and both["judged"] == ["dec", "other"]
        and _row(both)["item"].startswith("other")
    )


def test_a_first_token_that_raises_the_residual_moves_it_too():
    """The move is a distance in decades, whichever way it goes, and finite for any two positive ratios."""
    out = _sink({"dec": _decoder(2.5, 1.001)})
    assert _row(out)["verdict"] == "holds" and out["smallest_move"] == pytest.approx(np.log10(2.5))


def test_without_sinks_or_a_decoder_it_is_not_judged():
    assert _row(_sink({"dec": _decoder(0.4, 0.999, sinks=False)}))["verdict"] == "not judged"
    assert _row(_sink({"enc": _decoder(0.4, 0.999)}, causal=()))["verdict"] == "not judged", "not causal"
    old = _decoder(0.4, 0.999).drop_vars("residual_ratio_no_random")
    row = _row(_sink({"dec": old}))
    assert row["holds"] is True and row["verdict"] == "not judged", "a result without the control's measure"


def test_every_sink_row_is_rederived_from_its_own_numbers():
    import json

    for data in (_decoder(0.4, 0.999), _decoder(0.4, 0.4), _decoder(0.9, 0.999), _decoder(0.4, 0.999, sinks=False)):
        r = json.loads(json.dumps(_row(_sink({"dec": data}))))
        assert V.rederive(r) == []


def test_the_first_token_rows_control_moves_with_the_data_it_tests():
    """Judged again on a seeded multiplicative perturbation of its result (:mod:`perturb`), the row's control, a
    random token left out, reads a different value: it depends on the data tested."""
    from perturb import perturbed_dataset

    results = {"dec": _decoder(0.4, 0.999, layer1_without_first=0.99)}
    before = _row(_sink(results))
    after = _row(_sink({m: perturbed_dataset(ds, np.random.default_rng(0)) for m, ds in results.items()}))
    assert before["holds"] is True
    b, a = (r["positive_control"]["measured_value"] for r in (before, after))
    assert not np.isclose(a, b, rtol=1e-9, atol=0), f"control {b} does not move"
