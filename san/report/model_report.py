"""One model's report (target ``model_report``, config ``model``): its per-layer measures and the verdicts that apply
to it alone, without the rest of the pipeline.

The model is a name under ``models``, a local model folder (``save_pretrained``'s), whose entry is made here, while
the config is checked, with every loaded file pinned (:func:`san.models.pins.local_entry`), or a hub repository id
(:func:`hub_entry`: its family recognised from the hub's ``config.json`` at the same time). Its jobs are the ones the
full run has for it: acquisition, the rank-collapse job (the four variants, Dong et al. 2021 Fig. 2, with the
per-layer phenomena of :mod:`san.measures.phenomena`) and, for a decoder with pretrained weights, the context-length
run. Its verdicts are those of the wings whose claims judge one model's results (:data:`MODEL_WINGS`: the rank-collapse
wing and the pretrained phenomena), each computed from this model's results alone (:func:`model_verdicts`), so no
other experiment runs for them. Its page: a tidy table of the per-layer measures (:func:`measures_table`, beside the
netCDF), a figure (:mod:`san.report.model_plots`) and a Markdown page (:func:`page`). Torch-free.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.claims.verdicts import NOT_JUDGED
from san.core.config import ConfigError
from san.models.local import entry_family
from san.models.spec import FAMILY_TABLE

#: the wings whose claims judge a single model's results (their ``claims(inputs, params)`` read the rank-collapse
#: result, and for a decoder the context-length run, by model)
MODEL_WINGS = ("rank_collapse", "phenomena")
#: the per-layer measures of the page, by variable of the rank-collapse result, and their labels
PAGE_MEASURES = {
    "residual_ratio": "relative residual",
    "massive_ratio": "massive ratio",
    "first_token_norm_ratio": "first-token norm ratio",
    "matrix_entropy": "matrix entropy",
    "sink_share": "sink share (attention on token 0)",
}
#: the variant whose per-layer phenomena the page draws: the unmodified model
UNMODIFIED = "transformer"


def resolve_model(config: dict[str, Any]) -> str | None:
    """The name of config ``model`` under ``models`` (None when ``model`` is not set): a name already there, or a local
    model folder, whose entry (family recognised, every loaded file pinned) is added under its folder's name. Raises
    :class:`ConfigError` naming the key ``model``."""
    model = config.get("model")
    if model is None:
        return None
    models = config.setdefault("models", {})
    if not isinstance(model, str):
        raise ConfigError(f"config key 'model': {model!r} is not a model name or a folder")
    if model in models:
        return model
    folder = Path(model).expanduser()
    if not folder.is_dir():
        if HUB_ID.match(model):
            name, entry = hub_entry(model)
            while name in models and models[name] != entry:
                name += "-hub"
            models[name] = entry
            return name
        raise ConfigError(
            f"config key 'model': {model!r} is neither a model under 'models' ({sorted(models)}), nor a model folder, "
            "nor a hub repository id (owner/name, optionally @revision)"
        )
    from san.models.pins import default_name, local_entry

    try:
        entry = local_entry(folder)
    except ConfigError as exc:
        raise ConfigError(f"config key 'model': {exc}") from None
    name = default_name(folder)
    while name in models and models[name].get("pretrained", {}).get("path") != entry["pretrained"]["path"]:
        name += "-local"
    models[name] = entry
    return name


#: a hub repository id as ``model`` takes it: ``owner/name``, optionally ``@revision`` (a branch, tag or commit)
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w./-]+)?$")


def hub_entry(model: str) -> tuple[str, dict[str, Any]]:
    """The name and entry of hub repository ``model`` (``owner/name[@revision]``): its ``config.json``, read from
    the hub while the config is checked, is recognised (a supported family, else :class:`ConfigError` naming the key
    ``model``), so a decoder joins the context-length run; the weights are downloaded by the acquisition job and
    verified against the hashes the hub announces (unpinned: ``python -m san.models.sources.hub`` prints the pins to
    keep). Its name is the repository's (``-hub`` appended where ``models`` has another entry of that name)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    from san.models.recognise import UnsupportedModel, recognise

    repo_id, _, revision = model.partition("@")
    revision = revision or "main"
    try:
        path = hf_hub_download(repo_id, "config.json", revision=revision)
    except (HfHubHTTPError, LocalEntryNotFoundError, OSError, ValueError) as exc:
        raise ConfigError(
            f"config key 'model': the hub repository {repo_id!r} at revision {revision!r} could not be read "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no detail'}); without network, give "
            "a local model folder"
        ) from None
    try:
        family = recognise(json.loads(Path(path).read_text()), f"hub {repo_id}@{revision}").family
    except UnsupportedModel as exc:
        raise ConfigError(f"config key 'model': {exc}") from None
    entry = {"family": family, "pretrained": {"source": "hub", "repo_id": repo_id, "revision": revision}}
    return repo_id.split("/")[-1], entry


def is_decoder(config: Mapping[str, Any], name: str) -> bool:
    """Whether model ``name`` joins the context-length run: pretrained weights of a causal family known before its
    acquisition (named by the entry, or recognised from a local folder)."""
    spec = config["models"][name]
    family = entry_family(spec, name)
    return bool(spec.get("pretrained")) and family in FAMILY_TABLE and FAMILY_TABLE[family].causal


