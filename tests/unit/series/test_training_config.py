"""config/training.yaml: valid over config.yaml, each series model a hub entry with at least 20 revisions named as
Pythia names its branches, on its schedule; a series model without revisions is refused naming it."""

import pytest
import yaml

from san.core.config import ConfigError, overlay_config
from san.experiments import check_config
from san.models.revisions import expand_revisions, log_then_every, step_of

from helpers import ROOT, default_config


def _config(overlay):
    return overlay_config(default_config(), overlay)


def test_the_training_config_names_hub_series_on_pythias_schedule():
    overlay = yaml.safe_load((ROOT / "config/training.yaml").read_text())
    cfg = _config(overlay)
    check_config(cfg, ROOT / "workflow/schemas")
    pythia = set(log_then_every(143000, 1000, 512))
    for name in cfg["series"]["hub_models"]:
        source = cfg["models"][name]["pretrained"]
        revisions = expand_revisions(source["revisions"], source["repo_id"], name)
        steps = [step_of(r) for r in revisions]
        assert len(revisions) >= 20 and steps == sorted(steps) and set(steps) <= pythia and steps[0] == 0
        assert sum(s <= 512 for s in steps) >= 11, "log-spaced to 512"


def test_a_series_model_without_revisions_is_refused():
    with pytest.raises(ConfigError, match="series.hub_models names 'gpt2'"):
        check_config(_config({"series": {"hub_models": ["gpt2"]}}), ROOT / "workflow/schemas")
