"""Result files: written whole (renamed from `<name>.part`), with the umask's mode, and no part file left behind."""

import os
import stat

import numpy as np
import pytest
import xarray as xr

import san.core.storage as storage
from san.core.storage import (
    Variable,
    describe,
    part_path,
    read_netcdf,
    read_structured_attr,
    structured_attr,
    write_netcdf,
)


def _dataset() -> xr.Dataset:
    return xr.Dataset({"x": ("i", np.arange(3.0), {"long_name": "x", "units": "1"})})


@pytest.fixture
def umask():
    """Run with a known umask (restored afterwards)."""
    old = os.umask(0o027)
    yield 0o027
    os.umask(old)


def test_result_gets_the_umask_mode_and_no_part_file(tmp_path, umask):
    path = write_netcdf(_dataset(), tmp_path / "r.nc", {"a": 1}, seed=3)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # as open() would create it, not mkstemp's 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc"]
    ds = read_netcdf(path)
    np.testing.assert_array_equal(ds["x"].values, [0.0, 1.0, 2.0])


def test_part_file_is_named_after_its_target_and_replaced_by_a_rerun(tmp_path):
    target = tmp_path / "r.nc"
    assert part_path(target) == tmp_path / "r.nc.part"
    part_path(target).write_bytes(b"half a file from a killed job")
    write_netcdf(_dataset(), target, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc"]


def test_failed_write_removes_its_part_file_and_keeps_the_old_result(tmp_path, monkeypatch):
    target = tmp_path / "r.nc"
    write_netcdf(_dataset(), target, {})
    before = target.read_bytes()

    def crash(self, path, **kwargs):
        with open(path, "wb") as fh:
            fh.write(b"partial")
        raise KeyboardInterrupt  # an interrupted job (BaseException, not just Exception)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", crash)
    with pytest.raises(KeyboardInterrupt):
        write_netcdf(_dataset(), target, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.nc"]
    assert target.read_bytes() == before
    assert storage.part_path(target).exists() is False


def test_strings_are_stored_as_character_arrays(tmp_path):
    """CF-1.8 has no variable-length strings: string variables and coordinates go to disk as char arrays and read
    back as the same strings."""
    import netCDF4

    ds = xr.Dataset({"x": (("v",), [1.0, 2.0]), "src": (("v",), ["paper", "config model"])}, coords={"v": ["a", "bc"]})
    describe(ds, {"x": Variable("x", "1"), "src": Variable("source", "1"), "v": Variable("label", "1")})
    path = write_netcdf(ds, tmp_path / "s.nc", {})
    with netCDF4.Dataset(path) as raw:
        assert raw["v"].dtype == np.dtype("S1") and raw["src"].dtype == np.dtype("S1")
    back = read_netcdf(path)
    assert list(back["v"].values) == ["a", "bc"] and list(back["src"].values) == ["paper", "config model"]
    assert float(back.sel(v="bc")["x"]) == 2.0


def test_structured_attributes_round_trip_as_json(tmp_path):
    """A mapping attribute is stored as a JSON string and read back equal (bools, None, nested mappings)."""
    value = {"residual": "skip", "mlp": False, "beta": 0.5, "window": None, "table": {"pure": {"skip": 0.0}}}
    ds = _dataset().assign_attrs(fixed=structured_attr(value))
    back = read_netcdf(write_netcdf(ds, tmp_path / "r.nc", {}))
    assert (
        back.attrs["fixed"]
        == '{"residual": "skip", "mlp": false, "beta": 0.5, "window": null, "table": {"pure": {"skip": 0.0}}}'
    )
    assert read_structured_attr(back, "fixed") == value


@pytest.mark.parametrize("drop", [("x", "long_name"), ("x", "units"), ("i", "long_name")])
def test_a_variable_or_coordinate_without_its_labels_is_refused_and_nothing_written(tmp_path, drop):
    """write_netcdf refuses a dataset with a variable or coordinate lacking long_name or units (or with an empty
    one), naming it, before any file appears."""
    ds = _dataset().assign_coords(i=("i", [0, 1, 2], {"long_name": "index", "units": "1"}))
    name, key = drop
    del ds[name].attrs[key]
    with pytest.raises(ValueError, match=rf"r\.nc: variables without their CF labels \({name}: {key}\)"):
        write_netcdf(ds, tmp_path / "r.nc", {})
    ds[name].attrs[key] = " "
    with pytest.raises(ValueError, match=rf"\({name}: {key}\)"):
        write_netcdf(ds, tmp_path / "r.nc", {})
    assert list(tmp_path.iterdir()) == []
