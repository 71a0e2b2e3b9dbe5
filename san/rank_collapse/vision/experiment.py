"""Rank collapse in image encoders: the paper's measures over token roles, and the spatial view of the patch grid.

Oversmoothing in vision transformers is rank collapse under another name. Wang et al. (ICLR 2022) show that
self-attention is a low-pass filter: depth leaves the mean token (the "DC component"), and the high-frequency share
``||X - 1 x̄ᵀ||_F / ||X||_F`` (the paper's relative residual, in the Frobenius norm) decays. Darcet et al. (ICLR
2024) find high-norm artefact tokens in large pretrained ViTs, so the special tokens (class, distillation,
registers) can carry the collapse: every measure here is taken over all tokens and over the patch tokens alone.
Park & Kim (ICLR 2022) compare the spatial spectra of attention and convolution by the 2-D Fourier transform of the
feature maps over the patch grid: :func:`log_amplitude_difference` is their ``Δ log amplitude`` (highest minus zero
frequency) and :func:`high_frequency_share` the share of the states' energy outside the low-frequency band.

Each variant (:mod:`san.models.ablations`) runs on the image's ``pixel_values`` while the residual-stream hooks of
:mod:`san.rank_collapse.experiment` record every layer; the same states give the measures of massive activations,
high-norm tokens and spectral compression (:mod:`san.measures.phenomena`), the first token being the class token, and
the embedding output the redundancy of each patch with its neighbours (Darcet et al.'s high-norm tokens sit in redundant
patches).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import xarray as xr
from transformers import PretrainedConfig, PreTrainedModel

from san.core.device import ON_CPU, JobPlace, resolve_dtype
from san.core.storage import Variable, describe
from san.measures.phenomena import PATCH_NEIGHBOUR_SIMILARITY, PHENOMENA, layer_phenomena, patch_neighbour_similarity
from san.measures.residual import relative_residual, relative_residual_frobenius
from san.models.ablations import variant
from san.models.spec import row as family_row
from san.rank_collapse.experiment import residual_stream, stacked, weight_set_measures, with_phenomena
from san.rank_collapse.spec import variant_dtypes

#: the token roles, in the order of their flag values
ROLES = ("class", "distillation", "register", "patch")
#: the measures of every layer and image: name -> long name
MEASURES = {
    "residual_ratio": "relative residual ||res(X)||_{1,inf} / ||X||_{1,inf} over all tokens",
    "residual_ratio_patches": "relative residual ||res(X)||_{1,inf} / ||X||_{1,inf} over the patch tokens",
    "residual_ratio_frobenius": "high-frequency share ||X - 1 mean(X)||_F / ||X||_F over all tokens",
    "residual_ratio_frobenius_patches": "high-frequency share ||X - 1 mean(X)||_F / ||X||_F over the patch tokens",
    "spatial_high_frequency_share": "share of the patch states' energy outside the low spatial-frequency band",
    "log_amplitude_difference": "log amplitude at the highest minus at the zero spatial frequency of the patch grid",
}
_STREAM = "layer 0 is the input of the first block, layer l the output of block l (no final norm applied)"
VARIABLES = {
    **{name: Variable(long_name, "1", _STREAM) for name, long_name in MEASURES.items()},
    "token_norm": Variable("Euclidean norm of each token's state", "1", _STREAM),
    "role": Variable("role of the token", "1"),
    "weights": Variable("weights of the model", "1"),
    "variant": Variable("architecture variant", "1"),
    "dtype": Variable("floating point type of the variant's forward passes", "1"),
    "layer": Variable("layer index", "1"),
    "image": Variable("input image", "1"),
    "token": Variable("token position", "1"),
    **PHENOMENA,
    "patch_neighbour_similarity": PATCH_NEIGHBOUR_SIMILARITY,
}


def token_roles(family: str, config: PretrainedConfig | Mapping[str, Any], tokens: int) -> list[str]:
    """The role of each of ``tokens`` positions of an image encoder of ``family``: the row's prefix tokens (class,
    distillation), then the registers its config counts, then patches (Darcet et al.'s registers carry no
    position and sit between the class token and the patches)."""
    entry = family_row(family)
    get = config.get if isinstance(config, Mapping) else lambda k, d=None: getattr(config, k, d)
    registers = int(get(entry.register_key, 0) or 0) if entry.register_key else 0
    prefix = [*entry.prefix_tokens, *["register"] * registers]
    if tokens <= len(prefix):
        raise ValueError(f"{tokens} tokens leave no patch after the {len(prefix)} special tokens of {family!r}")
    return prefix + ["patch"] * (tokens - len(prefix))


def patch_grid(pixel_shape: Sequence[int], patch_size: int) -> tuple[int, int]:
    """Rows and columns of the patch grid of images ``(..., H, W)`` cut into ``patch_size`` squares."""
    height, width = int(pixel_shape[-2]), int(pixel_shape[-1])
    return height // patch_size, width // patch_size


def _grid(patches: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Patch states ``(images, N, width)`` as feature maps ``(images, width, rows, columns)`` (row-major patches)."""
    rows, cols = grid
    if patches.shape[-2] != rows * cols:
        raise ValueError(f"{patches.shape[-2]} patch tokens do not fill a {rows} x {cols} grid")
    return patches.reshape(patches.shape[0], rows, cols, patches.shape[-1]).permute(0, 3, 1, 2)


