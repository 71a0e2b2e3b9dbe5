"""``python -m san.models.pins FOLDER [--name NAME]``: the config entry of a local model folder (a ``save_pretrained``
folder), with the sha256 of every file the model is loaded from (:func:`san.models.local.model_folder_files`), its
family recognised from its ``config.json`` (:func:`san.models.recognise.recognise`), to paste under ``models:``.
Torch-free; the folder is refused here as the config check refuses it (unsupported architecture, no weights)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from san.core.config import ConfigError
from san.models.folders import AcquisitionError, sha256_file
from san.models.local import model_folder_files, read_folder_config
from san.models.recognise import UnsupportedModel, recognise

#: a model name the config accepts (the schema's pattern of a name that becomes a path component)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def default_name(folder: Path) -> str:
    """A config name for the model in ``folder``: its folder name, with characters a name may not hold replaced."""
    name = re.sub(r"[^A-Za-z0-9_.+-]", "-", folder.resolve().name).lstrip(".-_+") or "model"
    return name


def local_entry(folder: str | Path, allow_pickle: bool = False) -> dict[str, Any]:
    """The ``models.<name>`` entry of the model folder ``folder``: its recognised ``family`` and a ``local``
    pretrained source with its absolute path and the sha256 of every file the model is loaded from. Raises
    :class:`ConfigError` naming the file when the folder cannot be analysed."""
    folder = Path(folder).expanduser().resolve()
    config = read_folder_config(folder, "FOLDER")
    try:
        recognition = recognise(config, f"the model in {folder}")
        files, _ = model_folder_files(folder, allow_pickle)
    except (UnsupportedModel, AcquisitionError) as exc:
        raise ConfigError(str(exc)) from None
    source: dict[str, Any] = {"source": "local", "path": str(folder)}
    if allow_pickle:
        source["allow_pickle"] = True
    source["sha256"] = {name: sha256_file(path) for name, path in files.items()}
    return {"family": recognition.family, "pretrained": source}


def main(argv: list[str]) -> int:
    import argparse

    import yaml

    ap = argparse.ArgumentParser(
        prog="python -m san.models.pins",
        description="Print the config entry of a local model folder (save_pretrained's) with the sha256 of every "
        "file the model is loaded from, to paste under 'models:' of a config.",
    )
    ap.add_argument("folder", type=Path, help="the model folder (config.json, model.safetensors, tokenizer files)")
    ap.add_argument("--name", help="the model's name in the config (default: the folder's name)")
    ap.add_argument("--allow-pickle", action="store_true", help="take pytorch_model*.bin weights (converted)")
    args = ap.parse_args(argv)
    name = args.name or default_name(args.folder)
    if not NAME.match(name):
        print(f"--name {name!r}: a model name is letters, digits and _ . + - (not first)", file=sys.stderr)
        return 2
    try:
        entry = local_entry(args.folder, args.allow_pickle)
    except ConfigError as exc:
        print(f"{args.folder}: {exc}", file=sys.stderr)
        return 1
    print(yaml.safe_dump({"models": {name: entry}}, sort_keys=False), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
