"""Claims of the exact path-length decomposition (:mod:`san.paths.decomposition`), for the report and summary.json.

Torch-free: it reads the ``results/paths/{task}_exact.nc`` datasets only. The question it answers exactly is the
paper's Fig. 4 claim, "short paths carry most of the model's accuracy": with the model's own attention and
LayerNorm scales frozen, how accurate is the expansion truncated to paths of length <= K, against the full model and
against the input-blind predictor.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from san.core import verdicts as V
from san.core.config import ConfigError


def _f(x: Any) -> float:
    return float(np.asarray(x))


def _task_claims(ds: xr.Dataset, short: int, tolerance: float) -> dict[str, Any]:
    """Numbers of one task (trained weights unless said otherwise)."""
    trained = ds.sel(state="trained")
    truncated = trained["truncated_accuracy"]
    full = _f(trained["full_accuracy"])
    chance = _f(ds["chance_accuracy"]) if "chance_accuracy" in ds else float("nan")
    at_short = _f(truncated.sel(max_path_length=min(short, int(truncated["max_path_length"].max()))))
    gain = full - chance
    within = [
        int(k)
        for k, a in zip(truncated["max_path_length"].values, truncated.values, strict=True)
        if a >= full - tolerance
    ]
    shares = {str(s): ds["norm_share"].sel(state=s) for s in ds["state"].values}
    return {
        "full": full,
        "chance": chance,
        "truncated": {
            int(k): _f(v) for k, v in zip(truncated["max_path_length"].values, truncated.values, strict=True)
        },
        "single_length": {
            int(k): _f(v)
            for k, v in zip(trained["path_length"].values, trained["single_length_accuracy"].values, strict=True)
        },
        "at_short": at_short,
        "short_share_of_full": at_short / full if full > 0 else float("nan"),
        "short_share_of_gain": (at_short - chance) / gain if gain > 0 else float("nan"),
        "shortest_within_tolerance": min(within),
        "input_only_share_of_gain": (_f(truncated.isel(max_path_length=0)) - chance) / gain
        if gain > 0
        else float("nan"),
        "norm_share_short": {s: _f(v.sel(path_length=v["path_length"] <= short).sum()) for s, v in shares.items()},
        "mean_length_by_norm": {s: _f((v * v["path_length"]).sum()) for s, v in shares.items()},
        "reconstruction_error": _f(ds["reconstruction_error"].max()),
    }


def path_decomposition_claims(
    datasets: Mapping[str, xr.Dataset], *, short: int, most: float, tolerance: float, exact: float
) -> dict[str, Any]:
    """How much of each model's accuracy paths of length <= ``short`` carry, exactly.

    Per task: the accuracy of the expansion truncated at ``K = short`` as a share of the full model's accuracy and of
    its gain over the input-blind predictor; the shortest K within ``tolerance`` of the full model; the norm share
    of lengths <= ``short`` and the norm-weighted mean path length, trained and at initialisation; the largest
    reconstruction error (the decomposition is exact when it is below ``exact``). Short paths carry most of the gain
    when their share of it exceeds ``most`` on every task.
    """
    per_task = {task: _task_claims(ds, short, tolerance) for task, ds in datasets.items()}
    caption = "; ".join(
        f"{task}: paths of length ≤ {short} reach {t['at_short']:.3f} against the full model's {t['full']:.3f} "
        f"({100 * t['short_share_of_full']:.0f}% of its accuracy, {100 * t['short_share_of_gain']:.0f}% of its gain "
        f"over the input-blind {t['chance']:.3f}); within {100 * tolerance:.0f} points of the full model from "
        f"K = {t['shortest_within_tolerance']}; norm share of lengths ≤ {short}: "
        f"{100 * t['norm_share_short']['trained']:.0f}% trained"
        + (f", {100 * t['norm_share_short']['init']:.0f}% at initialisation" if "init" in t["norm_share_short"] else "")
        for task, t in per_task.items()
    )
    errors = [t["reconstruction_error"] for t in per_task.values()]
    gains = [t["short_share_of_gain"] for t in per_task.values()]
    is_exact = V.every(V.judged(e < exact, int(np.isfinite(e))) for e in errors)
    # a task whose model does not beat the input-blind level has no gain to share: not judged there
    carry = _every_above(gains, most)
    max_error = max(errors) if errors else float("nan")
    # positive control: the expansion truncated at K = 0 (the embedding's path alone) in place of K = short
    control = V.control(
        "the expansion truncated at K = 0 in place of K = " + str(short),
        None,
        _every_above((t["input_only_share_of_gain"] for t in per_task.values()), most),
    )
    smallest = min(gains, default=float("nan"))
    verdicts = [
        V.row("exact", f"the exact decomposition reconstructs every trained model (error below {exact:g})",
              kind=V.REGRESSION, form=V.UNIVERSAL, source="this project's exact path decomposition (an identity)",
              holds=is_exact, value=max_error, test=f"largest reconstruction error below {exact:g} on every task"),
        V.row("short_carry_most_of_gain", "short paths carry most of the model's accuracy", kind=V.SCIENTIFIC,
              form=V.QUANTITATIVE, source="Dong et al. 2021, Fig. 4 (exact decomposition)", holds=carry,
              value=smallest, margin=smallest - most,
              test=f"paths of length <= {short} carry more than {most:.0%} of the gain over the input-blind level on "
              "every task (value: the smallest share)", positive_control=control),
    ]  # fmt: skip
    return {"short": short, "tolerance": tolerance, "exact": is_exact, "max_reconstruction_error": max_error,
            "most": most, "exact_threshold": exact, "short_carry_most_of_gain": carry, "per_task": per_task,
            "caption": caption, "verdicts": verdicts}  # fmt: skip


def _every_above(values: Iterable[float], threshold: float) -> bool | None:
    """Every value above ``threshold``; a value that is not finite (NaN: nothing measured) is not judged."""
    return V.every(V.judged(v > threshold, int(np.isfinite(v))) for v in values)


def _effectiveness_task(ds: xr.Dataset, short: int) -> dict[str, Any]:
    """One task's numbers of :func:`path_effectiveness_claims` (mean over repeats, the largest ``n_paths``)."""
    acc = ds["accuracy"].mean("repeat")
    n = int(ds["n_paths"].max())
    by_len = acc.sel(n_paths=n)
    lengths = by_len["path_length"].values
    short_best = _f(by_len.sel(path_length=[k for k in lengths if 1 <= k <= short]).max())
    full, chance = _f(ds["full_model_accuracy"]), _f(ds["chance_accuracy"])
    # the paper's "short paths reach most of the accuracy": the share of the full model's gain over chance
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


