"""The paper's claims checked against this run's results, for the report's captions and ``summary.json``.

Each function reads result datasets (never recomputes them) and returns plain numbers plus a yes/no verdict, so a
caption can state, e.g., "pure attention: residual < 1e-3 by layer 2 for all models: yes, max 2e-07".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd
import xarray as xr

from san.models.spec import CAUSAL, PURE_ATTENTION, WITH_SKIP
from san.rank_collapse.spec import METRICS


def _f(x: float) -> float:
    return float(np.asarray(x))


def rank_collapse_claims(
    results: Mapping[str, xr.Dataset], *, layer: int, threshold: float, floor: float, causal: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Fig. 2 claims: at init, SAN and SAN+MLP fall below ``threshold`` by ``layer``; skip variants stay > ``floor``.

    Pretrained weights are reported separately (the paper shows slower, but still fast, collapse there). The models
    named in ``causal`` (decoders with causal masks, outside the paper's bidirectional setting: a causal SAN keeps
    its first token's direction and collapses only exponentially) get their rows but stay out of the verdicts.
    """
    per_model: dict[str, Any] = {}
    for name, ds in results.items():
        mean = ds["residual_ratio"].mean("sample")
        entry: dict[str, Any] = {}
        for w in mean["weights"].values:
            m = mean.sel(weights=w)
            entry[str(w)] = {
                "pure_at_layer": {
                    v: _f(m.sel(variant=v, layer=min(layer, int(m["layer"].max()))))
                    for v in PURE_ATTENTION
                    if v in m["variant"]
                },
                "skip_at_last": {v: _f(m.sel(variant=v).isel(layer=-1)) for v in WITH_SKIP if v in m["variant"]},
                "last_layer": int(m["layer"].max()),
            }
        per_model[name] = entry
    rows = {}
    for name, entry in per_model.items():
        parts = []
        for w, e in entry.items():
            pure = ", ".join(f"{v} {x:.1e}" for v, x in e["pure_at_layer"].items())
            skip = ", ".join(f"{v} {x:.2f}" for v, x in e["skip_at_last"].items())
            parts.append(f"{w}: {pure} at layer {layer}; {skip} at layer {e['last_layer']}")
        rows[name] = ". ".join(parts) + "."
    init = [e["init"] for name, e in per_model.items() if "init" in e and name not in causal]
    pure = [x for e in init for x in e["pure_at_layer"].values()]
    skip = [x for e in init for x in e["skip_at_last"].values()]
    return {
        "layer": layer,
        "threshold": threshold,
        "floor": floor,
        "pure_collapses": bool(pure) and max(pure) < threshold,
        "pure_max": max(pure) if pure else float("nan"),
        "skip_survives": bool(skip) and min(skip) > floor,
        "skip_min": min(skip) if skip else float("nan"),
        "judged": [name for name in per_model if name not in causal],
        "causal": [name for name in per_model if name in causal],
        "per_model": per_model,
        "caption_rows": rows,
    }


def first_layer_below(curve: xr.DataArray, threshold: float) -> int | None:
    """The first layer (dim ``layer``) at which ``curve`` is below ``threshold``; None if it never is."""
    below = np.flatnonzero(np.asarray(curve) < threshold)
    return int(curve["layer"].values[below[0]]) if below.size else None


