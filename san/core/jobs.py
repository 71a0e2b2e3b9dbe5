"""Small helpers for the Snakemake entry points in ``scripts/``: per-job logging and the job's exact CPU time."""

from __future__ import annotations

import contextlib
import logging
import resource
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
            logger.info(cpu_line())
        except BaseException:
            logger.exception("job failed")
            raise
        finally:
            logger.removeHandler(handler)


#: the start of the last line of a job's log, read by benchmarks/bench_run.py
CPU_LINE = "job cpu time:"


def cpu_line() -> str:
    """The job process's CPU time so far, its threads and child processes included (``getrusage``), as the log's
    last line: Snakemake's ``benchmark:`` samples CPU time every 30 s once a job has run 15 s and keeps the last
    sample, so it misses up to 30 s of each long job (benchmarks/bench_run.py reads this line instead)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = own.ru_utime + children.ru_utime, own.ru_stime + children.ru_stime
    return f"{CPU_LINE} {user + system:.2f} s (user {user:.2f} s, system {system:.2f} s)"
