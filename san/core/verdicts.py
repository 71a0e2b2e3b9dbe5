"""The claims contract: one row per verdict, four printed states, three kinds, four forms, one spread and one margin
rule, and the positive control beside every scientific verdict.

A check is ``True`` (holds), ``False`` (fails) or ``None`` (**not judged**: the results hold no evidence for it,
e.g. every pair sits at the float floor, or no model has the weights the claim speaks of). "Not judged" is neither a
pass nor a fail: no verdict may pass on zero evidence, and a claim over several tasks or models fails when one of
them fails and is not judged when one of them is not judged (:func:`every`).

Every wing's ``claims(inputs, params)`` lists its verdicts as rows built by :func:`row`, each of one **kind**:

- :data:`SCIENTIFIC`: a finding about attention that the run could refute (the paper's and the follow-up
  literature's claims);
- :data:`REGRESSION`: a check of the code that is true by construction (an identity, a proven inequality, a control
  that must behave as designed): a failure is a bug, a pass says nothing about attention;
- :data:`DEMONSTRATION`: an example built to satisfy an existential claim (a construction): it shows that the
  example exists and behaves as designed, never that the claim holds in general;

and of one **form** (what kind of statement it checks): :data:`UNIVERSAL` (refuted by one counterexample),
:data:`EXISTENTIAL` (shown by an example), :data:`QUANTITATIVE` (a measured number against a theory's) or
:data:`OBSERVATION` (a figure's reading, replicated).

**Positive control.** Every scientific row carries one (:func:`control`): the same test run against a deliberately
wrong reference (an offset recursion, a tightened bound, a variant or mask of the other kind, the effects with
alternating signs), whose setting comes from config before the run. The control must fail. A scientific check that
holds while its control holds too cannot tell a right answer from a wrong one: its row prints :data:`NO_POWER` (a
fourth state, never counted as "holds"); one whose control could not be run prints "not judged". Where it is
computable, the control also carries ``power``: the largest
wrongness of the reference (offset, factor) at which the test still passes.

**One spread rule** (:func:`spread`): the standard error of the mean over seeds (sample standard deviation over the
square root of the count; 0 for a single seed). **One margin rule** (:func:`margin`): a statistic is moved
``sigmas`` standard errors towards failing before it is compared with its threshold, so more noise never makes a
check easier to pass; the margin is the signed distance left, and the check holds when it is positive.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

Verdict = bool | None
"""``True`` holds, ``False`` fails, ``None`` not judged."""

SCIENTIFIC = "scientific"
REGRESSION = "regression"
DEMONSTRATION = "demonstration"
KINDS = (SCIENTIFIC, REGRESSION, DEMONSTRATION)

UNIVERSAL = "universal"
EXISTENTIAL = "existential"
QUANTITATIVE = "quantitative"
OBSERVATION = "observation"
FORMS = (UNIVERSAL, EXISTENTIAL, QUANTITATIVE, OBSERVATION)

HOLDS = "holds"
FAILS = "fails"
NOT_JUDGED = "not judged"
NO_POWER = "no power"
STATES = (HOLDS, FAILS, NOT_JUDGED, NO_POWER)
LABELS = {True: HOLDS, False: FAILS, None: NOT_JUDGED}


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


def spread(values: Iterable[float]) -> tuple[float, float, int]:
    """The one spread rule: the mean of the finite ``values`` (seeds), the standard error of that mean (sample
    standard deviation over the square root of the count; 0 for one value: no spread to widen a margin) and the
    count. NaN mean without a finite value."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=float)
    if not v.size:
        return float("nan"), 0.0, 0
    se = float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else 0.0
    return float(v.mean()), se, int(v.size)


def margin(value: float, se: float, sigmas: float, threshold: float, *, above: bool) -> float:
    """The one margin rule: how far ``value``, moved ``sigmas`` standard errors ``se`` towards failing, clears
    ``threshold``: ``value - sigmas se - threshold`` when the claim says the value exceeds the threshold
    (``above``), ``threshold - (value + sigmas se)`` when it says the value stays below it. Positive: the check
    holds (:func:`clears`); NaN when the value is."""
    if above:
        return float(value - sigmas * se - threshold)
    return float(threshold - (value + sigmas * se))


def clears(m: float) -> Verdict:
    """Whether a margin of :func:`margin` passes: positive holds, zero or negative fails, NaN not judged."""
    return None if not np.isfinite(m) else bool(m > 0)


