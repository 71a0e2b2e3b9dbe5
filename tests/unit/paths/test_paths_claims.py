"""Path claims (Fig. 4 sampled paths and the exact decomposition) on hand-made results, with the config's thresholds:
every scientific row once holding with its placebo failing (numeric power), once holding with its placebo holding
too ("no power"), once failing; the seed rule and the spread over seeds; every row re-derived from its own numbers."""

import json

import numpy as np
import pytest
import xarray as xr

from san.claims import verdicts as V
from san.core.config import ConfigError
from san.paths.claims import SeedRule, check_config, path_decomposition_claims, path_effectiveness_claims, seed_rule

from helpers import default_config

REPORT = default_config()["report"]
CFG = REPORT["paths"]
#: the sampled paths' claim at the config's settings
PATHS = {"short": CFG["short"], "most": CFG["most"], "margin": CFG["margin"], "seeds": seed_rule(CFG),
         "init_control": CFG["init_control"], "input_path_control": CFG["input_path_control"]}  # fmt: skip
#: the exact decomposition's claim at the config's settings
EXACT = {"short": CFG["short"], "most": CFG["most"], "seeds": seed_rule(CFG), **REPORT["path_decomposition"]}
WIGGLE = (0.0, 0.01, -0.01)


def _sampled(short: float, long: float, full: float = 0.9, chance: float = 0.3, k0: float = 0.3) -> xr.Dataset:
    """Sampled paths of one task over three seeds (each seed's numbers wiggled by at most 0.01): accuracy by path
    length 0..3 (``k0``, the short paths at lengths 1 and 2, 0.5, the longest ``long``), the full model and the
    input-blind level."""
    acc = np.array([[[k0, short + w, short + w, 0.5, long + w]] * 2 for w in WIGGLE])[..., None].repeat(2, axis=-1)
    return xr.Dataset(
        {
            "accuracy": (("seed", "n_paths", "path_length", "repeat"), acc[:, :, [0, 1, 2, 4], :]),
            "full_model_accuracy": ("seed", [full + w for w in WIGGLE]),
            "chance_accuracy": ("seed", [chance] * 3),
        },
        coords={"seed": [0, 1, 2], "n_paths": [5, 20], "path_length": [0, 1, 2, 3]},
    )


def _exact(at_two: float = 0.8, init_full: float = 0.3, init_short: float = 0.3, init_long: float = 0.3,
           k0: float = 0.3, error: float = 1e-14) -> xr.Dataset:  # fmt: skip
    """The exact decomposition of the same three seeds, trained and at initialisation: truncated at K = 0..3 (``k0``,
    0.5, ``at_two``, 0.9 = the full model), and the untrained model's accuracy and single-length accuracies (short
    lengths ``init_short``, the longest ``init_long``)."""
    k = [0, 1, 2, 3]
    trunc = np.array([[k0, 0.5, at_two, 0.9], [0.3, 0.3, 0.3, 0.3]])
    single = np.array([[k0, 0.6, 0.5, 0.2], [0.3, init_short, init_short, init_long]])
    share = np.array([[0.1, 0.5, 0.3, 0.1], [0.2, 0.3, 0.3, 0.2]])
    one = xr.Dataset(
        {
            "truncated_accuracy": (("state", "max_path_length"), trunc),
            "full_accuracy": ("state", [0.9, init_full]),
            "chance_accuracy": 0.3,
            "single_length_accuracy": (("state", "path_length"), single),
            "norm_share": (("state", "path_length"), share),
            "reconstruction_error": ("state", [error, error]),
        },
        coords={"state": ["trained", "init"], "max_path_length": k, "path_length": k},
    )
    trained = one["state"] == "trained"
    seeds = [one.assign({v: one[v] + w * trained for v in ("truncated_accuracy", "full_accuracy")}) for w in WIGGLE]
    return xr.concat(seeds, dim="seed", data_vars="all").assign_coords(seed=[0, 1, 2])


def _rows(out: dict) -> dict[str, dict]:
    return {r["key"]: r for r in out["verdicts"]}


def _effectiveness(sampled: xr.Dataset, exact: xr.Dataset, **kw) -> dict[str, dict]:
    out = path_effectiveness_claims({"t": sampled}, {"t": exact}, **{**PATHS, **kw})
    rows = _rows(out)
    for r in rows.values():
        assert V.rederive(json.loads(json.dumps(r))) == [], r["key"]
    return rows


def _decomposition(exact: xr.Dataset, **kw) -> dict[str, dict]:
    rows = _rows(path_decomposition_claims({"t": exact}, **{**EXACT, **kw}))
    for r in rows.values():
        assert V.rederive(json.loads(json.dumps(r))) == [], r["key"]
    return rows


