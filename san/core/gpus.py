"""The GPUs a job may use, without importing torch: how many are visible (for the workflow's GPU limit at parse
time) and one GPU per job (a lock per physical device, held while the job runs).

Snakemake's ``--resources gpu=N`` only counts GPU jobs; it does not say which GPU a job gets. Each GPU job claims
the first free device among those visible to it by locking ``<lock dir>/<host>-<device id>.lock`` for its lifetime,
so N jobs on an N-GPU node run on N different devices. A SLURM job sees only its own allocation (its
``CUDA_VISIBLE_DEVICES``), so it claims that device and never waits for another job's.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

#: Where the per-device locks live: the workflow's own hidden folder (jobs run in the working directory).
LOCK_DIR_ENV = "SAN_GPU_LOCK_DIR"
DEFAULT_LOCK_DIR = Path(".snakemake") / "gpu-slots"

#: The NVIDIA driver's list of GPUs (one folder per device), read when nvidia-smi is missing.
DRIVER_GPUS = Path("/proc/driver/nvidia/gpus")

_held: dict[int, IO] = {}


def visible_gpus(environ: dict[str, str] | None = None) -> list[str]:
    """Identifiers of the GPUs a process started now would see, in CUDA's order.

    ``CUDA_VISIBLE_DEVICES`` decides when set (its comma-separated entries up to the first invalid one; empty or
    ``-1``: none); otherwise the NVIDIA driver's list (``nvidia-smi -L``, else ``/proc/driver/nvidia/gpus``), as
    indices ``0..n-1``. No driver: no GPUs.
    """
    env = os.environ if environ is None else environ
    spec = env.get("CUDA_VISIBLE_DEVICES")
    if spec is not None:
        ids: list[str] = []
        for item in (s.strip() for s in spec.split(",")):
            if not item or item.startswith("-"):
                break
            ids.append(item)
        return ids
    return [str(i) for i in range(_driver_gpu_count())]


def _driver_gpu_count() -> int:
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=True).stdout
            return sum(line.startswith("GPU ") for line in out.splitlines())
        except (OSError, subprocess.SubprocessError):
            pass
    return len(list(DRIVER_GPUS.iterdir())) if DRIVER_GPUS.is_dir() else 0


def lock_dir() -> Path:
    """The folder of the per-device locks (``SAN_GPU_LOCK_DIR`` when set)."""
    return Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


def claim_gpu(ids: list[str], wait_seconds: float = 0.5, log=None) -> int:
    """Index (into ``ids``, CUDA's numbering in this process) of a free GPU, locked until the process ends.

    Tries the devices in order and takes the first whose lock is free; when every one is held (more GPU jobs than
    GPUs, e.g. ``--resources gpu`` above the device count), waits and tries again, so two jobs never share a device.
    """
    if not ids:
        raise ValueError("no GPU is visible to claim")
    if _held:
        return next(iter(_held))
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    waited = False
    while True:
        for index, ident in enumerate(ids):
            fh = open(folder / f"{host}-{ident}.lock", "a")  # noqa: SIM115 - held open for the process's lifetime
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            _held[index] = fh
            return index
        if not waited and log is not None:
            log.info("all %d visible GPUs are held by other jobs; waiting for one", len(ids))
        waited = True
        time.sleep(wait_seconds)


def release_gpus() -> None:
    """Release every GPU this process claimed (also done by the operating system when it exits)."""
    for fh in _held.values():
        fh.close()
    _held.clear()