def control(
    reference: str, setting: Any, holds: Verdict, *, power: float | None = None, value: float | None = None
) -> dict[str, Any]:
    """A positive control: the same test against a deliberately wrong ``reference`` (a phrase naming it), made wrong
    by ``setting`` (its offset or factor from config, or None where the wrong reference is another variant), whose
    check gave ``holds``. It must fail (``fails_as_it_must``); ``power`` is the largest wrongness of the reference at
    which the test still passes (None where not computable), ``value`` the control's own measured number."""
    return {
        "reference": reference,
        "setting": setting,
        "verdict": label(holds),
        "fails_as_it_must": None if holds is None else not holds,
        "power": None if power is None or not np.isfinite(power) else float(power),
        **({} if value is None else {"value": float(value)}),
    }


def row(
    key: str,
    statement: str,
    *,
    kind: str,
    form: str,
    source: str,
    holds: Verdict,
    value: float | None = None,
    margin: float | None = None,
    test: str = "",
    detail: str = "",
    positive_control: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One row of a wing's verdict table, the same for every wing: ``key`` (its name in the wing's section),
    ``statement`` (as its source states it), ``kind`` (:data:`KINDS`), ``form`` (:data:`FORMS`), ``source`` (paper
    and place), ``holds`` (the check: True, False, None), the measured ``value`` and its ``margin`` (:func:`margin`),
    the ``test`` that judges it, the numbers behind it (``detail``) and, required for a scientific row, its
    ``positive_control`` (:func:`control`). ``verdict`` is the printed state (:func:`printed`)."""
    if kind not in KINDS:
        raise ValueError(f"verdict kind {kind!r} of {key!r}: expected one of {KINDS}")
    if form not in FORMS:
        raise ValueError(f"verdict form {form!r} of {key!r}: expected one of {FORMS}")
    if kind == SCIENTIFIC and positive_control is None:
        raise ValueError(f"scientific verdict {key!r} has no positive control")
    holds = None if holds is None else bool(holds)
    out = {
        "key": key,
        "statement": statement,
        "kind": kind,
        "form": form,
        "source": source,
        "test": test,
        "holds": holds,
        "verdict": printed(holds, positive_control, kind),
        "value": None if value is None or not np.isfinite(value) else float(value),
        "margin": None if margin is None or not np.isfinite(margin) else float(margin),
        "detail": detail,
    }
    if positive_control is not None:
        out["positive_control"] = dict(positive_control)
    return out


def printed(holds: Verdict, positive_control: Mapping[str, Any] | None, kind: str = SCIENTIFIC) -> str:
    """The printed state of a check beside its positive control. A scientific check that holds prints
    :data:`HOLDS` only when its control fails as it must; :data:`NO_POWER` when the control holds too (the test
    cannot tell the right reference from the wrong one); :data:`NOT_JUDGED` when the control could not be run (no
    evidence that the test can fail). Otherwise, and for every other kind (a regression row's control only
    reports: a proven inequality passes a tighter bound too), the check's label."""
    if kind == SCIENTIFIC and holds is True and positive_control is not None:
        return {True: HOLDS, False: NO_POWER, None: NOT_JUDGED}[positive_control["fails_as_it_must"]]
    return label(holds)


def rejudged(r: Mapping[str, Any], holds: Verdict) -> dict[str, Any]:
    """Row ``r`` with its check replaced by ``holds`` (e.g. the check reached over seeds), its printed verdict
    recomputed by :func:`printed`."""
    holds = None if holds is None else bool(holds)
    return {**r, "holds": holds, "verdict": printed(holds, r.get("positive_control"), r["kind"])}


def verdict_of(section: Mapping[str, Any] | None, key: str) -> str:
    """The printed verdict of row ``key`` in a wing's ``section`` (:data:`STATES`); not judged without a section."""
    if not section:
        return NOT_JUDGED
    for r in section.get("verdicts", []):
        if r["key"] == key:
            return r["verdict"]
    raise KeyError(f"no verdict row {key!r} in this section (rows: {[r['key'] for r in section['verdicts']]})")


def collect(sections: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The verdict table of a summary: every section's ``verdicts`` rows, named ``section.key``, split by kind."""
    out: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for name, section in sections.items():
        if not isinstance(section, Mapping) or name == "verdicts":
            continue
        for r in section.get("verdicts", []):
            out[r["kind"]].append({**r, "claim": f"{name}.{r['key']}"})
    return out


def largest_passing(passes: Any, settings: Iterable[float]) -> float | None:
    """The power of a test: the largest of ``settings`` (offsets or factors of a wrong reference, in increasing
    order) at which ``passes(setting)`` still holds, scanning from the first; None when the test fails already at
    the first setting (the right reference), NaN never returned."""
    best = None
    for s in settings:
        if passes(float(s)) is not True:
            break
        best = float(s)
    return best