def _effectiveness_controls(
    per_task: Mapping[str, Mapping[str, Any]], *, most: float, margin: float
) -> dict[str, dict[str, Any]]:
    """The positive controls of :func:`path_effectiveness_claims`: the same tests with the side the claim puts ahead
    replaced by one it must not beat (each must fail)."""
    return {
        "models_learn": V.control("the longest paths in place of the full model", None,
                                  _every_above((t["longest"] - t["chance"] for t in per_task.values()), margin)),
        "short_beats_long": V.control("the full model in place of the longest paths", None,
                                      _every_above((t["short_best"] - t["full"] for t in per_task.values()), margin)),
        "short_reach_most": V.control("the longest paths in place of the short ones", None,
                                      _every_above((t["longest_share_of_gain"] for t in per_task.values()), most)),
    }  # fmt: skip


def _effectiveness_caption(per_task: Mapping[str, Mapping[str, Any]], short: int) -> str:
    """The caption of :func:`path_effectiveness_claims`: per task, the full model, chance, the best short path and
    its share of the gain over chance, and the longest paths."""
    return "; ".join(
        f"{task}: full model {t['full']:.3f}, chance {t['chance']:.3f}, best short path (length ≤ {short}, "
        f"{t['n_paths']} paths) {t['short_best']:.3f} ({100 * t['short_share_of_gain']:.0f}% of the full model's gain "
        f"over chance), longest paths {t['longest']:.3f}"
        for task, t in per_task.items()
    )


