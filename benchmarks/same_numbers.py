"""Do two versions of the code compute the same numbers? Runs the workflow of each on one small config and compares
every result file variable by variable (``python -m san.core.compare``): the check of a refactoring.

    python benchmarks/same_numbers.py A B [--config tests/config/tiny.yaml] [--workdir DIR] [--cores 2]
        [--targets T ...]

``A`` and ``B`` are each a commit (any name git resolves; it is checked out into a temporary worktree) or a folder
holding a checkout (e.g. ``.`` for this working tree, uncommitted changes included). Each version's workflow
(workflow/ with its Snakefile, scripts/, san/, config files) is copied into ``DIR/a`` and ``DIR/b``, its own
``config.yaml`` overlaid with ``--config`` (a partial config: mappings merged, values replaced, dotted keys under
``replace`` replaced whole), and run with its own library, to ``--targets`` (files or target rules; default: the
whole workflow). Exit status 0 when every result both runs hold is identical.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from san.core.compare import copy_workflow  # noqa: E402
from san.core.compare import main as compare  # noqa: E402
from san.core.config import overlay_config  # noqa: E402

#: what a run needs of a checkout (not results, not the environment)


def checkout(version: str, scratch: Path) -> Path:
    """A folder holding ``version``: the folder itself, or a detached worktree of the commit in ``scratch``."""
    if Path(version).is_dir():
        return Path(version).resolve()
    dest = scratch / f"worktree-{len(list(scratch.glob('worktree-*')))}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(dest), version], check=True)
    return dest


def run_version(source: Path, dest: Path, overlay: dict, cores: str, targets: list[str]) -> Path:
    """Copy ``source``'s workflow to ``dest``, write its config.yaml with ``overlay`` laid over it, run it."""
    if dest.exists():
        shutil.rmtree(dest)
    copy_workflow(source, dest)
    config = overlay_config(yaml.safe_load((source / "config.yaml").read_text()), overlay)
    (dest / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    env = dict(os.environ, PYTHONPATH=str(dest), OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", cores, *targets], cwd=dest, env=env, check=True)
    return dest / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="commit or checkout folder")
    parser.add_argument("b", help="commit or checkout folder")
    parser.add_argument("--config", type=Path, default=ROOT / "tests" / "config" / "tiny.yaml")
    parser.add_argument("--workdir", type=Path, help="where the two runs are kept (default: a temporary folder)")
    parser.add_argument("--cores", default="2")
    parser.add_argument("--targets", nargs="*", default=[], help="Snakemake targets (default: the whole workflow)")
    args = parser.parse_args(argv)
    overlay = yaml.safe_load(args.config.read_text())
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="same_numbers_"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = [
        run_version(checkout(v, workdir), workdir / side, overlay, args.cores, args.targets)
        for v, side in ((args.a, "a"), (args.b, "b"))
    ]
    return compare([str(r) for r in results])


if __name__ == "__main__":
    sys.exit(main())
