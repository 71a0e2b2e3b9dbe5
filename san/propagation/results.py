"""Readers of a propagation sweep result shared by its claims and its figures (torch-free): the fixed parameters
it records and the critical beta its recursion predicts."""

from __future__ import annotations

from typing import Any

import xarray as xr

from san.core.storage import read_structured_attr
from san.propagation import theory


def fixed_params(ds: xr.Dataset) -> dict[str, Any]:
    """The fixed parameters of a sweep result (its ``fixed`` attribute, a JSON object)."""
    return read_structured_attr(ds, "fixed")


def block_kwargs(ds: xr.Dataset) -> dict[str, Any]:
    """Keyword arguments of :func:`theory.block_step` for the fixed block of a sweep result (qk_variance)."""
    fixed = fixed_params(ds)
    residual = read_structured_attr(ds, "residuals")[fixed["residual"]]
    depth = int(ds.sizes["layer"] - 1)
    branch = depth**-0.5 if residual["branch"] == ds.attrs["inv_sqrt_depth"] else float(residual["branch"])
    return {
        "var_v": fixed["var_v"],
        "var_b": fixed["var_b"],
        "var_w": fixed["var_w"],
        "skip": float(residual["skip"]),
        "branch": branch,
        "mlp": bool(fixed["mlp"]),
    }


def predicted_critical_beta(ds: xr.Dataset) -> float:
    """The predicted critical beta of a qk_variance result: the smallest beta whose last-layer attention condenses
    under the recursion started from the measured input correlation (:func:`theory.critical_beta_at_depth`)."""
    depth = int(ds.sizes["layer"] - 1)
    return theory.critical_beta_at_depth(float(ds["cosine"].isel(layer=0).mean()), depth, **block_kwargs(ds))


__all__ = ["block_kwargs", "fixed_params", "predicted_critical_beta"]
