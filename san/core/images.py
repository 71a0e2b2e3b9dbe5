"""Input images of the vision experiments: free-licence photographs pinned by sha256, and seeded noise images.

The photographs are four of the images scikit-image 0.25.2 bundles in its wheel (``skimage/data``), copied into
``san/data/images/`` (source and licence of each in ``san/data/images/README.md``) so that no package is needed to
read them: a NASA portrait (public domain), a cat (CC0), a cup of coffee (CC0) and a rocket launch (SpaceX, public
domain). Each file is checked against its pin before every read, so every machine feeds the same bytes to the
model's image processor. The noise images are the control: uniform pixel noise from a seeded CPU generator, the
same on every device.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from san.core.rng import cpu_generator

#: Data files this module reads, relative to the ``san`` folder (inputs of every job that imports it, san.imports).
DATA_FILES = (
    "data/images/astronaut.png",
    "data/images/chelsea.png",
    "data/images/coffee.png",
    "data/images/rocket.jpg",
)
_FOLDER = Path(__file__).resolve().parent.parent / "data" / "images"


@dataclass(frozen=True)
class PinnedImage:
    """One pinned photograph: its file under ``san/data/images``, its sha256 and its licence."""

    file: str
    sha256: str
    licence: str


#: the pinned photographs by name (the sha256 values equal scikit-image's registry, ``skimage/data/_registry.py``)
IMAGES: dict[str, PinnedImage] = {
    "astronaut": PinnedImage(
        "astronaut.png", "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
        "NASA photograph of Eileen Collins, public domain (no known copyright restrictions)",
    ),
    "chelsea": PinnedImage(
        "chelsea.png", "596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb",
        "CC0 by the photographer (Stefan van der Walt)",
    ),
    "coffee": PinnedImage(
        "coffee.png", "cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7",
        "CC0 by the photographer (Rachel Michetti), courtesy of Pikolo Espresso Bar",
    ),
    "rocket": PinnedImage(
        "rocket.jpg", "c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c",
        "SpaceX launch photograph of DSCOVR, released into the public domain by SpaceX",
    ),
}  # fmt: skip
#: the name of the noise control as an image source
NOISE = "noise"


def image_path(name: str) -> Path:
    """The file of pinned photograph ``name``; ValueError naming the known ones otherwise."""
    if name not in IMAGES:
        raise ValueError(f"unknown pinned image {name!r}; expected one of {sorted(IMAGES)}")
    return _FOLDER / IMAGES[name].file


def verify_image(name: str) -> bytes:
    """The bytes of pinned photograph ``name`` after checking them against its sha256 (an error names the file)."""
    path = image_path(name)
    if not path.is_file():
        raise FileNotFoundError(f"pinned image {path} is missing (see san/data/images/README.md)")
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != IMAGES[name].sha256:
        raise RuntimeError(f"pinned image {path} has sha256 {digest}, expected {IMAGES[name].sha256}: it was changed")
    return data


def read_images(names: Sequence[str]) -> list[Image.Image]:
    """The pinned photographs ``names`` as RGB images, each checked against its pin before it is decoded."""
    import io

    images = []
    for name in names:
        data = verify_image(name)
        with Image.open(io.BytesIO(data)) as img:
            images.append(img.convert("RGB"))
    return images


def noise_images(n: int, size: int, seed: int) -> list[Image.Image]:
    """``n`` RGB images of ``size`` x ``size`` uniform pixel noise (each channel 0..255) from a CPU generator
    seeded with ``seed``: the control without any spatial structure."""
    if n < 0 or size < 1:
        raise ValueError(f"noise images need n >= 0 and size >= 1, got n={n}, size={size}")
    generator = cpu_generator(seed)
    pixels = torch.randint(0, 256, (n, size, size, 3), generator=generator, dtype=torch.uint8).numpy()
    return [Image.fromarray(np.ascontiguousarray(p)) for p in pixels]


def images(names: Sequence[str], n_noise: int, noise_size: int, seed: int) -> tuple[list[str], list[Image.Image]]:
    """The input images of a vision job: the pinned photographs ``names``, then ``n_noise`` noise images (named
    ``noise<i>``); returns the names and the images in that order."""
    noise = noise_images(n_noise, noise_size, seed)
    return [*names, *(f"{NOISE}{i}" for i in range(n_noise))], [*read_images(names), *noise]
