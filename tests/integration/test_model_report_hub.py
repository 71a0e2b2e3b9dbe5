"""One model's report from a bare hub repository id (``--config model=owner/name[@revision]``): the entry is made
while the config is checked, its family recognised from the hub's config.json (through the real client, against the
local hub), and a repository the hub cannot serve is refused by the key ``model``."""

from __future__ import annotations

import pytest

from san.core.config import ConfigError
from san.report.model_report import is_decoder, resolve_model

pytestmark = pytest.mark.slow


def test_a_hub_id_becomes_a_recognised_entry_beside_one_of_the_same_name(hub):
    config = {"model": "openai-community/gpt2", "models": {"gpt2": {"init": {"seed": 0}}}}
    name = resolve_model(config)
    assert name == "gpt2-hub", "the config's own gpt2 entry is kept"
    entry = config["models"][name]
    assert entry == {"family": "gpt2", "pretrained": {"source": "hub", "repo_id": "openai-community/gpt2",
                                                      "revision": "main"}}  # fmt: skip
    assert is_decoder(config, name), "a decoder known before acquisition joins the context-length run"
    again = {"model": "openai-community/gpt2@main", "models": {}}
    assert resolve_model(again) == "gpt2" and not is_decoder({"models": {"x": {"init": {}}}}, "x")


def test_an_encoder_by_hub_id_is_no_decoder(hub):
    config = {"model": "google-bert/bert-base-cased", "models": {}}
    name = resolve_model(config)
    assert config["models"][name]["family"] == "bert" and not is_decoder(config, name)


@pytest.mark.parametrize("model", ["tiny-org/no-such-model", "openai-community/gpt2@no-such-branch"])
def test_a_repository_the_hub_cannot_serve_is_refused_by_its_key(hub, model):
    with pytest.raises(ConfigError, match=r"config key 'model': the hub repository .* could not be read"):
        resolve_model({"model": model, "models": {}})