def amplitude(patches: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Amplitude of the 2-D Fourier transform over the patch grid, averaged over channels: ``(images, rows,
    columns)``, frequency ``(0, 0)`` at index ``(0, 0)`` (Park & Kim 2022, Fig. 2's feature-map spectra)."""
    return torch.fft.fft2(_grid(patches.double(), grid)).abs().mean(dim=1)


def log_amplitude_difference(patches: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    """Park & Kim's ``Δ log amplitude`` per image: log amplitude at the highest frequency ``(π, π)`` (index
    ``(rows // 2, columns // 2)``) minus log amplitude at frequency zero; it falls as a layer smooths the grid."""
    amp = amplitude(patches, grid)
    rows, cols = grid
    return torch.log(amp[:, rows // 2, cols // 2]) - torch.log(amp[:, 0, 0])


def high_frequency_share(patches: torch.Tensor, grid: tuple[int, int], cutoff: float) -> torch.Tensor:
    """Share of the patch states' energy (squared Fourier amplitudes, summed over channels) at spatial frequencies
    outside the low band ``|f_row| < cutoff`` and ``|f_col| < cutoff`` (frequencies in cycles per patch, 0 to 0.5):
    the energy outside the band over the total energy, per image."""
    spectrum = torch.fft.fft2(_grid(patches.double(), grid)).abs().pow(2).sum(dim=1)
    rows, cols = grid
    f_row = torch.fft.fftfreq(rows, dtype=torch.float64).abs()
    f_col = torch.fft.fftfreq(cols, dtype=torch.float64).abs()
    low = (f_row[:, None] < cutoff) & (f_col[None, :] < cutoff)
    return spectrum[:, ~low].sum(dim=1) / spectrum.sum(dim=(1, 2))  # the high band's own sum: no cancellation


def layer_measures(
    states: Sequence[torch.Tensor], roles: Sequence[str], grid: tuple[int, int] | None, cutoff: float
) -> tuple[np.ndarray, np.ndarray]:
    """The measures of :data:`MEASURES` for every state: array ``(measures, layers + 1, images)`` (the spatial
    ones NaN without a patch grid), and the token norms ``(layers + 1, images, tokens)``, in float64."""
    patch = torch.tensor([r == "patch" for r in roles])
    out, norms = [], []
    for h in states:
        h = h.double()
        p = h[:, patch]
        nan = torch.full((h.shape[0],), float("nan"), dtype=torch.float64)
        spatial = (high_frequency_share(p, grid, cutoff), log_amplitude_difference(p, grid)) if grid else (nan, nan)
        values = (relative_residual(h), relative_residual(p), relative_residual_frobenius(h),
                  relative_residual_frobenius(p), *spatial)  # fmt: skip
        out.append(torch.stack([v.cpu() for v in values]))
        norms.append(h.norm(dim=-1).cpu())
    return torch.stack(out, dim=1).numpy(), torch.stack(norms).numpy()


def pixel_inputs(folder: str | Path, settings: Mapping[str, Any]) -> xr.Dataset:
    """The ``pixel_values`` that the model folder's own image processor makes of the pinned photographs
    ``settings["images"]`` and ``settings["noise_images"]`` seeded noise images (``noise_size`` pixels square, seed
    ``seed``; :mod:`san.core.images`), with the processor's settings and the values' sha256 as attributes (as the
    token ids are stored with their tokenizer)."""
    import hashlib
    import json

    from san.core.images import images
    from san.models.images import pixel_values

    names, pictures = images(settings["images"], settings["noise_images"], settings["noise_size"], settings["seed"])
    values, processor = pixel_values(folder, pictures)
    digest = hashlib.sha256(np.ascontiguousarray(values, dtype=np.float32).tobytes()).hexdigest()
    ds = xr.Dataset(
        {"pixel_values": (("image", "channel", "y", "x"), values)},
        coords={"image": ("image", names)},
        attrs={
            "title": "san: pixel values of the input images, as the model's image processor prepares them",
            "image_processor": json.dumps(processor, sort_keys=True),
            "input_sha256": digest,
        },
    )
    ds["pixel_values"].attrs.update(long_name="pixel values after the model's image processor", units="1")
    ds["image"].attrs.update(long_name="input image (a pinned photograph or a seeded noise image)", units="1")
    return ds


def variant_measures(
    model: PreTrainedModel, family: str, pixels: torch.Tensor, grid: tuple[int, int] | None, settings: Mapping
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """:func:`layer_measures` of the model as it is (a variant applied) on ``pixels`` in batches of
    ``settings["batch_size"]``: measures ``(measures, layers + 1, images)``, token norms ``(layers + 1, images,
    tokens)``, the measures of :data:`san.measures.phenomena.PHENOMENA` ``(measures, layers + 1, images)`` (with
    ``settings["massive_token_factor"]``), the patch-neighbour similarity of the layer-0 tokens ``(images, tokens)``
    (:func:`neighbour_similarity`) and the token roles."""
    chunks, phenomena, similarity, roles = [], [], [], []
    for start in range(0, pixels.shape[0], settings["batch_size"]):
        states = residual_stream(model, family, pixels[start : start + settings["batch_size"]])
        roles = token_roles(family, model.config, states[0].shape[1])
        chunks.append(layer_measures(states, roles, grid, settings["high_frequency_cutoff"]))
        whole = torch.from_numpy(chunks[-1][0][list(MEASURES).index("residual_ratio")])
        phenomena.append(layer_phenomena(states, settings["massive_token_factor"], whole))
        similarity.append(neighbour_similarity(states[0], roles, grid))
    return (np.concatenate([c[0] for c in chunks], axis=2), np.concatenate([c[1] for c in chunks], axis=1),
            np.concatenate(phenomena, axis=2), np.concatenate(similarity), roles)  # fmt: skip


def neighbour_similarity(state: torch.Tensor, roles: Sequence[str], grid: tuple[int, int] | None) -> np.ndarray:
    """:func:`san.measures.phenomena.patch_neighbour_similarity` of the patch tokens of ``state`` ``(images, tokens,
    width)`` placed on the token axis ``(images, tokens)``, NaN at the other tokens (and everywhere without a patch
    grid)."""
    out = torch.full(state.shape[:2], float("nan"), dtype=torch.float64)
    if grid is not None:
        patch = torch.tensor([r == "patch" for r in roles])
        out[:, patch] = patch_neighbour_similarity(state[:, patch], grid)
    return out.numpy()


def run(
    family: str,
    models: Mapping[str, str | Path],
    inputs: Mapping[str, xr.Dataset],
    settings: Mapping[str, Any],
    job: JobPlace = ON_CPU,
) -> xr.Dataset:
    """The vision view of Fig. 2 for one image encoder: per weights, variant, layer and image the measures of
    :data:`MEASURES` and every token's norm, with each token's role; the job shape and arguments of
    :func:`san.rank_collapse.experiment.run` (``job``: the device, log and memory budget; a weight set larger than
    the budget is streamed block by block).

    ``models`` maps each weight set to its model folder and ``inputs`` to its images' ``pixel_values`` (with the
    ``input_sha256`` attribute); ``settings`` holds ``variants``, ``dtype`` (one, or one per variant),
    ``batch_size``, ``high_frequency_cutoff`` (:func:`high_frequency_share`) and ``massive_token_factor``
    (:data:`san.measures.phenomena.PHENOMENA`, recorded beside, with each patch's similarity to its neighbours).
    """
    if family_row(family).modality != "image":
        raise ValueError(f"family {family!r} reads text, not images: list its model under rank_collapse.models")
    variants = list(settings["variants"])
    dtypes = variant_dtypes(settings["dtype"], variants)

    def measure(model: PreTrainedModel, pixels: torch.Tensor, dtype_name: str, own: list[str]) -> dict[str, tuple]:
        patch = getattr(model.config, "patch_size", None)
        grid = patch_grid(pixels.shape, int(patch)) if isinstance(patch, int) else None
        out = {}
        for name in own:
            with variant(model, family, name):
                out[name] = variant_measures(
                    model, family, pixels.to(job.device, resolve_dtype(dtype_name)), grid, settings
                )
        return out

    found, manifests, hashes = weight_set_measures(family, models, inputs, "pixel_values", dtypes, measure, job)
    roles = _roles(family, found)
    images = [str(v) for v in next(iter(inputs.values()))["image"].values]
    coords = {"weights": list(models), "variant": variants, "dtype": [dtypes[v] for v in variants], "image": images}
    attrs = {"manifests": manifests, "input_sha256": hashes}
    ds = _dataset(stacked(found, variants, 0), stacked(found, variants, 1), coords, roles, attrs)
    ds = with_phenomena(ds, stacked(found, variants, 2), ("weights", "variant", "layer", "image"))
    # the patch-neighbour similarity of the embedding output: the same in every variant, read from the first
    similarity = np.stack([by_variant[variants[0]][3] for by_variant in found.values()])
    similar = xr.DataArray(similarity, dims=("weights", "image", "token"))
    return describe(ds.assign(patch_neighbour_similarity=similar), VARIABLES)


def _roles(family: str, found: Mapping[str, Mapping[str, tuple]]) -> list[str]:
    """The token roles every weight set and variant of :func:`run` found (the last item of its measures); weight
    sets that give other roles are an error."""
    roles = None
    for weights, by_variant in found.items():
        for measures in by_variant.values():
            if roles is not None and measures[-1] != roles:
                raise ValueError(f"{weights} weights of {family!r} give other token roles than before")
            roles = measures[-1]
    return roles


def _dataset(
    arr: np.ndarray, norms: np.ndarray, coords: Mapping[str, list], roles: list[str], attrs: Mapping[str, Any]
) -> xr.Dataset:
    """The result of :func:`run`: measures ``arr`` ``(weights, variants, measures, layers + 1, images)``, token
    norms ``(weights, variants, layers + 1, images, tokens)``, the coordinates, the token roles as flags."""
    dims = ("weights", "variant", "layer", "image")
    ds = xr.Dataset(
        {
            **{name: (dims, arr[:, :, i]) for i, name in enumerate(MEASURES)},
            "token_norm": ((*dims, "token"), norms),
        },
        coords={
            "weights": ("weights", coords["weights"]),
            "variant": ("variant", coords["variant"]),
            "dtype": ("variant", coords["dtype"]),
            "layer": ("layer", np.arange(arr.shape[3])),
            "image": ("image", coords["image"]),
            "token": ("token", np.arange(len(roles))),
            "role": ("token", np.array([ROLES.index(r) for r in roles], dtype=np.int8)),
        },
        attrs={
            "title": "san: rank collapse and spatial smoothing in an image encoder's layers",
            "references": "Dong et al. 2021; Wang et al. 2022 (anti-oversmoothing); Park & Kim 2022; Darcet et "
            "al. 2024 (registers)",
            **attrs,
        },
    )
    ds["role"].attrs.update(flag_values=np.arange(len(ROLES), dtype=np.int8), flag_meanings=" ".join(ROLES))
    return describe(ds, VARIABLES)