def test_models_learn_against_the_untrained_model():
    """The trained model 0.6 above chance, the untrained at chance: holds with power; a model already as good at
    initialisation: the test cannot tell training from none; a model at chance fails."""
    row = _effectiveness(_sampled(0.8, 0.2), _exact())["models_learn"]
    assert row["verdict"] == "holds" and row["positive_control"]["verdict"] == "fails"
    pc = row["positive_control"]
    assert pc["key"] == "report.paths.init_control" and pc["setting"] == CFG["init_control"]
    # the gain 0.6 - 2 s.e. (0.0058 x 2) falls to the margin 0.02 near 96 % of the way to the untrained model
    assert 0.9 <= pc["power"] < 1.0 and "untrained" in pc["reference"]
    assert _effectiveness(_sampled(0.8, 0.2), _exact(init_full=0.9))["models_learn"]["verdict"] == "no power"
    assert _effectiveness(_sampled(0.8, 0.2, full=0.31), _exact())["models_learn"]["verdict"] == "fails"


def test_short_beats_long_against_the_untrained_model():
    """Short paths 0.6 ahead of the longest: holds when the untrained model's single lengths are level; no power
    when the untrained model has the same gap (an architectural gap, not learned); fails when long paths win."""
    row = _effectiveness(_sampled(0.8, 0.2), _exact())["short_beats_long"]
    assert row["verdict"] == "holds" and row["positive_control"]["power"] > 0.5
    gap_at_init = _effectiveness(_sampled(0.8, 0.2), _exact(init_short=0.8, init_long=0.2))["short_beats_long"]
    assert gap_at_init["holds"] is True and gap_at_init["verdict"] == "no power"
    assert _effectiveness(_sampled(0.5, 0.6), _exact())["short_beats_long"]["verdict"] == "fails"


def test_short_reach_most_against_the_input_path():
    """Short paths reach 5/6 of the gain, the input path none: holds; an input path alone at 5/6 too: no power; a
    third of the gain fails."""
    row = _effectiveness(_sampled(0.8, 0.2), _exact())["short_reach_most"]
    assert row["verdict"] == "holds" and row["threshold"]["key"] == "report.paths.most"
    assert row["positive_control"]["key"] == "report.paths.input_path_control"
    assert _effectiveness(_sampled(0.8, 0.2, k0=0.8), _exact())["short_reach_most"]["verdict"] == "no power"
    assert _effectiveness(_sampled(0.5, 0.2), _exact())["short_reach_most"]["verdict"] == "fails"
    # an edited threshold flips the verdict: 1/3 of the gain is "most" when most = 0.3
    assert _effectiveness(_sampled(0.5, 0.2), _exact(), most=0.3)["short_reach_most"]["holds"] is True


def test_short_carry_most_of_gain_against_the_input_path():
    """K = 2 carries 5/6 of the gain, K = 0 none: holds; a K = 0 truncation that already carries it: no power; a
    third of the gain fails, and an error above `exact` fails the regression row."""
    rows = _decomposition(_exact())
    assert rows["short_carry_most_of_gain"]["verdict"] == "holds" and rows["exact"]["kind"] == "regression"
    assert rows["short_carry_most_of_gain"]["positive_control"]["key"] == "report.path_decomposition.input_path_control"
    shallow = _decomposition(_exact(k0=0.85))["short_carry_most_of_gain"]
    assert shallow["holds"] is True and shallow["verdict"] == "no power"
    bad = _decomposition(_exact(at_two=0.5, error=1e-6))
    assert bad["short_carry_most_of_gain"]["verdict"] == "fails" and bad["exact"]["verdict"] == "fails"
    out = path_decomposition_claims({"t": _exact()}, **EXACT)
    assert out["per_task"]["t"]["shortest_within_tolerance"] == 3 and out["exact"] is True


def test_comparisons_need_the_configured_margin():
    """A lead of 0.01 in accuracy is within the margin (0.02): neither comparison holds on it."""
    assert CFG["margin"] > 0.01
    close = _effectiveness(_sampled(0.41, 0.40, full=0.31, chance=0.30), _exact())
    assert close["short_beats_long"]["holds"] is False and close["models_learn"]["holds"] is False
    loose = _effectiveness(_sampled(0.41, 0.40, full=0.32, chance=0.30), _exact(), margin=0.0)
    assert loose["models_learn"]["holds"] is True


