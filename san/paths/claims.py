"""Claims of the path experiments (Fig. 4's sampled paths and the exact path-length decomposition), for the report
and summary.json.

Torch-free: it reads the ``results/paths/{task}.nc`` (sampled paths) and ``results/paths/{task}_exact.nc`` (exact
decomposition, trained and at initialisation) datasets only. Every scientific row is one check
(:func:`san.claims.verdicts.check`) over the tasks and their training seeds: per task the mean over seeds, less
``sigmas`` standard errors (the one spread rule), and the seed rule of ``report.paths.seeds`` (every seed, or a share
of them) must clear the threshold; the claim is universal over tasks. Each row's positive control is a placebo, the
same test measured where the claim's own theory says the effect must vanish, reached by moving every seed's number a
share ``s`` of the way toward it (``s`` = 1 is the placebo itself, its setting in config):

- "the models learn" and "short paths beat long": **the untrained model** (the same seed's model at initialisation,
  from the exact decomposition): a gain or a short-long gap that exists before training is no finding of training;
- "short paths reach (carry) most of the gain": **the input path alone** (length 0, the embedding's path) in place
  of the short paths: a model whose embedding path alone carries most of the gain shows nothing about short paths.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from san.claims import verdicts as V
from san.core.config import ConfigError

SOURCE = "Dong et al. 2021, Fig. 4"
#: the placebo of "models learn" and "short beats long", with ``{s}`` where its share of the way goes
UNTRAINED = "the untrained model ({s:g} of the way from each seed's trained model to the same model at initialisation)"
#: the placebo of the short paths' share of the gain
INPUT_PATH = "the input path alone ({s:g} of the way from the short paths to the length-0 path)"


def _f(x: Any) -> float:
    return float(np.asarray(x))


def _number(x: float) -> float | None:
    """``x`` as summary.json records it: None unless finite."""
    return float(x) if np.isfinite(x) else None


@dataclass(frozen=True)
class SeedRule:
    """How a path claim is judged over a task's training seeds: ``rule`` every_seed (every seed clears the
    threshold) or share (at least ``min_share`` of the seeds with a number do), and the seeds' mean less ``sigmas``
    standard errors (:func:`san.claims.verdicts.spread`) clears it too."""

    rule: str = "every_seed"
    min_share: float = 1.0
    sigmas: float = 0.0

    def items(self, task: str, seeds: list, values: np.ndarray, threshold: V.Threshold) -> list[V.Measure]:
        """The measures of one task that must each clear ``threshold``: the seed mean with its standard error and
        the seed rule's seeds (every seed; or, with share, the seed ranked at ``min_share`` of the judged seeds
        counted from the best: the claim holds in that share exactly when this seed clears)."""
        v = np.asarray(values, dtype=float)
        mean, se, n = V.spread(v)
        each = [V.Measure(x, 0.0, int(np.isfinite(x)), f"{task}, seed {s}") for s, x in zip(seeds, v, strict=True)]
        out = [V.Measure(mean, se, n, f"{task}, mean over {n} seeds")]
        if self.rule == "every_seed":
            return out + each
        if self.rule != "share":
            raise ValueError(f"unknown seed rule {self.rule!r}; expected every_seed or share "
                             "(config key report.paths.seeds.rule)")  # fmt: skip
        judged = sorted((m for m in each if m.evidence), key=threshold.margin, reverse=True)
        if not judged:
            return out
        return out + [judged[max(1, math.ceil(self.min_share * len(judged) - 1e-9)) - 1]]


@dataclass(frozen=True)
class TaskValues:
    """One task's per-seed numbers of a claim (``right``) and of its placebo (``wrong``), seed by seed."""

    seeds: list
    right: np.ndarray
    wrong: np.ndarray

    def moved(self, s: float) -> np.ndarray:
        """Every seed's number moved ``s`` of the way toward its placebo (:func:`san.claims.verdicts.toward`)."""
        return V.toward(self.right, self.wrong, s)

    def reading(self, name: str) -> str:
        """The claim's and the placebo's seed means, for a row's detail."""
        (a, sa, n), (b, sb, m) = V.spread(self.right), V.spread(self.wrong)
        return f"{name} {a:.3f} ± {sa:.3f} ({n} seeds), placebo {b:.3f} ± {sb:.3f} ({m} seeds)"


