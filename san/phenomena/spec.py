"""Names and constants of the pretrained phenomena (torch-free): the claims, the kinds of model each applies to, the
printed states of the models x claims table and the description of its netCDF variables.

The claims read the per-layer measures that the rank-collapse, vision and context-length jobs record (massive
activations, token norms, the spectrum of the token matrix, first-token attention; their definitions live with those
jobs) and judge the papers' statements on the pretrained models against their random-init twins
(:mod:`san.phenomena.claims`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from san.claims.drift import WITHIN_DRIFT
from san.claims.per_model import NOT_APPLICABLE
from san.core.config import ConfigError
from san.core.storage import Variable
from san.models.spec import CAUSAL, IMAGE_FAMILIES

#: the kinds of model a claim may apply to, read from the family a result records
DECODER, ENCODER, IMAGE_ENCODER = "decoder", "encoder", "image encoder"
KINDS = (DECODER, ENCODER, IMAGE_ENCODER)

#: the weight sets the claims compare: the pretrained model and its random-init twin (the placebo of most controls)
PRETRAINED, INIT = "pretrained", "init"
#: the training regime of the models the literature's claims are about: weights pretrained by their authors (a
#: fine-tune or a quantisation of them is in scope, with its caveat: san/claims/caveats.py)
PRETRAINED_BY_AUTHORS = "pretrained"

#: the variant whose layers the claims read (the model as it was trained) and pure attention (Dong et al.'s SAN)
UNMODIFIED, PURE = "transformer", "SAN"

#: every claim of the wing, in the order of its verdict rows: key -> (short label of the table, kinds it applies to)
CLAIMS: dict[str, tuple[str, tuple[str, ...]]] = {
    "massive_appear_abruptly": ("massive activations appear abruptly", (DECODER,)),
    "massive_plateau": ("massive activations plateau", (DECODER,)),
    "colocated": ("norm spike, entropy valley and sink rise co-located", (DECODER,)),
    "compression_is_not_collapse": ("compression is not rank collapse", (DECODER, ENCODER)),
    "sinks_grow_with_context": ("sinks grow with the pretraining context", (DECODER,)),
    "sinks_at_longer_inference_context": ("sink share on longer prefixes", (DECODER,)),
    "sinks_grow_with_model_size": ("sinks grow with model size", (DECODER,)),
    "small_vit_high_norm": ("high-norm tokens in a small ViT", (IMAGE_ENCODER,)),
    "high_norm_in_redundant_patches": ("high-norm tokens in redundant patches", (IMAGE_ENCODER,)),
}

#: what each claim's cell number is (its statistic, with its unit), as the figure prints it under the claim's label
STATISTICS: dict[str, str] = {
    "massive_appear_abruptly": "share of the rise in one block",
    "massive_plateau": "largest factor from the median",
    "colocated": "onset spread, blocks",
    "compression_is_not_collapse": "smallest residual, compressed layers",
    "sinks_grow_with_context": "sink share growth",
    "sinks_at_longer_inference_context": "sink share change",
    "sinks_grow_with_model_size": "sink share, larger - smaller",
    "small_vit_high_norm": "share of high-norm patches",
    "high_norm_in_redundant_patches": "similarity excess",
}

#: the printed state of a models x claims cell: a verdict (:data:`san.claims.verdicts.STATES`), "n/a" where the claim
#: does not apply to the model's kind, or "within quantisation drift" where requantising the model's weights moves
#: its statistic across the threshold (:mod:`san.phenomena.drift`); the netCDF table stores its index (flag values)
CELL_STATES = ("holds", "fails", "no power", "not judged", NOT_APPLICABLE, WITHIN_DRIFT)


def label(key: str) -> str:
    """The short label of claim ``key`` (:data:`CLAIMS`), as the models x claims table prints it."""
    return CLAIMS[key][0]


def about(key: str, kinds: Mapping[str, str]) -> list[str]:
    """The models of ``kinds`` (model -> kind) that claim ``key`` is about (:data:`CLAIMS`)."""
    return [name for name, kind in kinds.items() if kind in CLAIMS[key][1]]


def model_kind(family: str) -> str:
    """The kind of a model of ``family``: a decoder (causal attention), an image encoder, else an encoder."""
    if family in CAUSAL:
        return DECODER
    return IMAGE_ENCODER if family in IMAGE_FAMILIES else ENCODER


#: long_name, units and description of the variables and coordinates of results/phenomena/table.nc
VARIABLES = {
    "model": Variable("model", "1"),
    "claim": Variable("claim of the literature (summary.json's phenomena section, key)", "1"),
    "kind": Variable("kind of model (decoder, encoder, image encoder)", "1"),
    "label": Variable("claim in short", "1"),
    "verdict": Variable(
        "the claim's verdict on this model alone",
        "1",
        "its check on this model's data and its near-miss control at the config's setting: holds (the control "
        "fails), fails, no power (the control holds too), not judged (no evidence), n/a (the claim is not about "
        "this kind of model), within quantisation drift (requantising the weights moves the statistic across the "
        "threshold)",
    ),
    "caveats": Variable(
        "caveat markers of the cell",
        "1",
        "q: quantised weights (GGUF), f: a fine-tune of another model, b: inputs without a BOS token, t: threshold "
        "set after its result (san/claims/caveats.py); empty: none",
    ),
    "value": Variable("the model's test statistic", "1", "as the claim's row in summary.json defines it (its test)"),
    "threshold": Variable("the threshold the statistic is compared with", "1", "config key in the claim's row"),
    "drift": Variable(
        "quantisation drift of the test statistic",
        "1",
        "the largest change of the statistic when the model's weights are requantised "
        "(phenomena.quantisation.kinds); NaN where not measured",
    ),
    "control_value": Variable(
        "the test statistic under the near-miss control",
        "1",
        "the model's data moved to the wrong theory or placebo at the config's setting (the control must fail)",
    ),
    "power": Variable(
        "power of the test",
        "1",
        "how far the data can move toward the wrong theory before the test fails (NaN: it fails at once)",
    ),
    "note": Variable(
        "the cell's note",
        "1",
        "what the check measured on this model, or why the claim is not judged or does not apply",
    ),
}


def check_config(config: Mapping[str, Any], schemas: Path) -> None:
    """Cross-checks of what the wing reads: the models of its table are the text models of ``rank_collapse.models``
    and the image encoders of ``vision.models``, one row each, so no name may be in both lists (their own checks
    are their wings'; the thresholds of ``report.phenomena`` are :func:`san.phenomena.claims.check_config`'s); the
    quantisation control's models are defined, with pretrained weights (those the run does not analyse are left out:
    :func:`quantisation_models`), and so are the size ladders' models. Raises :class:`ConfigError` naming the key."""
    text = list(config.get("rank_collapse", {}).get("models", []))
    for i, name in enumerate(config.get("vision", {}).get("models", [])):
        if name in text:
            raise ConfigError(
                f"config key 'vision.models.{i}': model {name!r} is also in rank_collapse.models; the models x "
                "claims table (results/phenomena/table.csv) has one row per model name"
            )
    models = config.get("models", {})
    for i, name in enumerate(config.get("phenomena", {}).get("quantisation", {}).get("models") or []):
        if name not in models:
            raise ConfigError(
                f"config key 'phenomena.quantisation.models.{i}': model {name!r} is not defined under 'models'"
            )
        if not (models.get(name) or {}).get("pretrained"):
            raise ConfigError(
                f"config key 'phenomena.quantisation.models.{i}': model {name!r} has no pretrained weights "
                f"(models.{name}.pretrained): the control requantises pretrained weights"
            )
    for i, ladder in enumerate(config.get("phenomena", {}).get("size_ladders") or []):
        for j, name in enumerate(ladder):
            if name not in models:
                raise ConfigError(
                    f"config key 'phenomena.size_ladders.{i}.{j}': model {name!r} is not defined under 'models' "
                    "(a size ladder names models of one family at several sizes, smallest first)"
                )


def quantisation_models(config: Mapping[str, Any]) -> list[str]:
    """The models whose cells get the quantisation control: those of ``phenomena.quantisation.models`` that the run
    analyses (``rank_collapse.models``, the text models, or ``vision.models``, the image encoders), so that a run of
    other models needs no edit of this list."""
    analysed = {*config.get("rank_collapse", {}).get("models", []), *config.get("vision", {}).get("models", [])}
    return [m for m in config.get("phenomena", {}).get("quantisation", {}).get("models") or [] if m in analysed]
