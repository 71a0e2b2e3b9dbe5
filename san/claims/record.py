"""One record type for every claim of every wing (torch-free).

A :class:`Claim` holds what a verdict row says about the claim before any data is read: the words as its source
states them (quoted), the source with its section or figure, the kind and form (:mod:`san.claims.verdicts`), its
:class:`Scope` (the models, weights and settings the claim is about: architecture kind, size range, training regime,
the dimensions of a sweep), the measure and its test, the threshold (:class:`san.claims.verdicts.Threshold`, whose
history :func:`history` reads from config), the near-miss wrong theory (:class:`NearMiss`: the reference the
positive control is judged at, with one sentence on why a careful reader could hold it), an optional ``placebo`` (a
wrong reference whose value does not depend on the data tested, kept beside the near-miss control, never in its
place) and the claim's own caveats.

:meth:`Claim.judge` builds the row (:func:`san.claims.verdicts.check`) and adds the record's fields; where the run's
evidence does not cover the scope, :meth:`Claim.not_in_scope` builds a **not judged** row that says what the claim
would need. :func:`items` lists what a row rests on (models, sizes, seeds) with each item's own statistic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from san.claims import verdicts as V

ANY = "any"
#: how the key of a threshold of :meth:`Settings.halves` ends: its value is 0 (each half's margin), not a setting
HALVES = "(each half's margin)"


@dataclass(frozen=True)
class Scope:
    """What a claim is about: the ``architectures`` (kinds of model: decoder, encoder, image encoder, or what a
    simulation builds), the ``sizes`` (range in words, e.g. ">= 300M parameters"), the ``training`` regime
    (pretrained by its authors, fine-tuned, random init, trained on a task) and the ``sweep`` dimensions the claim
    ranges over (e.g. the pretraining context length). ``needs`` says what evidence a run must hold to judge it,
    printed where a run holds none."""

    architectures: tuple[str, ...] = (ANY,)
    sizes: str = ANY
    training: str = ANY
    sweep: tuple[str, ...] = ()
    needs: str = ""

    def record(self, covered: bool = True) -> dict[str, Any]:
        """The scope as a row records it, with whether this run's evidence covers it."""
        return {"architectures": list(self.architectures), "sizes": self.sizes, "training": self.training,
                "sweep": list(self.sweep), "needs": self.needs, "covered": bool(covered)}  # fmt: skip


@dataclass(frozen=True)
class NearMiss:
    """The near-miss wrong theory: ``reference`` (:class:`san.claims.verdicts.Wrong`, the parametrised reference the
    control is judged at) and ``why``, one sentence on why a careful reader could hold it."""

    wrong: V.Wrong
    why: str


@dataclass(frozen=True)
class Claim:
    """One claim, declared once (see the module docstring). ``key`` is the row's key in its wing's section,
    ``statement`` the claim in the project's words, ``words`` the source's own (quoted; empty where the claim is the
    project's), ``source`` the paper and ``place`` its section or figure."""

    key: str
    statement: str
    words: str
    source: str
    place: str
    form: str
    scope: Scope
    measure: str
    test: str
    threshold: V.Threshold
    near_miss: NearMiss
    placebo: str = ""
    caveats: tuple[str, ...] = field(default_factory=tuple)
    kind: str = V.SCIENTIFIC

    @property
    def cited(self) -> str:
        """The source with its place, as the row's ``source`` prints it."""
        return f"{self.source}, {self.place}" if self.place else self.source

    def fields(self, covered: bool = True) -> dict[str, Any]:
        """What the record adds to its row."""
        return {
            "words": self.words,
            "scope": self.scope.record(covered),
            "measure": self.measure,
            "near_miss": {"reference": self.near_miss.wrong.reference, "key": self.near_miss.wrong.key,
                          "why": self.near_miss.why},
            "placebo": self.placebo or None,
            "claim_caveats": list(self.caveats),
        }  # fmt: skip

    def judge(self, statistic: Callable[[float], V.Measure], detail: str, rested: Sequence[Mapping[str, Any]] = ()
              ) -> dict[str, Any]:  # fmt: skip
        """The claim's row (:func:`san.claims.verdicts.check`) from ``statistic`` (the measure against the reference
        moved to parameter ``s``), with the record's fields and the ``items`` it rests on (:func:`items`)."""
        row = V.check(
            self.key, self.statement, form=self.form, source=self.cited, test=self.test, statistic=statistic,
            threshold=self.threshold, wrong=self.near_miss.wrong, detail=detail,
        )  # fmt: skip
        return {**row, **self.fields(), "items": list(rested)}

    def not_in_scope(self, found: str) -> dict[str, Any]:
        """The **not judged** row of a claim whose scope this run's evidence does not cover: ``found`` says what the
        run holds, the scope's ``needs`` what the claim would need."""
        row = self.judge(lambda s: V.Measure(float("nan"), 0.0, 0), f"not judged: {self.scope.needs} ({found})")
        return {**row, "scope": self.scope.record(covered=False)}