def _statistic(values: Mapping[str, TaskValues], threshold: V.Threshold, seeds: SeedRule) -> Callable[[float], Any]:
    """The check's statistic: the item (task mean or seed) that clears ``threshold`` least, every seed's number
    moved ``s`` of the way toward its placebo."""

    def statistic(s: float) -> V.Measure:
        items = [m for task, t in values.items() for m in seeds.items(task, t.seeds, t.moved(s), threshold)]
        return V.worst(items, threshold)

    return statistic


def _seeded(x: xr.DataArray) -> xr.DataArray:
    """``x`` with a ``seed`` dimension (one seed, 0, where it has none)."""
    return x if "seed" in x.dims else x.expand_dims(seed=[0])


def _on_seeds(x: xr.DataArray | None, seeds: list) -> np.ndarray:
    """The per-seed values of ``x`` at ``seeds`` (NaN where ``x`` is missing or lacks one of them; the one value
    for every seed where ``x`` has no seed dimension)."""
    if x is None:
        return np.full(len(seeds), np.nan)
    if "seed" not in x.dims:  # the same for every seed
        return np.full(len(seeds), _f(x))
    return np.array([_f(x.sel(seed=s)) if s in x["seed"].values else np.nan for s in seeds])


def _share(part: np.ndarray, chance: np.ndarray, full: np.ndarray) -> np.ndarray:
    """``part``'s share of the gain of ``full`` over ``chance``; NaN where there is no gain to share."""
    gain = full - chance
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gain > 0, (part - chance) / gain, np.nan)


def _check(key: str, statement: str, form: str, test: str, values: Mapping[str, TaskValues], threshold: V.Threshold,
           seeds: SeedRule, wrong: V.Wrong, detail: str, source: str = SOURCE) -> dict[str, Any]:  # fmt: skip
    """A path row (:func:`san.claims.verdicts.check`) over tasks and seeds."""
    return V.check(key, statement, form=form, source=source, test=test, detail=detail, threshold=threshold,
                   wrong=wrong, statistic=_statistic(values, threshold, seeds))  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------
# Sampled paths (Fig. 4)


def _effectiveness_task(ds: xr.Dataset, short: int) -> dict[str, Any]:
    """One task's numbers of :func:`path_effectiveness_claims` (mean over repeats and seeds, the largest
    ``n_paths``), for the caption and the tables."""
    ds = ds.mean("seed", keep_attrs=True) if "seed" in ds.dims else ds
    acc = ds["accuracy"].mean("repeat")
    n = int(ds["n_paths"].max())
    by_len = acc.sel(n_paths=n)
    lengths = by_len["path_length"].values
    short_best = _f(by_len.sel(path_length=[k for k in lengths if 1 <= k <= short]).max())
    full, chance = _f(ds["full_model_accuracy"]), _f(ds["chance_accuracy"])
    gain = full - chance
    return {
        "full": full,
        "chance": chance,
        "n_paths": n,
        "by_length": {int(k): _f(v) for k, v in zip(lengths, by_len.values, strict=True)},
        "short_best": short_best,
        "longest": _f(by_len.isel(path_length=-1)),
        "short_share_of_gain": (short_best - chance) / gain if gain > 0 else float("nan"),
        "longest_share_of_gain": (_f(by_len.isel(path_length=-1)) - chance) / gain if gain > 0 else float("nan"),
    }


