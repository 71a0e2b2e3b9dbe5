"""Path claims (Fig. 4 sampled paths and the exact decomposition): each verdict once passing, once failing, with
the config's thresholds."""

import numpy as np
import pytest
import xarray as xr

from san.paths.claims import over_seeds, path_decomposition_claims, path_effectiveness_claims, seed_verdict

from helpers import default_config

REPORT = default_config()["report"]
#: the thresholds of one seed's claim (the seed rule and the spread are applied by ``over_seeds``)
PATHS = {k: v for k, v in REPORT["paths"].items() if k not in ("seeds", "sigmas")}
#: the seed rule of ``over_seeds``
SEEDS = {**REPORT["paths"]["seeds"], "sigmas": REPORT["paths"]["sigmas"]}
#: the decomposition's claim takes no accuracy margin
EXACT = {**{k: v for k, v in PATHS.items() if k != "margin"}, **REPORT["path_decomposition"]}


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


def test_short_beats_long_and_models_learn_need_the_configured_margin():
    """A lead of 0.01 in accuracy is within the margin (0.02): neither comparison holds on it."""
    assert PATHS["margin"] > 0.01
    close = path_effectiveness_claims({"t": _sampled(0.41, 0.49, full=0.31, chance=0.30)}, **PATHS)
    assert close["short_beats_long"] is False and close["models_learn"] is False
    assert close["differences"]["short_beats_long"]["t"] == pytest.approx(0.01)
    loose = path_effectiveness_claims({"t": _sampled(0.41, 0.49, full=0.31, chance=0.30)}, **{**PATHS, "margin": 0.0})
    assert loose["short_beats_long"] is True and loose["models_learn"] is True


def _seeded(leads: list[float]) -> xr.Dataset:
    """One task over seeds: short paths ahead of the longest (at the input-blind level) by ``leads[s]`` in seed
    ``s``."""
    seeds = [_sampled(0.6 + d, 0.6, chance=0.6) for d in leads]
    return xr.concat(seeds, dim="seed").assign_coords(seed=range(len(leads)))


def test_comparisons_are_judged_against_the_seed_spread():
    """Every seed ahead by more than the margin, but the mean less two standard errors is not: fails; a steady lead
    passes; and the seed-by-seed rule alone would have passed the noisy one."""
    seeds = SEEDS
    steady = over_seeds(path_effectiveness_claims, {"t": _seeded([0.30, 0.31, 0.29])}, **seeds, **PATHS)
    assert steady["short_beats_long"] is True and steady["spread"]["short_beats_long"]["t"]["seeds"] == 3
    noisy = over_seeds(path_effectiveness_claims, {"t": _seeded([0.025, 0.4, 0.03])}, **seeds, **PATHS)
    assert all(v["short_beats_long"] for v in noisy["per_seed"]["t"].values())
    assert noisy["short_beats_long"] is False
    assert over_seeds(path_effectiveness_claims, {"t": _seeded([0.025, 0.4, 0.03])}, **{**seeds, "sigmas": 0.0},
                      **PATHS)["short_beats_long"] is True  # fmt: skip
    rows = {r["key"]: r["verdict"] for r in noisy["verdicts"]}
    assert rows["short_beats_long"] == "fails" and rows["models_learn"] == "holds"


def test_path_claims_are_not_judged_on_zero_evidence():
    assert path_effectiveness_claims({}, **PATHS)["short_beats_long"] is None
    assert path_decomposition_claims({}, **EXACT)["exact"] is None
    no_gain = path_decomposition_claims({"t": _exact(0.8, 1e-14).assign(chance_accuracy=0.95)}, **EXACT)
    assert no_gain["short_carry_most_of_gain"] is None, "a model below the input-blind level has no gain to share"
    assert seed_verdict([], "every_seed", 1.0) is None and seed_verdict([None, None], "share", 0.5) is None


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
    kw = EXACT
    good = path_decomposition_claims({"t": _exact(0.8, 1e-14)}, **kw)
    assert good["exact"] and good["short_carry_most_of_gain"]
    assert good["per_task"]["t"]["shortest_within_tolerance"] == 3
    bad = path_decomposition_claims({"t": _exact(0.5, 1e-6)}, **kw)  # a third of the gain; error above exact
    assert not bad["exact"] and not bad["short_carry_most_of_gain"]
    assert path_decomposition_claims({"t": _exact(0.5, 1e-6)}, **{**kw, "most": 0.3})["short_carry_most_of_gain"]


def _rows(out: dict) -> dict[str, dict]:
    return {r["key"]: r for r in out["verdicts"]}


def test_path_effectiveness_controls_fail_against_a_right_answer():
    """Each control puts in the place of the side the claim favours one it must not beat: the longest paths as the
    model (0.2 against chance 0.3), the full model as the longest paths (short 0.8 against 0.9), the longest paths
    as the short ones (a share of -1/6 of the gain)."""
    rows = _rows(path_effectiveness_claims({"t": _sampled(0.8, 0.2)}, **PATHS))
    for key in ("models_learn", "short_beats_long", "short_reach_most"):
        assert rows[key]["kind"] == "scientific" and rows[key]["positive_control"]["fails_as_it_must"] is True, key
        assert rows[key]["verdict"] == "holds", key
    # long paths as good as the short ones and the full model: every control passes too, so no row has power
    flat = _rows(path_effectiveness_claims({"t": _sampled(0.95, 0.95, full=0.9, chance=0.3)}, **PATHS))
    assert flat["models_learn"]["holds"] is True and flat["models_learn"]["verdict"] == "no power"
    assert flat["short_reach_most"]["verdict"] == "no power"
    assert flat["short_beats_long"]["holds"] is False and flat["short_beats_long"]["verdict"] == "fails"


def test_verdicts_over_seeds_keep_the_no_power_state():
    flat = xr.concat([_sampled(0.95, 0.95)] * 3, dim="seed").assign_coords(seed=range(3))
    out = over_seeds(path_effectiveness_claims, {"t": flat}, **SEEDS, **PATHS)
    assert _rows(out)["models_learn"]["verdict"] == "no power"


def test_decomposition_control_is_the_input_only_truncation():
    good = _rows(path_decomposition_claims({"t": _exact(0.8, 1e-14)}, **EXACT))
    # K = 0 reaches 0.3, the input-blind level: no share of the gain
    assert good["short_carry_most_of_gain"]["positive_control"]["fails_as_it_must"] is True
    assert good["short_carry_most_of_gain"]["verdict"] == "holds" and good["exact"]["kind"] == "regression"
    # a model whose K = 0 truncation already carries the gain: the test cannot tell short paths from none
    shallow = _exact(0.8, 1e-14)
    shallow["truncated_accuracy"].loc[{"state": "trained", "max_path_length": 0}] = 0.85
    row = _rows(path_decomposition_claims({"t": shallow}, **EXACT))["short_carry_most_of_gain"]
    assert row["holds"] is True and row["verdict"] == "no power"
