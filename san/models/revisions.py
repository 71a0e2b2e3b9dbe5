"""Checkpoint schedules and revision names of a training series (torch-free).

Pythia (Biderman et al. 2023) saves step 0 (the initialisation), the log-spaced steps 1, 2, 4, ..., 512, then every
1000 steps up to 143000: 154 revisions named ``step<n>``. :func:`log_then_every` builds such a schedule for any
sizes, so a config names a series by three numbers instead of 154 names; :func:`step_of` and :func:`tokens_of` read
the training step and the tokens seen from a revision's name (Pythia's ``step1000``, OLMo's
``stage1-step1000-tokens5B``). A series of hub revisions is acquired as a source of its own
(:mod:`san.models.sources.series`).
"""

from __future__ import annotations

import re

_STEP = re.compile(r"(?:^|[-_])step(\d+)(?:$|[-_])")


_TOKENS = re.compile(r"(?:^|[-_])tokens(\d+)([KMBT]?)(?:$|[-_])")


_SCALE = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def log_then_every(last: int, every: int, log_until: int | None = None) -> list[int]:
    """Step 0, the powers of two up to ``log_until`` (default: the largest one below ``every``), then every
    ``every`` steps up to ``last`` (always included): Pythia's schedule is ``log_then_every(143000, 1000, 512)``."""
    if last < 0 or every < 1:
        raise ValueError(f"a schedule needs last >= 0 and every >= 1 (got last={last}, every={every})")
    top = every - 1 if log_until is None else log_until
    steps = {0}
    power = 1
    while power <= min(top, last):
        steps.add(power)
        power *= 2
    steps.update(range(every, last + 1, every))
    steps.add(last)
    return sorted(steps)


def revision_name(step: int) -> str:
    """The name of the revision saved at ``step`` (Pythia's branch names: ``step<n>``)."""
    return f"step{int(step)}"


def step_of(revision: str) -> int | None:
    """The training step a revision's name states (``step143000``, ``stage1-step1000-tokens5B``), None otherwise."""
    found = _STEP.search(revision)
    return int(found.group(1)) if found else None


def tokens_of(revision: str) -> int | None:
    """The tokens seen that a revision's name states (OLMo's ``...-tokens5B``: 5e9), None otherwise."""
    found = _TOKENS.search(revision)
    return int(found.group(1)) * _SCALE[found.group(2)] if found else None