def _sampled_by_seed(ds: xr.Dataset, exact: xr.Dataset | None, short: int) -> dict[str, Any]:
    """Per seed of one task: the sampled paths' numbers (trained model, largest ``n_paths``, mean over repeats)
    and, from the exact decomposition at initialisation, the untrained model's accuracy and its short-long gap
    (NaN without an initial state)."""
    by_len = _seeded(ds["accuracy"].mean("repeat").sel(n_paths=int(ds["n_paths"].max())))
    seeds = [s.item() for s in by_len["seed"].values]
    lengths = by_len["path_length"].values
    short_k = [k for k in lengths if 1 <= k <= short]
    init = exact.sel(state="init") if exact is not None and "init" in exact["state"].values else None
    init_single = None if init is None else init["single_length_accuracy"]
    init_gap = None if init is None else (init_single.sel(path_length=short_k).max("path_length")
                                          - init_single.isel(path_length=-1))  # fmt: skip
    return {
        "seeds": seeds,
        "full": _on_seeds(ds["full_model_accuracy"], seeds),
        "chance": _on_seeds(ds["chance_accuracy"], seeds),
        "short_best": _on_seeds(by_len.sel(path_length=short_k).max("path_length"), seeds),
        "longest": _on_seeds(by_len.isel(path_length=-1), seeds),
        "input_path": _on_seeds(by_len.sel(path_length=0) if 0 in lengths else None, seeds),
        "init_full": _on_seeds(None if init is None else init["full_accuracy"], seeds),
        "init_gap": _on_seeds(init_gap, seeds),
    }


def _effectiveness_values(per_seed: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, TaskValues]]:
    """Per row and task: the claim's per-seed numbers and their placebo's (see the module docstring)."""
    out: dict[str, dict[str, TaskValues]] = {"models_learn": {}, "short_beats_long": {}, "short_reach_most": {}}
    for task, p in per_seed.items():
        seeds, chance, full = p["seeds"], p["chance"], p["full"]
        out["models_learn"][task] = TaskValues(seeds, full - chance, p["init_full"] - chance)
        out["short_beats_long"][task] = TaskValues(seeds, p["short_best"] - p["longest"], p["init_gap"])
        out["short_reach_most"][task] = TaskValues(
            seeds, _share(p["short_best"], chance, full), _share(p["input_path"], chance, full)
        )
    return out


def _effectiveness_caption(per_task: Mapping[str, Mapping[str, Any]], short: int) -> str:
    """The caption of :func:`path_effectiveness_claims`: per task, the full model, chance, the best short path and
    its share of the gain over chance, and the longest paths (means over seeds)."""
    return "; ".join(
        f"{task}: full model {t['full']:.3f}, chance {t['chance']:.3f}, best short path (length ≤ {short}, "
        f"{t['n_paths']} paths) {t['short_best']:.3f} ({100 * t['short_share_of_gain']:.0f}% of the full model's gain "
        f"over chance), longest paths {t['longest']:.3f}"
        for task, t in per_task.items()
    )


def _details(values: Mapping[str, TaskValues], name: str) -> str:
    return "; ".join(f"{task}: {t.reading(name)}" for task, t in values.items())


def _effectiveness_rows(
    values: Mapping[str, Mapping[str, TaskValues]], *, short: int, most: float, margin: float, seeds: SeedRule,
    init_control: float, input_path_control: float,
) -> list[dict[str, Any]]:  # fmt: skip
    """The three rows of :func:`path_effectiveness_claims`."""
    k = seeds.sigmas
    by = f"after {k:g} standard errors over seeds, under the seed rule {seeds.rule}"
    lead = V.Threshold(margin, above=True, key="report.paths.margin", sigmas=k)
    init = V.Wrong.toward(UNTRAINED, init_control, "report.paths.init_control")
    return [
        _check("models_learn", "the trained models learn their task", V.OBSERVATION,
               f"the full model's accuracy beats the input-blind level by more than {margin:g} on every task ({by})",
               values["models_learn"], lead, seeds, init,
               _details(values["models_learn"], "full model - input-blind")),
        _check("short_beats_long", "short paths are more effective than long ones", V.OBSERVATION,
               f"paths of length <= {short} beat the longest paths by more than {margin:g} on every task ({by}); the "
               "placebo's gap is that of the exact single-length accuracies at initialisation",
               values["short_beats_long"], lead, seeds, init,
               _details(values["short_beats_long"], "best short - longest")),
        _check("short_reach_most", "short paths reach most of the model's accuracy", V.QUANTITATIVE,
               f"paths of length <= {short} reach more than {most:.0%} of the gain over the input-blind level on every "
               f"task ({by})", values["short_reach_most"],
               V.Threshold(most, above=True, key="report.paths.most", sigmas=k), seeds,
               V.Wrong.toward(INPUT_PATH, input_path_control, "report.paths.input_path_control"),
               _details(values["short_reach_most"], "share of the gain")),
    ]  # fmt: skip


