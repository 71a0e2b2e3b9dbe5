"""Image processors of the image-encoder families: how a model folder turns images into ``pixel_values``.

A pretrained model folder brings its own ``preprocessor_config.json``; a random initialisation gets the one of the
family's reference checkpoint (:data:`IMAGE_PROCESSORS`: the class and settings of google/vit-base-patch16-224,
facebook/deit-base-distilled-patch16-224, facebook/dinov2-small, facebook/dinov2-with-registers-small,
google/siglip-base-patch16-224 and openai/clip-vit-base-patch16), written into the folder so that transformers'
``AutoImageProcessor`` prepares the images offline in both cases. The settings the processor used are stored with
the pixel values (as the tokenizer's ids are stored with the text).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: the file transformers reads an image processor from
PREPROCESSOR_FILE = "preprocessor_config.json"
_IMAGENET = {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}
_CLIP = {"image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
_HALF = {"image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
#: the image processor of each image family's reference checkpoint: transformers class and its settings
#: (resample 2 is bilinear, 3 bicubic)
IMAGE_PROCESSORS: dict[str, tuple[str, dict[str, Any]]] = {
    "vit": ("ViTImageProcessor", {**_HALF, "size": {"height": 224, "width": 224}, "resample": 2}),
    "deit": (
        "DeiTImageProcessor",
        {**_IMAGENET, "size": {"height": 256, "width": 256}, "crop_size": {"height": 224, "width": 224},
         "do_center_crop": True, "resample": 3},
    ),
    "dinov2": (
        "BitImageProcessor",
        {**_IMAGENET, "size": {"shortest_edge": 256}, "crop_size": {"height": 224, "width": 224},
         "do_center_crop": True, "resample": 3},
    ),
    "dinov2_with_registers": (
        "BitImageProcessor",
        {**_IMAGENET, "size": {"shortest_edge": 256}, "crop_size": {"height": 224, "width": 224},
         "do_center_crop": True, "resample": 3},
    ),
    "siglip": ("SiglipImageProcessor", {**_HALF, "size": {"height": 224, "width": 224}, "resample": 3}),
    "clip": (
        "CLIPImageProcessor",
        {**_CLIP, "size": {"shortest_edge": 224}, "crop_size": {"height": 224, "width": 224},
         "do_center_crop": True, "resample": 3},
    ),
}  # fmt: skip


def write_image_processor(family: str, folder: str | Path) -> Path:
    """Write the image processor of ``family``'s reference checkpoint (:data:`IMAGE_PROCESSORS`) into ``folder``;
    returns the file written."""
    import transformers

    if family not in IMAGE_PROCESSORS:
        raise ValueError(f"family {family!r} has no image processor; expected one of {sorted(IMAGE_PROCESSORS)}")
    class_name, settings = IMAGE_PROCESSORS[family]
    processor = getattr(transformers, class_name)(**settings)
    processor.save_pretrained(folder)
    return Path(folder) / PREPROCESSOR_FILE


def image_processor(folder: str | Path) -> Any:
    """The model folder's own image processor (``AutoImageProcessor``; a clear error when the folder has none)."""
    from transformers import AutoImageProcessor

    path = Path(folder) / PREPROCESSOR_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no {PREPROCESSOR_FILE}: the model's image processor is unknown")
    return AutoImageProcessor.from_pretrained(folder)


def pixel_values(folder: str | Path, images: Sequence[Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """The ``pixel_values`` (float32, ``(images, 3, H, W)``) that the image processor of the model in ``folder``
    makes of ``images``, and the processor's settings (its ``preprocessor_config.json``)."""
    processor = image_processor(folder)
    values = processor(images=list(images), return_tensors="np")["pixel_values"]
    settings = json.loads((Path(folder) / PREPROCESSOR_FILE).read_text(encoding="utf-8"))
    return np.asarray(values, dtype=np.float32), settings
