"""Verdicts of the report: three states, two kinds, and the positive control beside a verdict.

A verdict is ``True`` (holds), ``False`` (fails) or ``None`` (**not judged**: the results hold no evidence for it,
e.g. every pair sits at the float floor, or no model has the weights the claim speaks of). "Not judged" is neither a
pass nor a fail: no verdict may pass on zero evidence, and a claim over several tasks or models fails when one of
them fails and is not judged when one of them is not judged (:func:`every`).

Each claims module lists its verdicts with :func:`entry`, of one of two kinds:

- :data:`SCIENTIFIC`: a finding about attention that the run could refute (the paper's and the follow-up
  literature's claims);
- :data:`REGRESSION`: a check of the code that is true by construction (an identity, a proven inequality, a control
  that must behave as designed): a failure is a bug, a pass says nothing about attention.

A positive control (:func:`control`) runs the same comparison against a deliberately wrong reference (the bound
tightened by a factor): it must fail, or the verdict beside it has no power at that factor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Verdict = bool | None
"""``True`` holds, ``False`` fails, ``None`` not judged."""

SCIENTIFIC = "scientific"
REGRESSION = "regression"
KINDS = (SCIENTIFIC, REGRESSION)
NOT_JUDGED = "not judged"
LABELS = {True: "holds", False: "fails", None: NOT_JUDGED}


def judged(holds: bool, evidence: int) -> Verdict:
    """``holds`` when there is evidence (``evidence`` > 0 judged items), else not judged (None)."""
    return None if evidence <= 0 else bool(holds)


def every(verdicts: Iterable[Verdict]) -> Verdict:
    """A claim over several items (tasks, models, seeds): fails when any fails, else not judged when any is not
    judged (or there is none), else holds."""
    items = list(verdicts)
    if any(v is False for v in items):
        return False
    if not items or any(v is None for v in items):
        return None
    return True


def label(verdict: Verdict) -> str:
    """``holds``, ``fails`` or ``not judged``."""
    return LABELS[None if verdict is None else bool(verdict)]


def control(verdict: Verdict, factor: float, measured: Any = None) -> dict[str, Any]:
    """A positive control: the same check against its reference made wrong by ``factor``. ``must_fail`` holds when
    the control fails (the check has power at that factor); not judged when the control is."""
    return {
        "factor": factor,
        "verdict": label(verdict),
        "fails_as_it_must": None if verdict is None else not verdict,
        **({} if measured is None else {"measured": measured}),
    }


def entry(
    key: str, verdict: Verdict, kind: str, statement: str, positive_control: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """One row of the verdict table: ``key`` (the verdict's key in its section of summary.json), its label, kind
    (:data:`KINDS`), a one-line statement and, where there is one, its positive control (:func:`control`)."""
    if kind not in KINDS:
        raise ValueError(f"verdict kind {kind!r} of {key!r}: expected one of {KINDS}")
    row = {"key": key, "verdict": label(verdict), "kind": kind, "statement": statement}
    if positive_control is not None:
        row["positive_control"] = dict(positive_control)
    return row


def collect(
    sections: Mapping[str, Any], extra: Mapping[str, Iterable[Mapping[str, Any]]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The verdict table of a summary: every section's ``verdicts`` rows (and ``extra``: rows of sections that keep
    no ``verdicts`` key of their own), named ``section.key``, split by kind."""
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    rows = {
        name: s.get("verdicts", []) for name, s in sections.items() if isinstance(s, Mapping) and name != "verdicts"
    }
    for name, section_rows in {**rows, **(extra or {})}.items():
        for row in section_rows:
            out[row["kind"]].append({**row, "claim": f"{name}.{row['key']}"})
    return out