def path_effectiveness_claims(
    results: Mapping[str, xr.Dataset],
    exact: Mapping[str, xr.Dataset] | None = None,
    *,
    short: int,
    most: float,
    margin: float = 0.0,
    seeds: SeedRule = SeedRule(),
    init_control: float = 1.0,
    input_path_control: float = 1.0,
) -> dict[str, Any]:
    """Fig. 4 claim: short paths carry most of the model's accuracy, long paths little.

    Per task (``results``: sampled paths; ``exact``: the exact decomposition, whose initial state is the untrained
    placebo): full-model and chance accuracy, mean accuracy by path length for the largest ``n_paths``, the best
    accuracy reached by paths of length <= ``short`` and by the longest paths; "most" means a share above ``most``
    of the full model's gain over chance. The comparisons ("short paths beat long", "models learn") hold when the
    difference exceeds ``margin`` (accuracy). Each row is judged over tasks and ``seeds``; ``per_seed`` lists each
    seed's numbers."""
    exact = exact or {}
    per_task = {task: _effectiveness_task(ds, short) for task, ds in results.items()}
    per_seed = {task: _sampled_by_seed(ds, exact.get(task), short) for task, ds in results.items()}
    values = _effectiveness_values(per_seed)
    rows = _effectiveness_rows(values, short=short, most=most, margin=margin, seeds=seeds, init_control=init_control,
                               input_path_control=input_path_control)  # fmt: skip
    return {"short": short, "most": most, "margin": margin, **{r["key"]: r["holds"] for r in rows},
            "per_task": per_task, "per_seed": _per_seed_record(values), "seed_rule": seeds.__dict__,
            "caption": _effectiveness_caption(per_task, short), "verdicts": rows}  # fmt: skip


def _per_seed_record(values: Mapping[str, Mapping[str, TaskValues]]) -> dict[str, Any]:
    """Each row's number per task and seed (and its placebo's), as summary.json records them."""
    return {
        key: {task: {str(s): {"value": _number(r), "placebo": _number(w)}
                     for s, r, w in zip(t.seeds, t.right, t.wrong, strict=True)} for task, t in by_task.items()}
        for key, by_task in values.items()
    }  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------
# The exact decomposition


def _task_claims(ds: xr.Dataset, short: int, tolerance: float) -> dict[str, Any]:
    """Numbers of one task (trained weights unless said otherwise; means over seeds), for the caption and the
    tables."""
    ds = ds.mean("seed", keep_attrs=True) if "seed" in ds.dims else ds
    trained = ds.sel(state="trained")
    truncated = trained["truncated_accuracy"]
    full = _f(trained["full_accuracy"])
    chance = _f(ds["chance_accuracy"]) if "chance_accuracy" in ds else float("nan")
    at_short = _f(truncated.sel(max_path_length=min(short, int(truncated["max_path_length"].max()))))
    gain = full - chance
    pairs = list(zip(truncated["max_path_length"].values, truncated.values, strict=True))
    shares = {str(s): ds["norm_share"].sel(state=s) for s in ds["state"].values}
    return {
        "full": full,
        "chance": chance,
        "truncated": {int(k): _f(v) for k, v in pairs},
        "single_length": {
            int(k): _f(v)
            for k, v in zip(trained["path_length"].values, trained["single_length_accuracy"].values, strict=True)
        },
        "at_short": at_short,
        "short_share_of_full": at_short / full if full > 0 else float("nan"),
        "short_share_of_gain": (at_short - chance) / gain if gain > 0 else float("nan"),
        "shortest_within_tolerance": min(int(k) for k, a in pairs if a >= full - tolerance),
        "input_only_share_of_gain": (_f(truncated[0]) - chance) / gain if gain > 0 else float("nan"),
        "norm_share_short": {s: _f(v.sel(path_length=v["path_length"] <= short).sum()) for s, v in shares.items()},
        "mean_length_by_norm": {s: _f((v * v["path_length"]).sum()) for s, v in shares.items()},
        "reconstruction_error": _f(ds["reconstruction_error"].max()),
    }