def path_effectiveness_claims(
    results: Mapping[str, xr.Dataset], *, short: int, most: float, margin: float = 0.0
) -> dict[str, Any]:
    """Fig. 4 claim: short paths carry most of the model's accuracy, long paths little.

    Per task: full-model and chance accuracy, mean accuracy by path length for the largest ``n_paths``, the best
    accuracy reached by paths of length <= ``short`` and by the longest paths; "most" means a share above ``most``
    of the full model's gain over chance. The two comparisons ("short paths beat long", "models learn") hold when
    the difference exceeds ``margin`` (accuracy); ``differences`` holds them per task, for :func:`over_seeds` to
    judge against the spread over seeds.
    """
    per_task = {task: _effectiveness_task(ds, short) for task, ds in results.items()}
    differences = {
        "short_beats_long": {task: t["short_best"] - t["longest"] for task, t in per_task.items()},
        "models_learn": {task: t["full"] - t["chance"] for task, t in per_task.items()},
    }
    beats = _every_above(differences["short_beats_long"].values(), margin)
    learn = _every_above(differences["models_learn"].values(), margin)
    reach = _every_above((t["short_share_of_gain"] for t in per_task.values()), most)
    controls = _effectiveness_controls(per_task, most=most, margin=margin)
    smallest = {k: min(v.values(), default=float("nan")) for k, v in differences.items()}
    share = min((t["short_share_of_gain"] for t in per_task.values()), default=float("nan"))
    return {
        "short": short,
        "short_beats_long": beats,
        "short_reach_most": reach,
        "most": most,
        "margin": margin,
        "models_learn": learn,
        "differences": differences,
        "per_task": per_task,
        "caption": _effectiveness_caption(per_task, short),
        "verdicts": [
            V.row("models_learn", "the trained models learn their task", kind=V.SCIENTIFIC, form=V.OBSERVATION,
                  source="Dong et al. 2021, Fig. 4", holds=learn, value=smallest["models_learn"],
                  margin=smallest["models_learn"] - margin,
                  test=f"the trained models beat the input-blind level by more than {margin:g} on every task",
                  positive_control=controls["models_learn"]),
            V.row("short_beats_long", "short paths are more effective than long ones", kind=V.SCIENTIFIC,
                  form=V.OBSERVATION, source="Dong et al. 2021, Fig. 4", holds=beats,
                  value=smallest["short_beats_long"], margin=smallest["short_beats_long"] - margin,
                  test=f"paths of length <= {short} beat the longest paths by more than {margin:g} on every task",
                  positive_control=controls["short_beats_long"]),
            V.row("short_reach_most", "short paths reach most of the model's accuracy", kind=V.SCIENTIFIC,
                  form=V.QUANTITATIVE, source="Dong et al. 2021, Fig. 4", holds=reach, value=share,
                  margin=share - most,
                  test=f"paths of length <= {short} reach more than {most:.0%} of the gain over the input-blind level "
                  "on every task", positive_control=controls["short_reach_most"]),
        ],
    }  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------
# Verdicts over training seeds


def seed_mean(ds: xr.Dataset) -> xr.Dataset:
    """A result averaged over its ``seed`` dimension (unchanged without one), attributes kept."""
    return ds.mean("seed", keep_attrs=True) if "seed" in ds.dims else ds


def _seed_slices(ds: xr.Dataset) -> dict[int, xr.Dataset]:
    if "seed" not in ds.dims:
        return {0: ds}
    return {int(s): ds.sel(seed=s) for s in ds["seed"].values}


def seed_verdict(holds: list[V.Verdict], rule: str, min_share: float) -> V.Verdict:
    """Whether a verdict holds over seeds: ``every_seed``: in every seed (:func:`san.core.verdicts.every`);
    ``share``: in at least ``min_share`` of the seeds that judged it. No judged seed: not judged (None)."""
    if rule == "every_seed":
        return V.every(holds)
    if rule == "share":
        judged = [h for h in holds if h is not None]
        return V.judged(bool(judged) and sum(judged) / len(judged) >= min_share, len(judged))
    raise ValueError(f"unknown seed rule {rule!r}; expected every_seed or share (config key report.paths.seeds.rule)")


def spread_verdict(differences: list[float], margin: float, sigmas: float) -> dict[str, Any]:
    """A comparison judged against the spread over seeds by the one spread and margin rule
    (:func:`san.core.verdicts.spread`, :func:`san.core.verdicts.margin`): the mean of the seeds' differences less
    ``sigmas`` standard errors must exceed ``margin``. One seed has no spread: its difference alone must exceed the
    margin. No finite difference: not judged."""
    mean, sem, n = V.spread(differences)
    m = V.margin(mean, sem, sigmas, margin, above=True)
    return {"mean": mean, "sem": sem, "seeds": n, "margin": m, "holds": V.judged(m > 0, n)}