@dataclass(frozen=True)
class Settings:
    """A config section's thresholds and control settings, each key spelled once: ``prefix`` is the section's
    dotted key (``report.phenomena.massive``), ``values`` its mapping; :meth:`threshold` and :meth:`wrong` read a
    setting by its name and record its full key."""

    prefix: str
    values: Mapping[str, Any]

    def key(self, name: str) -> str:
        """The full config key of setting ``name``."""
        if name not in self.values:
            raise KeyError(f"config key '{self.prefix}.{name}' is missing (keys: {sorted(self.values)})")
        return f"{self.prefix}.{name}"

    def __getitem__(self, name: str) -> Any:
        self.key(name)
        return self.values[name]

    def threshold(self, name: str, *, above: bool, log: bool = False, sigmas: str | float = 0.0) -> V.Threshold:
        """The threshold set by ``name`` (``sigmas``: a number or the name of the setting that holds it)."""
        k = self[sigmas] if isinstance(sigmas, str) else sigmas
        return V.Threshold(float(self[name]), above=above, key=self.key(name), sigmas=float(k), log=log)

    def wrong(self, name: str, reference: str, right: float = 0.0) -> V.Wrong:
        """The near-miss reference whose setting is ``name`` (:meth:`san.claims.verdicts.Wrong.toward`)."""
        return V.Wrong.toward(reference, float(self[name]), self.key(name), right=right)

    def note(self, name: str) -> str:
        """The disclosure of setting ``name`` changed after a result was seen (the section's ``threshold_notes``),
        for a row's detail; empty for a setting fixed before the first run that judged it."""
        text = (self.values.get("threshold_notes") or {}).get(name)
        return f"; {self.key(name)} = {self[name]:g}: {text}" if text else ""

    def halves(self, *names: str) -> V.Threshold:
        """The threshold of a claim of several halves (:func:`san.claims.evidence.halves`): the least margin above
        0, its key naming each half's own setting."""
        keys = " and ".join(self.key(n) for n in names)
        return V.Threshold(0.0, above=True, key=f"{keys} {HALVES}")

    def section(self, name: str) -> Settings:
        """The settings of a subsection."""
        return Settings(self.key(name), self.values[name])


def item(name: str, value: float | None, unit: str = "", **more: Any) -> dict[str, Any]:
    """One item a row rests on (a model, a size, a seed) with its own statistic (None where not finite)."""
    finite = value is not None and np.isfinite(value)
    return {"item": name, "value": float(value) if finite else None, "unit": unit, **more}


def history(report: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The history of the threshold at config ``key`` (``report.<section>...<name>``): set before the first run
    that judged it, unless its section's ``threshold_notes`` records how it changed after a result was seen (then
    ``set_before`` is False and ``note`` quotes the record, with the old value where the note states one)."""
    parts = key.split(".")
    node: Any = {"report": report}
    for part in parts[:-1]:
        node = node.get(part, {}) if isinstance(node, Mapping) else {}
    note = (node.get("threshold_notes") or {}).get(parts[-1], "") if isinstance(node, Mapping) else ""
    old = re.search(r"set to ([0-9.eE+-]+)", note)
    return {"key": key, "set_before": not note, "note": note,
            "old_value": float(old.group(1).rstrip(".")) if old else None}  # fmt: skip
