"""Published statements about collapse at initialisation, checked on the propagation sweeps (torch-free).

One verdict row per statement, worded as the paper words it, with its kind (scientific, or demonstration for a
construction), its form (universal, existential, quantitative or observation), its source, the test that fits the
form, the verdict (not judged when the sweep lacks what the test needs, e.g. a single size or a single seed), the
measured number, its margin and the numbers behind the verdict. Every scientific row is one check
(:func:`san.claims.verdicts.check`): the same test judged against a near-miss wrong theory (or a placebo measured where
the claim's own theory says the effect must vanish), reached by one parameter from config, with the power read from
a scan toward it. Every threshold and every control's setting comes from config ``report.propagation`` (``t``) and is
stated in each row's ``test``; comparisons follow the one spread and margin rule of :mod:`san.claims.verdicts`. The
claims live by sweep: :mod:`~san.propagation.depth_claims`, :mod:`~san.propagation.qk_variance_claims`,
:mod:`~san.propagation.masks_claims`, :mod:`~san.propagation.sequence_length_claims`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import xarray as xr

from san.core.config import ConfigError
from san.propagation.depth_claims import depth_claims
from san.propagation.masks_claims import mask_claims
from san.propagation.qk_variance_claims import qk_claims
from san.propagation.sequence_length_claims import gap_claims

#: the placebos and wrong theories reached by moving the data a share of the way toward them (1: the wrong theory)
SHARES = ("noci_control", "finite_size_control", "critical_control", "causal_control", "delay_control",
          "layernorm_control")  # fmt: skip


def check_config(report: Mapping[str, Any]) -> None:
    """Cross-checks of ``report.propagation`` the schema cannot express; raises
    :class:`~san.core.config.ConfigError` naming the key. A control that could not tell a right answer from a wrong
    one is refused: an offset within the tolerance it is judged against; a share of the way to a wrong theory
    outside (0, 1] (0 is the claim's own reading, above 1 goes past the theory); a partial cure outside (0, 1) (at 1
    it is "no difference", a negation of the claim); a transient outside (0, 1) (the delay would be none or the
    whole depth); a disclosure (``threshold_notes``) of a key the section does not have."""
    t = report["propagation"]
    for offset, tolerance in (("recursion_offset", "agreement"), ("overlap_offset", "overlap_tolerance")):
        if t[offset] <= t[tolerance]:
            raise ConfigError(
                f"report.propagation.{offset} = {t[offset]} must exceed report.propagation.{tolerance} = "
                f"{t[tolerance]}: a control offset within the tolerance is not a wrong reference"
            )
    for key in (*SHARES, "partial_cure", "delay_transient"):
        closed = key in SHARES
        if not (0 < t[key] <= 1 if closed else 0 < t[key] < 1):
            raise ConfigError(f"report.propagation.{key} = {t[key]} must lie in (0, 1{']' if closed else ')'}")
    unknown = sorted(set(t.get("threshold_notes", {})) - set(t) - {"threshold_notes"})
    if unknown:
        raise ConfigError(f"report.propagation.threshold_notes names no key of report.propagation: {unknown}")


CHECKS = {"depth": depth_claims, "qk_variance": qk_claims, "masks": mask_claims, "sequence_length": gap_claims}


#: the grid dimensions each sweep's claims read; any other swept dimension is held at one value (input: the
#: Gaussian tokens, the papers' setting; otherwise the first value of the grid)
USES = {
    "depth": ("residual", "norm", "beta", "width", "seq_len", "model_depth"),
    "qk_variance": ("beta", "seq_len"),
    "masks": ("mask", "norm", "construction_norm", "draw"),
    "sequence_length": ("seq_len", "centred", "residual", "norm"),
}


def held(ds: xr.Dataset, keep: tuple[str, ...]) -> xr.Dataset:
    """``ds`` at one value of every swept dimension outside ``keep`` (and layer, seed): Gaussian input where the
    input was swept, else the grid's first value."""
    sel = {}
    for dim in ds.dims:
        if dim in (*keep, "layer", "seed"):
            continue
        values = list(ds[dim].values)
        sel[dim] = "gaussian" if dim == "input" and "gaussian" in values else values[0]
    return ds.sel(sel)


def sweep_claims(results: Mapping[str, xr.Dataset], t: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every verdict row that the given sweep results (by sweep name) can test, keys ``<sweep>.<claim>``; ``t``:
    config ``report.propagation``."""
    checks: dict[str, Callable[[xr.Dataset, Mapping[str, Any]], list[dict[str, Any]]]] = CHECKS
    return [r for name, check in checks.items() if name in results for r in check(held(results[name], USES[name]), t)]


def claims(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    """The propagation wing's section of summary.json: :func:`sweep_claims` on ``inputs['propagation']`` (one file
    per sweep of ``params['sweeps']``) with ``params['report']['propagation']``; None without a sweep."""
    if not params["sweeps"]:
        return {"propagation": None}
    from san.core.storage import read_netcdf

    results = dict(zip(params["sweeps"], map(read_netcdf, inputs["propagation"]), strict=True))
    return {"propagation": {"verdicts": sweep_claims(results, params["report"]["propagation"])}}