def over_seeds(
    claim: Callable[..., dict[str, Any]],
    datasets: Mapping[str, xr.Dataset],
    rule: str = "every_seed",
    min_share: float = 1.0,
    sigmas: float = 0.0,
    **kwargs: Any,
) -> dict[str, Any]:
    """A path claim (``claim(datasets, **kwargs)``, whose ``verdicts`` rows name its verdicts) reached over seeds.

    The numbers and the caption are those of the seed-mean results (:func:`seed_mean`). Every verdict is taken
    task by task and seed by seed (``claim`` on that task's seed alone); it holds when, in every task, it holds by
    :func:`seed_verdict` over the task's seeds. A comparison verdict (one the claim lists in ``differences``, with
    its ``margin``) must in addition hold against the spread of its difference over each task's seeds
    (:func:`spread_verdict`, ``sigmas`` standard errors). ``per_seed`` lists every seed's verdicts, ``spread`` the
    comparisons' means and standard errors, ``seed_rule`` the rule.
    """
    out = claim({task: seed_mean(ds) for task, ds in datasets.items()}, **kwargs)
    verdicts = [row["key"] for row in out["verdicts"]]
    per_seed = {
        task: {seed: claim({task: one}, **kwargs) for seed, one in _seed_slices(ds).items()}
        for task, ds in datasets.items()
    }
    margin = out.get("margin", 0.0)
    spread = {
        key: {
            task: spread_verdict([c["differences"][key][task] for c in seeds.values()], margin, sigmas)
            for task, seeds in per_seed.items()
        }
        for key in out.get("differences", {})
    }
    for key in verdicts:
        by_task = [seed_verdict([c[key] for c in seeds.values()], rule, min_share) for seeds in per_seed.values()]
        by_task += [s["holds"] for s in spread.get(key, {}).values()]
        out[key] = V.every(by_task)
    out["verdicts"] = [V.rejudged(r, out[r["key"]]) for r in out["verdicts"]]
    out["per_seed"] = {
        task: {str(seed): {k: c[k] for k in verdicts} for seed, c in seeds.items()} for task, seeds in per_seed.items()
    }
    out["spread"] = spread
    out["seed_rule"] = {"rule": rule, "min_share": min_share, "sigmas": sigmas}
    held = {k: sum(c[k] is True for seeds in per_seed.values() for c in seeds.values()) for k in verdicts}
    n = sum(len(seeds) for seeds in per_seed.values())
    out["caption"] += " (means over seeds; verdicts held in " + ", ".join(f"{k}: {held[k]}/{n}" for k in verdicts)
    out["caption"] += " task seeds)"
    return out


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of the paths wing's report keys the schema cannot express: ``min_share`` only with the share
    rule (with every_seed it would be ignored silently); raises :class:`~san.core.config.ConfigError` naming the key."""
    seeds = report["paths"]["seeds"]
    if seeds["rule"] == "every_seed" and seeds["min_share"] != 1.0:
        raise ConfigError(
            f"report.paths.seeds.min_share = {seeds['min_share']} is read only with rule share (rule is every_seed)"
        )


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The paths wing's sections of summary.json, over the training seeds (:func:`over_seeds`): Fig. 4's path
    effectiveness and the exact decomposition; None when the run has no path task.

    ``inputs``: ``paths`` and ``paths_exact`` (one file per task of ``params['tasks']``); ``params['report']``:
    config ``report`` (``paths``: short, most, margin, sigmas and the seed rule; ``path_decomposition``)."""
    if not params["tasks"]:
        return {"paths": None, "path_decomposition": None}
    from san.core.storage import read_netcdf

    cfg = params["report"]["paths"]
    seeds = {**cfg["seeds"], "sigmas": cfg["sigmas"]}
    shared = {"short": cfg["short"], "most": cfg["most"]}
    tasks = params["tasks"]
    return {
        "paths": over_seeds(
            path_effectiveness_claims,
            dict(zip(tasks, map(read_netcdf, inputs["paths"]), strict=True)),
            **seeds,
            **shared,
            margin=cfg["margin"],
        ),
        "path_decomposition": over_seeds(
            path_decomposition_claims,
            dict(zip(tasks, map(read_netcdf, inputs["paths_exact"]), strict=True)),
            **seeds,
            **shared,
            **params["report"]["path_decomposition"],
        ),
    }