def _exact_values(ds: xr.Dataset, short: int) -> TaskValues:
    """One task's per-seed share of the gain carried by the expansion truncated at ``K = short``, and its
    placebo's, the expansion truncated at ``K = 0`` (the input path alone)."""
    trained = ds.sel(state="trained")
    truncated = _seeded(trained["truncated_accuracy"])
    seeds = [s.item() for s in truncated["seed"].values]
    full = _on_seeds(trained["full_accuracy"], seeds)
    chance = _on_seeds(ds.get("chance_accuracy"), seeds)
    at_short = _on_seeds(truncated.sel(max_path_length=min(short, int(truncated["max_path_length"].max()))), seeds)
    return TaskValues(seeds, _share(at_short, chance, full),
                      _share(_on_seeds(truncated.isel(max_path_length=0), seeds), chance, full))  # fmt: skip


def _decomposition_caption(per_task: Mapping[str, Mapping[str, Any]], short: int, tolerance: float) -> str:
    """The caption of :func:`path_decomposition_claims` (means over seeds)."""
    return "; ".join(
        f"{task}: paths of length ≤ {short} reach {t['at_short']:.3f} against the full model's {t['full']:.3f} "
        f"({100 * t['short_share_of_full']:.0f}% of its accuracy, {100 * t['short_share_of_gain']:.0f}% of its gain "
        f"over the input-blind {t['chance']:.3f}); within {100 * tolerance:.0f} points of the full model from "
        f"K = {t['shortest_within_tolerance']}; norm share of lengths ≤ {short}: "
        f"{100 * t['norm_share_short']['trained']:.0f}% trained"
        + (f", {100 * t['norm_share_short']['init']:.0f}% at initialisation" if "init" in t["norm_share_short"] else "")
        for task, t in per_task.items()
    )


def path_decomposition_claims(
    datasets: Mapping[str, xr.Dataset],
    *,
    short: int,
    most: float,
    tolerance: float,
    exact: float,
    seeds: SeedRule = SeedRule(),
    input_path_control: float = 1.0,
) -> dict[str, Any]:
    """How much of each model's accuracy paths of length <= ``short`` carry, exactly.

    Per task: the accuracy of the expansion truncated at ``K = short`` as a share of the full model's accuracy and of
    its gain over the input-blind predictor; the shortest K within ``tolerance`` of the full model; the norm share
    of lengths <= ``short`` and the norm-weighted mean path length, trained and at initialisation; the largest
    reconstruction error (the decomposition is exact when it is below ``exact``: a regression row). Short paths
    carry most of the gain when their share of it exceeds ``most`` on every task, judged over ``seeds``; its placebo
    is the expansion truncated at ``K = 0`` (the input path alone)."""
    per_task = {task: _task_claims(ds, short, tolerance) for task, ds in datasets.items()}
    values = {task: _exact_values(ds, short) for task, ds in datasets.items()}
    errors = [t["reconstruction_error"] for t in per_task.values()]
    is_exact = V.every(V.judged(e < exact, int(np.isfinite(e))) for e in errors)
    max_error = max(errors) if errors else float("nan")
    by = f"after {seeds.sigmas:g} standard errors over seeds, under the seed rule {seeds.rule}"
    carry = _check(
        "short_carry_most_of_gain", "short paths carry most of the model's accuracy", V.QUANTITATIVE,
        f"the expansion truncated at K = {short} carries more than {most:.0%} of the gain over the input-blind level "
        f"on every task ({by})", values, V.Threshold(most, above=True, key="report.paths.most", sigmas=seeds.sigmas),
        seeds, V.Wrong.toward(INPUT_PATH, input_path_control, "report.path_decomposition.input_path_control"),
        _details(values, "share of the gain"), source=f"{SOURCE} (exact decomposition)",
    )  # fmt: skip
    verdicts = [
        V.row("exact", f"the exact decomposition reconstructs every trained model (error below {exact:g})",
              kind=V.REGRESSION, form=V.UNIVERSAL, source="this project's exact path decomposition (an identity)",
              holds=is_exact, value=max_error, margin=exact - max_error,
              test=f"largest reconstruction error below {exact:g} on every task",
              bound=V.Threshold(exact, above=False, key="report.path_decomposition.exact")),
        carry,
    ]  # fmt: skip
    return {"short": short, "tolerance": tolerance, "exact": is_exact, "max_reconstruction_error": max_error,
            "most": most, "exact_threshold": exact, "short_carry_most_of_gain": carry["holds"], "per_task": per_task,
            "per_seed": _per_seed_record({"short_carry_most_of_gain": values}), "seed_rule": seeds.__dict__,
            "caption": _decomposition_caption(per_task, short, tolerance), "verdicts": verdicts}  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------
