"""Small helpers for the Snakemake entry points in ``scripts/``: per-job logging."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def job_log(path: str | Path | None) -> Iterator[logging.Logger]:
    """Send the job's stdout, stderr and ``logging`` output to its Snakemake log file (one log per job).

    Exceptions are logged with their traceback and re-raised, so Snakemake marks the job failed and removes its
    outputs.
    """
    logger = logging.getLogger("san")
    if path is None:
        yield logger
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", buffering=1) as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            yield logger
        except BaseException:
            logger.exception("job failed")
            raise
        finally:
            logger.removeHandler(handler)
