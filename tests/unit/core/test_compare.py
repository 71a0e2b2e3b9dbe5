"""The run comparison behind the README's "every number unchanged" check."""

import numpy as np
import xarray as xr

from san.core.compare import compare_files, main


def _write(path, values, extra=None):
    ds = xr.Dataset({"x": (("i",), np.asarray(values, dtype=float))}, attrs={"git_commit": str(path)})
    if extra:
        ds["y"] = (("i",), np.zeros(len(values)))
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.to_netcdf(path)


def test_identical_runs_pass_and_a_changed_value_fails(tmp_path):
    _write(tmp_path / "a/r/one.nc", [1.0, np.nan, 3.0])
    _write(tmp_path / "b/r/one.nc", [1.0, np.nan, 3.0], extra=True)  # attributes differ, y only in B
    assert compare_files(tmp_path / "a/r/one.nc", tmp_path / "b/r/one.nc") == ["y: only in B"]
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    _write(tmp_path / "b/r/one.nc", [1.0, np.nan, 3.0 + 1e-15])
    assert "x: max |A - B|" in compare_files(tmp_path / "a/r/one.nc", tmp_path / "b/r/one.nc")[0]
    assert main([str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--rtol", "1e-12"]) == 0
