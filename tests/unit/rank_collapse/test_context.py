"""The unmodified decoder at several context lengths (:mod:`san.rank_collapse.context`) against transformers' own
attention matrices and hidden states of the first ``L`` tokens, and the cross-checks of ``phenomena.context``."""

import numpy as np
import pytest
import torch
import xarray as xr

from san.core.config import ConfigError
from san.models.load import load_model
from san.models.store import materialise_init
from san.rank_collapse.spec import check_context, context_models

from reference import numpy_phenomena

ARCH = {"n_embd": 16, "n_layer": 2, "n_head": 2, "n_positions": 64}
LENGTHS = [5, 12]


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("context") / "gpt2"
    materialise_init("gpt2", ARCH, 0, folder)
    return folder


@pytest.mark.slow
def test_every_length_records_the_sink_and_the_first_tokens_norm_of_its_first_tokens(decoder):
    from san.rank_collapse.context import run

    ids = torch.randint(0, 1000, (3, 12), generator=torch.Generator().manual_seed(4))
    inputs = {"init": xr.Dataset({"input_ids": (("sample", "token"), ids.numpy())}, attrs={"input_sha256": "x"})}
    settings = {"seq_lens": LENGTHS, "batch_size": 2, "dtype": {"SAN": "float32", "transformer": "float64"}}
    ds = run("gpt2", {"init": decoder}, inputs, settings)
    assert ds["first_token_attention"].dims == ("weights", "seq_len", "layer", "head")
    assert ds["first_token_norm_ratio"].dims == ("weights", "seq_len", "layer", "sample")
    assert list(ds["seq_len"].values) == LENGTHS
    model = load_model(decoder, "gpt2", torch.float64)
    for n in LENGTHS:
        with torch.inference_mode():
            out = model(input_ids=ids[:, :n], output_attentions=True, output_hidden_states=True)
        alpha = np.stack([a[:, :, :, 0].numpy().sum(-1) / n for a in out.attentions])  # (layers, sequences, heads)
        got = ds.sel(weights="init", seq_len=n)
        np.testing.assert_allclose(got["first_token_attention_by_sample"].values[1:], alpha, rtol=1e-12)
        np.testing.assert_allclose(got["first_token_attention"].values[1:], alpha.mean(axis=1), rtol=1e-12)
        assert np.isnan(got["first_token_attention"].values[0]).all()
        # every layer but the last, which transformers returns after GPT-2's final norm
        for layer, h in enumerate(out.hidden_states[:-1]):
            for s in range(3):
                want = numpy_phenomena(h[s].numpy(), 10.0)
                for name in ("first_token_norm_ratio", "massive_ratio"):
                    assert got[name].values[layer, s] == pytest.approx(want[name], rel=1e-10), (n, name, layer, s)


def test_a_length_beyond_the_input_is_refused(decoder):
    from san.rank_collapse.context import run

    inputs = {"init": xr.Dataset({"input_ids": (("sample", "token"), np.ones((1, 8), np.int64))}, attrs={})}
    with pytest.raises(ValueError, match=r"seq_lens \[12\] exceed the input's 8 tokens"):
        run("gpt2", {"init": decoder}, inputs, {"seq_lens": [4, 12], "batch_size": 1, "dtype": "float32"})


def _config(models=None, seq_lens=(32, 64)):
    return {
        "text": {"seq_len": 64},
        "models": {
            "dec": {"family": "gpt2", "pretrained": {"source": "local"}},
            "dec-init": {"family": "gpt2"},
            "enc": {"family": "bert", "pretrained": {"source": "local"}},
            "unnamed": {"pretrained": {"source": "hub"}},
        },
        "rank_collapse": {"models": ["dec", "dec-init", "enc", "unnamed"]},
        "phenomena": {"context": {"seq_lens": list(seq_lens), "models": models}},
    }


def test_the_context_models_default_to_the_pretrained_decoders():
    assert context_models(_config()) == ["dec"]
    assert context_models(_config(models=["dec-init"])) == ["dec-init"]
    check_context(_config())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (_config(models=["enc"]), r"'phenomena.context.models.0': model 'enc' is of family 'bert', not a causal"),
        (_config(models=["gone"]), r"'phenomena.context.models.0': model 'gone' is not in rank_collapse.models"),
        (_config(seq_lens=(32, 128)), r"'phenomena.context.seq_lens.1': 128 tokens exceed text.seq_len = 64"),
    ],
)
def test_a_bad_context_section_is_refused_naming_the_key(config, message):
    with pytest.raises(ConfigError, match=message):
        check_context(config)