# The wing


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of the paths wing's report keys the schema cannot express; raises
    :class:`~san.core.config.ConfigError` naming the key. ``min_share`` only with the share rule (with every_seed it
    would be ignored silently), and above 0 with it (a share of no seed holds on every data). Every placebo's
    setting in (0, 1]: at 0 the control is the claim itself, above 1 it goes past the placebo (a control that fails
    more easily than the theory it stands for)."""
    seeds = report["paths"]["seeds"]
    if seeds["rule"] == "every_seed" and seeds["min_share"] != 1.0:
        raise ConfigError(
            f"report.paths.seeds.min_share = {seeds['min_share']} is read only with rule share (rule is every_seed)"
        )
    if seeds["rule"] == "share" and seeds["min_share"] <= 0:
        raise ConfigError("report.paths.seeds.min_share = 0 with rule share holds on every data: it must exceed 0")
    for key in ("paths.init_control", "paths.input_path_control", "path_decomposition.input_path_control"):
        section, name = key.split(".")
        if not 0 < report[section][name] <= 1:
            raise ConfigError(f"report.{key} = {report[section][name]} must lie in (0, 1]: 0 is the claim's own "
                              "reading, 1 the placebo itself")  # fmt: skip


def seed_rule(cfg: Mapping[str, Any]) -> SeedRule:
    """The seed rule of config ``report.paths``."""
    return SeedRule(cfg["seeds"]["rule"], cfg["seeds"]["min_share"], cfg["sigmas"])


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The paths wing's sections of summary.json, over tasks and training seeds: Fig. 4's path effectiveness
    (sampled paths, with the exact decomposition's initial state as the untrained placebo) and the exact
    decomposition; None when the run has no path task.

    ``inputs``: ``paths`` and ``paths_exact`` (one file per task of ``params['tasks']``); ``params['report']``:
    config ``report`` (``paths``: short, most, margin, sigmas, the seed rule and the controls;
    ``path_decomposition``)."""
    if not params["tasks"]:
        return {"paths": None, "path_decomposition": None}
    from san.core.storage import read_netcdf

    cfg, tasks = params["report"]["paths"], params["tasks"]
    exact = dict(zip(tasks, map(read_netcdf, inputs["paths_exact"]), strict=True))
    sampled = dict(zip(tasks, map(read_netcdf, inputs["paths"]), strict=True))
    shared = {"short": cfg["short"], "most": cfg["most"], "seeds": seed_rule(cfg)}
    return {
        "paths": path_effectiveness_claims(sampled, exact, **shared, margin=cfg["margin"],
                                           init_control=cfg["init_control"],
                                           input_path_control=cfg["input_path_control"]),
        "path_decomposition": path_decomposition_claims(exact, **shared, **params["report"]["path_decomposition"]),
    }  # fmt: skip
