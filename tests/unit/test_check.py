"""``python -m san.check``: an overlay checked before Snakemake parses it (Snakemake names neither the file nor the line
of an overlay's YAML error): the file, line and column, a missing overlay in one line, the key it breaks, and the
shipped overlays passing."""

from __future__ import annotations

from san import check

from helpers import ROOT


def test_check_names_the_overlay_line_and_column_of_a_yaml_error(tmp_path, capsys):
    overlay = tmp_path / "my.yaml"
    overlay.write_text("rank_collapse:\n  models: [bert-base-cased\n  batch_size: 2\n")
    assert check.main([str(overlay), "--base", str(ROOT / "config.yaml")]) == 2
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and f"config file {overlay}, line 3, column" in out


def test_check_names_a_missing_overlay_in_one_line(tmp_path, capsys):
    missing = tmp_path / "missing.yaml"
    assert check.main([str(missing), "--base", str(ROOT / "config.yaml")]) == 2
    out = capsys.readouterr().out
    assert out == f"config error: config file {missing}: not found (an overlay given with --configfile must exist)\n"


def test_check_names_the_key_an_overlay_breaks(tmp_path, capsys):
    overlay = tmp_path / "my.yaml"
    overlay.write_text("rank_collapse:\n  models: [my-model]\n")
    assert check.main([str(overlay), "--base", str(ROOT / "config.yaml")]) == 2
    assert "config key 'rank_collapse.models.0': unknown model 'my-model'" in capsys.readouterr().out


def test_check_passes_the_shipped_overlays(capsys):
    for overlay in ("config/quick.yaml", "config/training.yaml"):
        assert check.main([str(ROOT / overlay), "--base", str(ROOT / "config.yaml")]) == 0
        assert capsys.readouterr().out.startswith("config OK: ")
