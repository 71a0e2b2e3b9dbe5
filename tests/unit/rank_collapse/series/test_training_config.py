"""config/training.yaml: valid over config.yaml; Pythia's series on Pythia's schedule (at least 20 revisions, log-spaced
to 512); MultiBERTs seeds 0-4, each revision a repository of its own named as MultiBERTs names them, in step order;
OLMo-2's stage-1 branches in step order with the tokens their names state; a series model without revisions, and
repositories that do not match the revisions, are refused naming the key."""

import re

import pytest
import yaml

from san.core.config import ConfigError, overlay_config
from san.experiments import check_config
from san.models.revisions import log_then_every, step_of, tokens_of
from san.models.sources.series import expand_revisions

from helpers import ROOT, default_config


def _config(overlay):
    return overlay_config(default_config(), overlay)


@pytest.fixture(scope="module")
def training():
    cfg = _config(yaml.safe_load((ROOT / "config/training.yaml").read_text()))
    check_config(cfg, ROOT / "workflow/schemas")
    return cfg


def _steps(cfg, name):
    source = cfg["models"][name]["pretrained"]
    revisions = expand_revisions(source["revisions"], source["repo_id"], name)
    return revisions, [step_of(r) for r in revisions]


def test_the_pythia_series_are_on_pythias_schedule(training):
    pythia = set(log_then_every(143000, 1000, 512))
    names = [n for n in training["series"]["hub_models"] if training["models"][n]["pretrained"]["repo_id"].startswith(
        "EleutherAI/pythia-")]  # fmt: skip
    assert len(names) == 2
    for name in names:
        revisions, steps = _steps(training, name)
        assert len(revisions) >= 20 and steps == sorted(steps) and set(steps) <= pythia and steps[0] == 0
        assert sum(s <= 512 for s in steps) >= 11, "log-spaced to 512"


def test_multiberts_seeds_0_to_4_are_series_of_their_own_repositories(training):
    """MultiBERTs' checkpoint of seed ``s`` at ``k`` thousand steps is google/multiberts-seed_<s>-step_<k>k: every
    revision ``step<n>`` maps to the repository of its seed and ``n / 1000`` thousand steps."""
    seeds = set()
    for name in training["series"]["hub_models"]:
        source = training["models"][name]["pretrained"]
        if "repos" not in source:
            continue
        seed = int(re.fullmatch(r"google/multiberts-seed_(\d+)", source["repo_id"]).group(1))
        seeds.add(seed)
        revisions, steps = _steps(training, name)
        assert len(revisions) >= 10 and steps == sorted(set(steps)) and steps[0] == 0 and steps[-1] == 2_000_000
        assert source["repos"] == {r: f"google/multiberts-seed_{seed}-step_{s // 1000}k" for r, s in
                                   zip(revisions, steps, strict=True)}  # fmt: skip
        assert source["allow_pickle"] is True and training["models"][name]["init"] is None
    assert seeds == {0, 1, 2, 3, 4}


def test_the_olmo2_series_is_its_stage1_branches(training):
    names = [n for n in training["series"]["hub_models"] if "OLMo-2" in training["models"][n]["pretrained"]["repo_id"]]
    assert len(names) == 1
    revisions, steps = _steps(training, names[0])
    tokens = [tokens_of(r) for r in revisions]
    assert len(revisions) >= 10 and all(r.startswith("stage1-") for r in revisions)
    assert steps == sorted(set(steps)) and steps[0] == 0 and tokens == sorted(tokens) and tokens[-1] >= 4 * 10**12


def test_a_series_model_without_revisions_is_refused():
    with pytest.raises(ConfigError, match="series.hub_models names 'gpt2'"):
        check_config(_config({"series": {"hub_models": ["gpt2"]}}), ROOT / "workflow/schemas")


def test_a_model_named_as_the_offline_series_is_refused():
    """The offline series' tokenised inputs lie where a model of its name would put its own."""
    from san.rank_collapse.series.spec import MODEL

    cfg = _config({})
    cfg["models"][MODEL] = cfg["models"]["gpt2"]
    with pytest.raises(ConfigError, match=f"'models.{MODEL}': the name is the offline training series'"):
        check_config(cfg, ROOT / "workflow/schemas")


def test_repositories_that_do_not_match_the_revisions_are_refused(training):
    """A repository for a revision the series does not list is refused by the cross-check; a repository name that is
    no hub id by the schema."""

    def repos(extra):
        return {"models": {"multiberts-seed0": {"pretrained": {"repos": extra}}}}

    schemas = ROOT / "workflow/schemas"
    with pytest.raises(ConfigError, match=r"'models.multiberts-seed0.pretrained.repos'.*revisions lists"):
        check_config(overlay_config(training, repos({"step7000": "google/multiberts-seed_0-step_7k"})), schemas)
    with pytest.raises(ConfigError, match="repos"):
        check_config(overlay_config(training, repos({"step0": "not a repository"})), schemas)