def pretrained_collapse_claims(
    results: Mapping[str, xr.Dataset], *, threshold: float, families: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Today's architectures: in every model with pretrained weights, does pure attention (the SAN variant, mean
    over sequences) fall below ``threshold``, and within how many layers (of how many), by each measure of
    :data:`METRICS`; and does the full transformer stay above it at the last layer. The claim "pure attention
    collapses below the threshold within N layers in every pretrained model" holds with N the largest of the
    per-model first layers (by the paper's measure)."""
    per_model: dict[str, Any] = {}
    for name, ds in results.items():
        if "pretrained" not in set(map(str, ds["weights"].values)):
            continue
        sel = ds.sel(weights="pretrained")
        entry: dict[str, Any] = {"depth": int(sel["layer"].max())}
        for metric in (m for m in METRICS if m in sel):
            mean = sel[metric].mean("sample")
            entry[metric] = {
                "san_first_below": first_layer_below(mean.sel(variant="SAN"), threshold)
                if "SAN" in mean["variant"]
                else None,
                "san_last": _f(mean.sel(variant="SAN").isel(layer=-1)) if "SAN" in mean["variant"] else None,
                "transformer_last": _f(mean.sel(variant="transformer").isel(layer=-1))
                if "transformer" in mean["variant"]
                else None,
            }
        if families is not None:
            entry["causal"] = families.get(name) in CAUSAL
        per_model[name] = entry
    firsts = [e["residual_ratio"]["san_first_below"] for e in per_model.values() if "residual_ratio" in e]
    collapses = bool(firsts) and all(f is not None for f in firsts)
    rows = {
        name: "; ".join(
            f"{metric.removeprefix('residual_ratio').strip('_') or 'paper'}: SAN below at layer "
            f"{e[metric]['san_first_below'] if e[metric]['san_first_below'] is not None else 'never'} of "
            f"{e['depth']} (last {e[metric]['san_last']:.1e}), transformer last {e[metric]['transformer_last']:.2f}"
            for metric in METRICS
            if metric in e and e[metric]["san_last"] is not None and e[metric]["transformer_last"] is not None
        )
        + "."
        for name, e in per_model.items()
    }
    return {
        "threshold": threshold,
        "pure_collapses_in_every_model": collapses,
        "within_layers": max(firsts) if collapses else None,
        "per_model": per_model,
        "caption_rows": rows,
    }


def path_product_claims(results: Mapping[str, xr.Dataset]) -> dict[str, Any]:
    """Appendix claim: products along longer paths are closer to rank 1 (median residual, shortest vs longest)."""
    per_model = {}
    for name, ds in results.items():
        med = ds["rank1_residual"].median("path")
        per_model[name] = {
            str(w): {
                "shortest": _f(med.sel(weights=w).isel(depth=0)),
                "longest": _f(med.sel(weights=w).isel(depth=-1)),
                "depth": int(ds["depth"].max()),
            }
            for w in ds["weights"].values
        }
    shrinks = [v["longest"] < v["shortest"] for e in per_model.values() for v in e.values()]
    rows = {
        name: "; ".join(
            f"{w}: {v['shortest']:.1e} → {v['longest']:.1e} (length 1 → {v['depth']})" for w, v in e.items()
        )
        for name, e in per_model.items()
    }
    return {
        "longer_paths_closer_to_rank1": bool(shrinks) and all(shrinks),
        "per_model": per_model,
        "caption_rows": {name: row + "." for name, row in rows.items()},
    }


def yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def render_captions(templates: Path, out_dir: Path, context: Mapping[str, Any]) -> list[Path]:
    """Fill ``[[ ... ]]`` placeholders of every ``*.rst`` template with this run's numbers.

    Snakemake renders the result a second time at report time (its ``{{ ... }}`` syntax), so templates may keep
    per-figure expressions such as ``{{ snakemake.wildcards.model }}``.
    """
    env = jinja2.Environment(
        variable_start_string="[[",
        variable_end_string="]]",
        block_start_string="[%",
        block_end_string="%]",
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    env.filters["e"] = lambda x: f"{x:.1e}"
    env.filters["pct"] = lambda x: f"{100 * x:.1f}%"
    env.globals["yes_no"] = yes_no
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(Path(templates).glob("*.rst")):
        target = out_dir / path.name
        target.write_text(env.from_string(path.read_text()).render(**context))
        written.append(target)
    return written


def circle_claims(table: pd.DataFrame) -> dict[str, Any]:
    """Fig. 3 claim: pure attention collapses the two sequences; skip connections counteract it.

    ``table`` is the collapse table of the circle experiment (one row per variant and hidden dimension with the
    number of seeds and of collapsed seeds).
    """
    by_variant = table.groupby("variant")[["n_collapsed", "n_seeds"]].sum()
    counts = {v: (int(r.n_collapsed), int(r.n_seeds)) for v, r in by_variant.iterrows()}
    pure = [counts[v] for v in PURE_ATTENTION if v in counts]
    skip = [counts[v] for v in WITH_SKIP if v in counts]
    pure_c, pure_n = sum(c for c, _ in pure), sum(n for _, n in pure)
    skip_c, skip_n = sum(c for c, _ in skip), sum(n for _, n in skip)
    return {
        "per_variant": {v: {"collapsed": c, "runs": n} for v, (c, n) in counts.items()},
        "pure_collapsed": pure_c,
        "pure_runs": pure_n,
        "skip_collapsed": skip_c,
        "skip_runs": skip_n,
        "pure_collapses_more": pure_n > 0 and skip_n > 0 and pure_c / pure_n > skip_c / skip_n,
        "caption": "; ".join(f"{v}: {c}/{n} runs collapsed" for v, (c, n) in counts.items()),
    }


def path_effectiveness_claims(results: Mapping[str, xr.Dataset], *, short: int, most: float) -> dict[str, Any]:
    """Fig. 4 claim: short paths carry most of the model's accuracy, long paths little.

    Per task: full-model and chance accuracy, mean accuracy by path length for the largest ``n_paths``, the best
    accuracy reached by paths of length <= ``short`` and by the longest paths; "most" means a share above ``most``
    of the full model's gain over chance.
    """
    per_task: dict[str, Any] = {}
    for task, ds in results.items():
        acc = ds["accuracy"].mean("repeat")
        n = int(ds["n_paths"].max())
        by_len = acc.sel(n_paths=n)
        lengths = by_len["path_length"].values
        short_best = _f(by_len.sel(path_length=[k for k in lengths if 1 <= k <= short]).max())
        per_task[task] = {
            "full": _f(ds["full_model_accuracy"]),
            "chance": _f(ds["chance_accuracy"]),
            "n_paths": n,
            "by_length": {int(k): _f(v) for k, v in zip(lengths, by_len.values, strict=True)},
            "short_best": short_best,
            "longest": _f(by_len.isel(path_length=-1)),
        }
        t = per_task[task]
        # the paper's "short paths reach most of the accuracy": the share of the full model's gain over chance
        gain = t["full"] - t["chance"]
        t["short_share_of_gain"] = (short_best - t["chance"]) / gain if gain > 0 else float("nan")
    holds = [t["short_best"] > t["longest"] for t in per_task.values()]
    learned = [t["full"] > t["chance"] for t in per_task.values()]
    caption = "; ".join(
        f"{task}: full model {t['full']:.3f}, chance {t['chance']:.3f}, best short path (length ≤ {short}, "
        f"{t['n_paths']} paths) {t['short_best']:.3f} ({100 * t['short_share_of_gain']:.0f}% of the full model's gain "
        f"over chance), longest paths {t['longest']:.3f}"
        for task, t in per_task.items()
    )
    return {
        "short": short,
        "short_beats_long": bool(holds) and all(holds),
        "short_reach_most": bool(per_task) and all(t["short_share_of_gain"] > most for t in per_task.values()),
        "most": most,
        "models_learn": bool(learned) and all(learned),
        "per_task": per_task,
        "caption": caption,
    }