def model_verdicts(inputs: Mapping[str, list[str]], params: Mapping[str, Any]) -> dict[str, Any]:
    """The sections of :data:`MODEL_WINGS` for one model (``params['model']``) and their verdict table: each wing's
    ``claims`` on ``inputs`` (``rank_collapse``: the model's result; ``sink_context``: its context-length run, for a
    decoder) with the model as the run's only one."""
    from san import experiments
    from san.claims import verdicts as V

    model = params["model"]
    wing_params = {
        "report": params["report"],
        "models": [model],
        "attention_product_models": [],
        "sink_context_models": [model] if inputs.get("sink_context") else [],
        "vision_models": [],
    }
    wing_inputs = {"rank_collapse": list(inputs["rank_collapse"]), "attention_products": [], "vision": []}
    if inputs.get("sink_context"):
        wing_inputs["sink_context"] = list(inputs["sink_context"])
    sections: dict[str, Any] = {}
    for wing in experiments.WINGS:
        if wing.name in MODEL_WINGS:
            sections.update(wing.claims.claims(wing_inputs, wing_params))
    sections["verdicts"] = V.collect(sections)
    return {"model": model, **sections}


def measures_table(ds: Any, model: str) -> Any:
    """The per-layer measures of a rank-collapse result (:data:`PAGE_MEASURES`, every variable with a layer and a
    sample dimension, and the first-token attention as ``sink_share``), tidy: one row per model, weights, variant,
    measure and layer, with the mean and standard deviation over the input sequences (over the heads for the sink
    share) and their count."""
    import pandas as pd

    rows = []
    for name, var in ds.data_vars.items():
        # one row per measure: the attention per head and sequence (first_token_attention_by_sample) is the sink
        # share's, whose row reads its mean over the sequences
        per_sample = {"layer", "sample"} <= set(var.dims) and "head" not in var.dims
        over = "sample" if per_sample else "head" if name == "first_token_attention" else None
        if over is None:
            continue
        measure = "sink_share" if name == "first_token_attention" else name
        mean, std = var.mean(over), var.std(over, ddof=1) if var.sizes[over] > 1 else var.std(over) * float("nan")
        count = var.notnull().sum(over)
        for w in ds["weights"].values:
            for v in ds["variant"].values:
                for layer in ds["layer"].values:
                    at = {"weights": w, "variant": v, "layer": layer}
                    rows.append(
                        {
                            "model": model,
                            "weights": str(w),
                            "variant": str(v),
                            "measure": measure,
                            "layer": int(layer),
                            "mean": float(mean.sel(at)),
                            "std": float(std.sel(at)),
                            "n": int(count.sel(at)),
                        }
                    )
    return pd.DataFrame(rows, columns=["model", "weights", "variant", "measure", "layer", "mean", "std", "n"])


def _number(x: float) -> str:
    return "-" if x != x else f"{x:.3g}"


def page(model: str, measures: Any, verdicts: Mapping[str, Any], figure: str) -> str:
    """The model's Markdown page: the figure, the verdicts that apply to it (claim, statement, verdict, value; the
    claims its results cannot judge named after them) and
    per weights the unmodified model's per-layer measures (:data:`PAGE_MEASURES`, means over the sequences) with
    the four variants' relative residual."""
    lines = [f"# {model}", "", f"![{model}]({figure})", "", "## Verdicts that apply to this model", ""]
    every = [r for kind in verdicts["verdicts"].values() for r in kind]
    rows = [r for r in every if r["verdict"] != NOT_JUDGED]
    if rows:
        lines += ["| claim | statement | verdict | value |", "|---|---|---|---|"]
        for r in rows:
            value = "-" if r.get("value") is None else f"{r['value']:.3g}"
            statement = str(r["statement"]).replace("|", "/")
            lines.append(f"| `{r['claim']}` | {statement} | {r['verdict']} | {value} |")
    else:
        lines.append("No claim can be judged on this model's results alone.")
    unjudged = [f"`{r['claim']}`" for r in every if r["verdict"] == NOT_JUDGED]
    if unjudged:
        lines += ["", f"Not judged on this model's results (their evidence is not in them): {', '.join(unjudged)}."]
    for weights, part in measures.groupby("weights", sort=False):
        lines += ["", f"## Per layer: {weights} weights", ""]
        table = part[part["measure"] == "residual_ratio"].pivot(index="layer", columns="variant", values="mean")
        phen = part[(part["variant"] == UNMODIFIED) & part["measure"].isin(list(PAGE_MEASURES)[1:])]
        table = table.join(phen.pivot(index="layer", columns="measure", values="mean"), how="left")
        header = [f"residual ({c})" if c in set(part["variant"]) else PAGE_MEASURES.get(c, c) for c in table.columns]
        lines += ["| layer | " + " | ".join(header) + " |", "|---" * (len(header) + 1) + "|"]
        for layer, values in table.iterrows():
            lines.append(f"| {layer} | " + " | ".join(_number(float(x)) for x in values) + " |")
    lines += ["", f"The per-layer measures of every variant: `{model}.csv` beside this page (tidy: one row per "
              "weights, variant, measure and layer)."]  # fmt: skip
    return "\n".join(lines) + "\n"