def _seeded(short_by_seed: list[float]) -> xr.Dataset:
    """One task over seeds: the short paths reach ``short_by_seed[s]`` in seed ``s`` (full 0.9, chance 0.1, the
    longest 0.2)."""
    acc = np.array([[0.1, s, 0.3, 0.2] for s in short_by_seed])[:, None, :, None]
    n = len(short_by_seed)
    return xr.Dataset(
        {
            "accuracy": (("seed", "n_paths", "path_length", "repeat"), acc),
            "full_model_accuracy": (("seed",), np.full(n, 0.9)),
            "chance_accuracy": (("seed",), np.full(n, 0.1)),
        },
        coords={"seed": np.arange(n), "n_paths": [5], "path_length": np.arange(4)},
    )


def test_a_claim_fails_when_one_seed_fails_though_the_mean_passes():
    """Seeds reaching 100 %, 100 % and 38 % of the gain: the mean (79 %) passes, every_seed fails; the share rule at
    0.6 passes; the mean less two standard errors (0.31) fails whatever the seed rule."""
    results = {"t": _seeded([0.9, 0.9, 0.4])}
    reach = path_effectiveness_claims(results, short=1, most=0.5, seeds=SeedRule("every_seed"))["short_reach_most"]
    assert reach is False
    assert path_effectiveness_claims(results, short=1, most=0.5, seeds=SeedRule("share", 0.6))["short_reach_most"]
    assert not path_effectiveness_claims(results, short=1, most=0.5, seeds=SeedRule("share", 0.6, 2.0))[
        "short_reach_most"
    ]
    out = path_effectiveness_claims({"t": _seeded([0.8, 0.7, 0.85])}, short=1, most=0.5, seeds=SeedRule())
    assert out["short_reach_most"] is True and out["per_seed"]["short_reach_most"]["t"]["1"]["value"] == pytest.approx(
        0.75
    )


def test_comparisons_are_judged_against_the_seed_spread():
    """Every seed ahead of the longest paths by more than the margin, but the mean less two standard errors is not:
    fails; a steady lead passes; without the spread the noisy one passes too."""
    steady = path_effectiveness_claims({"t": _seeded([0.5, 0.51, 0.49])}, short=1, most=0.5, margin=0.02,
                                       seeds=SeedRule(sigmas=2.0))  # fmt: skip
    assert steady["short_beats_long"] is True
    noisy = {"t": _seeded([0.225, 0.6, 0.23])}
    assert path_effectiveness_claims(noisy, short=1, most=0.5, margin=0.02, seeds=SeedRule(sigmas=2.0))[
        "short_beats_long"
    ] is False  # fmt: skip
    assert path_effectiveness_claims(noisy, short=1, most=0.5, margin=0.02, seeds=SeedRule())["short_beats_long"]


def test_the_seed_rule_is_the_seed_ranked_at_the_share():
    t = V.Threshold(0.5, above=True, key="k")
    items = SeedRule("share", 0.6).items("t", [0, 1, 2, 3, 4], np.array([0.9, 0.8, 0.6, 0.4, np.nan]), t)
    # 4 judged seeds, at least 60 %: 3 must clear, so the third best decides
    assert [m.value for m in items[1:]] == [0.6] and items[1].item == "t, seed 2"
    assert SeedRule("every_seed").items("t", [0, 1], np.array([0.9, np.nan]), t)[2].evidence == 0
    with pytest.raises(ValueError, match="report.paths.seeds.rule"):
        SeedRule("majority").items("t", [0], np.array([0.9]), t)


def test_path_claims_are_not_judged_on_zero_evidence():
    assert path_effectiveness_claims({}, short=2, most=0.5)["short_beats_long"] is None
    assert path_decomposition_claims({}, **EXACT)["exact"] is None
    no_gain = path_decomposition_claims({"t": _exact().assign(chance_accuracy=0.95)}, **EXACT)
    assert no_gain["short_carry_most_of_gain"] is None, "a model below the input-blind level has no gain to share"
    # without the exact decomposition's initial state there is no untrained placebo: the control is not judged
    rows = _rows(path_effectiveness_claims({"t": _sampled(0.8, 0.2)}, **PATHS))
    assert rows["models_learn"]["holds"] is True and rows["models_learn"]["verdict"] == "not judged"


def test_check_config_refuses_meaningless_controls():
    def edited(section: str, **kw) -> dict:
        return {**REPORT, section: {**REPORT[section], **kw}}

    check_config(REPORT)
    with pytest.raises(ConfigError, match="report.paths.init_control"):
        check_config(edited("paths", init_control=0.0))
    with pytest.raises(ConfigError, match="report.path_decomposition.input_path_control"):
        check_config(edited("path_decomposition", input_path_control=1.5))
    with pytest.raises(ConfigError, match="min_share = 0 with rule share"):
        check_config(edited("paths", seeds={"rule": "share", "min_share": 0.0}))
    with pytest.raises(ConfigError, match="min_share = 0.5 is read only with rule share"):
        check_config(edited("paths", seeds={"rule": "every_seed", "min_share": 0.5}))
