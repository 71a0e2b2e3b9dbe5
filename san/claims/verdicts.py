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

**One check** (:func:`check`) builds every scientific row: the test is a statistic computed against a
reference (a theory's prediction, a bound, a decay law, a token set) and compared with a :class:`Threshold`; the
reference is parametrised (:class:`Wrong`: an offset, a factor, a rate, a token set) so that one number moves it from
the right reference to a near-miss wrong one that a careful reader could hold. The check judges the claim at the right
reference, the control at the wrong reference's setting from config, and scans the parameter outward from the right
reference: the **power** is how far the reference can move before the test fails. A row records every number its
verdict follows from (value, spread, threshold, margin; the control's too; the scan), so :func:`rederive` recomputes
each verdict from the row alone.

**One spread rule** (:func:`spread`): the standard error of the mean over seeds (sample standard deviation over the
square root of the count; 0 for a single seed). **One margin rule** (:func:`margin`): a statistic is moved
``sigmas`` standard errors towards failing before it is compared with its threshold, so more noise never makes a
check easier to pass; the margin is the signed distance left, and the check holds when it is positive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from san.claims.drift import against_drift

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
    bound: Threshold | None = None,
    inclusive: bool = False,
    items: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """One row of a wing's verdict table, the same for every wing: ``key`` (its name in the wing's section),
    ``statement`` (as its source states it), ``kind`` (:data:`KINDS`), ``form`` (:data:`FORMS`), ``source`` (paper
    and place), ``holds`` (the check: True, False, None), the measured ``value`` and its ``margin`` (:func:`margin`),
    the ``test`` that judges it, the numbers behind it (``detail``) and, required for a scientific row, its
    ``positive_control`` (:func:`control`). A regression or demonstration row records the ``bound`` its value is
    checked against (``inclusive``: a value on the bound passes) and, for a check over several parts, the ``items``
    (each its ``value``, its printed ``verdict`` against the bound and the verdict it ``must`` have), so that its
    check is re-derived from the row (:mod:`san.report.published`). ``verdict`` is the printed state
    (:func:`printed`)."""
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
    if bound is not None:
        out.update(bound=bound.record(), inclusive=bool(inclusive))
    if items is not None:
        out["items"] = [dict(i) for i in items]
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


@dataclass(frozen=True)
class Threshold:
    """What a test compares its statistic with: the claim puts the statistic ``above`` (or below) ``value``, after
    moving it ``sigmas`` standard errors towards failing (:func:`margin`); with ``log`` the two are compared in
    decades (``log10``: for ratios that span orders of magnitude, where the margin reads "decades to spare");
    ``key`` is the config key that sets ``value``."""

    value: float
    above: bool
    key: str
    sigmas: float = 0.0
    log: bool = False

    def margin(self, m: Measure) -> float:
        """The margin of measure ``m`` (:func:`margin`, in decades with ``log``); NaN without evidence, or where a
        logarithm is undefined."""
        if m.evidence <= 0 or not np.isfinite(m.value):
            return float("nan")
        if not self.log:
            return margin(m.value, m.se, self.sigmas, self.value, above=self.above)
        moved = m.value - self.sigmas * m.se if self.above else m.value + self.sigmas * m.se
        if moved <= 0 or self.value <= 0:
            # a ratio moved to or below zero: it clears a "below" claim by any number of decades, never an "above"
            return float("inf") if not self.above and moved <= 0 < self.value else float("nan")
        diff = float(np.log10(moved) - np.log10(self.value))
        return diff if self.above else -diff

    def record(self) -> dict[str, Any]:
        """The threshold as a row records it."""
        return {"value": float(self.value), "above": self.above, "key": self.key, "sigmas": float(self.sigmas),
                "log": self.log}  # fmt: skip


@dataclass(frozen=True)
class Measure:
    """A test's statistic against one reference: its ``value`` (for a claim over several items, the item that
    clears least: :func:`worst`), the standard error ``se`` of that value over seeds (:func:`spread`), and the
    number of items it rests on (``evidence``: 0 is not judged). ``item`` names the item the value is of."""

    value: float
    se: float = 0.0
    evidence: int = 1
    item: str = ""

    def record(self) -> dict[str, Any]:
        """The measure as a row records it (None for a value that is not finite)."""
        finite = np.isfinite(self.value)
        return {"value": float(self.value) if finite else None, "se": _finite(self.se), "evidence": int(self.evidence),
                "item": self.item}  # fmt: skip


@dataclass(frozen=True)
class Wrong:
    """A parametrised reference: ``right`` is the parameter's value at the claim's own reference, ``setting`` (from
    config key ``key``) the near-miss wrong reference the positive control is judged at, ``scan`` the values the
    power is read from, in order from ``right`` outward, and ``reference`` the phrase naming the wrong reference,
    with ``{s}`` where its parameter goes (e.g. ``"the recursion offset by {s:+g}"``)."""

    reference: str
    right: float
    setting: float
    key: str
    scan: tuple[float, ...]

    def named(self, s: float) -> str:
        """The wrong reference at parameter ``s``, in words."""
        return self.reference.format(s=s)

    @classmethod
    def toward(cls, reference: str, setting: float, key: str, right: float = 0.0, steps: int = 20) -> Wrong:
        """A wrong reference reached by moving a parameter from ``right`` to ``setting`` (from config ``key``),
        scanned in ``steps`` equal steps from ``right`` to twice the way to ``setting`` (so that the power shows
        whether the test would still pass beyond the setting)."""
        scan = tuple(float(x) for x in right + (setting - right) * np.linspace(0.0, 2.0, 2 * steps + 1))
        return cls(reference, float(right), float(setting), key, scan)


def toward(measured: Any, wrong: Any, s: float, *, log: bool = False) -> Any:
    """The measurement moved ``s`` of the way towards what a wrong theory predicts for it (0: as measured, 1: the
    wrong theory's prediction, above 1: beyond it): linear, or geometric with ``log`` (for ratios and residuals
    that span decades; zero or negative values have no logarithm and give NaN). At 0 the measurement itself and at
    1 the prediction itself, exactly: a wrong theory without a prediction (NaN) leaves the claim's own reading
    untouched, and no round trip through a logarithm moves a measured value by an ulp."""
    if s == 0:
        return np.asarray(measured, dtype=float)
    if s == 1:
        return np.broadcast_arrays(np.asarray(wrong, dtype=float), np.asarray(measured, dtype=float))[0].copy()
    if not log:
        return (1.0 - s) * np.asarray(measured, dtype=float) + s * np.asarray(wrong, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = np.log(np.asarray(measured, dtype=float)), np.log(np.asarray(wrong, dtype=float))
        return np.exp((1.0 - s) * a + s * b)


def moved(measured: Any, wrong: Any, s: float, *, log: bool = False) -> Any:
    """``measured`` moved ``s`` of the way toward a wrong theory's prediction ``wrong`` (:func:`toward`: exactly
    ``measured`` at ``s = 0``; a prediction missing somewhere leaves the measurement as it is), of ``measured``'s
    kind: a float for a number, a DataArray of its dims for a DataArray (``wrong`` broadcast to it), else a float
    array. The one helper every wing's near-miss control moves its data with."""
    if hasattr(measured, "dims"):  # an xarray DataArray (this module does not import xarray)
        if hasattr(wrong, "dims"):
            wrong = wrong.broadcast_like(measured).transpose(*measured.dims).values
        return measured.copy(data=toward(measured.values, wrong, s, log=log))
    out = toward(measured, wrong, s, log=log)
    return float(out) if np.ndim(measured) == 0 and np.ndim(out) == 0 else np.asarray(out, dtype=float)


def worst(measures: Iterable[Measure], threshold: Threshold) -> Measure:
    """A universal claim's measure over its items: the item that clears ``threshold`` least, resting on every item.
    One failing item fails the claim whatever the others; otherwise an item without evidence (a NaN value) leaves
    the claim not judged (:func:`every`), and so does a claim without items."""
    items = list(measures)
    judged = [m for m in items if m.evidence > 0 and np.isfinite(m.value)]
    if not judged:
        return Measure(float("nan"), 0.0, 0)
    least = min(judged, key=threshold.margin)
    if len(judged) < len(items) and threshold.margin(least) > 0:
        return Measure(float("nan"), 0.0, 0, "an item without evidence")
    return Measure(least.value, least.se, sum(m.evidence for m in judged), least.item)


def _judge(m: Measure, threshold: Threshold) -> tuple[float, Verdict]:
    """The margin of ``m`` and the check it gives: positive holds, otherwise fails; not judged without evidence."""
    mg = threshold.margin(m)
    return mg, (None if m.evidence <= 0 else clears(mg))


def _scan(statistic: Any, threshold: Threshold, wrong: Wrong) -> tuple[list[float], list[Verdict], float | None]:
    """The power scan: the check at each of ``wrong.scan`` in order until the first that does not pass, and the
    power, the last value that passed (None when the first already fails)."""
    settings, passes = [], []
    for s in wrong.scan:
        settings.append(float(s))
        passes.append(_judge(statistic(float(s)), threshold)[1])
        if passes[-1] is not True:
            break
    return settings, passes, power_of(settings, passes)


def power_of(settings: Sequence[float], passes: Sequence[Verdict]) -> float | None:
    """The power a scan shows: the last setting before the first that does not pass (None when the first does
    not)."""
    best = None
    for s, ok in zip(settings, passes, strict=True):
        if ok is not True:
            break
        best = float(s)
    return best


def check(
    key: str,
    statement: str,
    *,
    form: str,
    source: str,
    test: str,
    statistic: Callable[[float], Measure],
    threshold: Threshold,
    wrong: Wrong,
    detail: str = "",
) -> dict[str, Any]:
    """A scientific row from its test. ``statistic(s)`` measures the data against the reference moved to parameter
    ``s`` (``wrong.right``: the claim's own reference); the claim holds when that measure clears ``threshold``; the
    positive control is the same test at ``wrong.setting`` and must fail; the power is read from the scan
    (:func:`power_of`). The row records the measure, the threshold and the margin of each, and the scan, so that
    :func:`rederive` recomputes its verdict from the row alone."""
    measure = statistic(float(wrong.right))
    mg, holds = _judge(measure, threshold)
    wrong_measure = statistic(float(wrong.setting))
    control_margin, control_holds = _judge(wrong_measure, threshold)
    settings, passes, power = _scan(statistic, threshold, wrong)
    positive_control = {
        **control(wrong.named(wrong.setting), float(wrong.setting), control_holds, power=power),
        **{f"measured_{k}": v for k, v in wrong_measure.record().items()},
        "key": wrong.key,
        "right": float(wrong.right),
        "margin": _finite(control_margin),
        "scan": settings,
        "passes": [label(p) for p in passes],
        "scanned_to": float(wrong.scan[-1]),
    }
    out = row(key, statement, kind=SCIENTIFIC, form=form, source=source, holds=holds, value=measure.value,
              margin=mg, test=test, detail=detail, positive_control=positive_control)  # fmt: skip
    out.update(se=_finite(measure.se), evidence=int(measure.evidence), item=measure.item, threshold=threshold.record())
    return out


def _finite(x: float) -> float | None:
    """``x`` as JSON records it: None unless finite."""
    return float(x) if x is not None and np.isfinite(x) else None


def _close(a: float | None, b: float | None) -> bool:
    """Two recorded numbers agree (None stands for a number that is not finite)."""
    if a is None or b is None or not (np.isfinite(a) and np.isfinite(b)):
        return _finite(a) is None and _finite(b) is None
    return bool(np.isclose(a, b, rtol=1e-9, atol=1e-12))


def _parsed(state: str) -> Verdict:
    """A printed check (:func:`label`) read back."""
    return {v: k for k, v in LABELS.items()}[state]


def _rederive_checked(r: Mapping[str, Any], name: str) -> list[str]:
    """The problems of a row built by :func:`check`: its margin and check from its measure and threshold, its
    control's from the control's measure, and its power from its scan."""
    t = Threshold(**r["threshold"])
    pc = r["positive_control"]
    problems = []
    for who, m, recorded in (
        ("", Measure(_nan(r["value"]), _nan(r["se"]), r["evidence"]), r),
        ("the control's ", Measure(_nan(pc["measured_value"]), _nan(pc["measured_se"]), pc["measured_evidence"]), pc),
    ):
        mg, holds = _judge(m, t)
        if not _close(mg, recorded["margin"]):
            problems.append(f"{name}: {who}margin {recorded['margin']} does not follow from its value and threshold "
                            f"({_finite(mg)})")  # fmt: skip
        got = recorded["holds"] if who == "" else _parsed(recorded["verdict"])
        if got != holds:
            problems.append(f"{name}: {who}check {label(got)} does not follow from its margin ({label(holds)})")
    if pc["fails_as_it_must"] != (None if _parsed(pc["verdict"]) is None else not _parsed(pc["verdict"])):
        problems.append(f"{name}: the control's 'fails_as_it_must' contradicts its verdict")
    power = power_of(pc["scan"], [_parsed(p) for p in pc["passes"]])
    if not _close(power, pc["power"]):
        problems.append(f"{name}: power {pc['power']} does not follow from its scan ({power})")
    return problems


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def rederive(r: Mapping[str, Any]) -> list[str]:
    """What is wrong with verdict row ``r`` judged from its own numbers (empty: nothing): a row built by
    :func:`check` must have the margins, checks and power its recorded measures, threshold and scan give; every
    row must print the state its check and control give (:func:`printed`). What it cannot catch: numbers edited
    consistently with each other (a changed measurement with its margin and verdict), which only a rerun from the
    data shows."""
    name = r.get("claim", r.get("key", "?"))
    problems = []
    if "threshold" in r:
        problems += _rederive_checked(r, name)
    elif r["kind"] == SCIENTIFIC:
        problems.append(f"{name}: a scientific row without the numbers of its check (value, threshold, control)")
    want = printed(r["holds"], r.get("positive_control"), r["kind"])
    # a row on quantised weights whose margin quantisation alone moves as far (san.phenomena.drift)
    want = against_drift(want, r.get("margin"), r.get("drift"))
    if r["verdict"] != want:
        problems.append(f"{name}: prints '{r['verdict']}' where its check, control and drift give '{want}'")
    return problems


def rederive_summary(summary: Mapping[str, Any]) -> list[str]:
    """:func:`rederive` on every row of a summary's sections, and its verdict table (``verdicts``) equal to the one
    :func:`collect` builds from the sections."""
    sections = {k: v for k, v in summary.items() if k not in ("verdicts", "provenance")}
    problems = [p for rows in collect(sections).values() for r in rows for p in rederive(r)]

    def by_claim(table: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        # the table's order is the wings' registry's, a summary read back may hold its sections in another order
        return {kind: {r["claim"]: r for r in rows} for kind, rows in table.items()}

    if by_claim(summary.get("verdicts") or {}) != by_claim(collect(sections)):
        problems.append("the verdict table differs from the sections' rows")
    return problems
