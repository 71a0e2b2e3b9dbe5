"""Path claims (Fig. 4 sampled paths and the exact decomposition): each verdict once passing, once failing, with
the config's thresholds."""

import numpy as np
import xarray as xr

from san.paths.claims import path_decomposition_claims, path_effectiveness_claims

from helpers import default_config

REPORT = default_config()["report"]
#: the thresholds of one seed's claim (the seed rule is applied by ``over_seeds``)
PATHS = {k: v for k, v in REPORT["paths"].items() if k != "seeds"}


def _sampled(short_acc: float, long_acc: float, full: float = 0.9, chance: float = 0.3) -> xr.Dataset:
    acc = np.array([[short_acc, short_acc, 0.5, long_acc]] * 2)[:, :, None].repeat(2, axis=-1)
    return xr.Dataset(
        {
            "accuracy": (("n_paths", "path_length", "repeat"), acc),
            "full_model_accuracy": full,
            "chance_accuracy": chance,
        },
        coords={"n_paths": [5, 20], "path_length": [0, 1, 2, 3]},
    )


def test_short_paths_reach_most_only_above_the_configured_share():
    good = path_effectiveness_claims({"t": _sampled(0.8, 0.2)}, **PATHS)
    assert good["short_reach_most"] and good["short_beats_long"] and good["models_learn"]
    bad = path_effectiveness_claims({"t": _sampled(0.5, 0.6)}, **PATHS)  # 1/3 of the gain; long wins
    assert not bad["short_reach_most"] and not bad["short_beats_long"]
    assert not path_effectiveness_claims({"t": _sampled(0.8, 0.2, full=0.2)}, **PATHS)["models_learn"]
    # an edited threshold flips the verdict: 1/3 of the gain is "most" when most = 0.3
    assert path_effectiveness_claims({"t": _sampled(0.5, 0.6)}, short=2, most=0.3)["short_reach_most"]


def _exact(at_two: float, error: float) -> xr.Dataset:
    k = [0, 1, 2, 3]
    trunc = np.array([[0.3, 0.5, at_two, 0.9], [0.3, 0.3, 0.3, 0.4]])
    share = np.array([[0.1, 0.5, 0.3, 0.1], [0.2, 0.3, 0.3, 0.2]])
    return xr.Dataset(
        {
            "truncated_accuracy": (("state", "max_path_length"), trunc),
            "full_accuracy": ("state", [0.9, 0.4]),
            "chance_accuracy": 0.3,
            "single_length_accuracy": (("state", "path_length"), trunc),
            "norm_share": (("state", "path_length"), share),
            "reconstruction_error": ("state", [error, error]),
        },
        coords={"state": ["trained", "init"], "max_path_length": k, "path_length": k},
    )


def test_exact_decomposition_claims_pass_and_fail():
    kw = {**PATHS, **REPORT["path_decomposition"]}
    good = path_decomposition_claims({"t": _exact(0.8, 1e-14)}, **kw)
    assert good["exact"] and good["short_carry_most_of_gain"]
    assert good["per_task"]["t"]["shortest_within_tolerance"] == 3
    bad = path_decomposition_claims({"t": _exact(0.5, 1e-6)}, **kw)  # a third of the gain; error above exact
    assert not bad["exact"] and not bad["short_carry_most_of_gain"]
    assert path_decomposition_claims({"t": _exact(0.5, 1e-6)}, **{**kw, "most": 0.3})["short_carry_most_of_gain"]
