"""The scheduling priorities of the rank-collapse jobs, as the rules set them and a dry run shows them."""

from __future__ import annotations

import re
import subprocess
import sys

from helpers import ROOT, copy_workflow


def test_rank_collapse_priorities_follow_the_models_cost_below_the_path_chains(default_config, tmp_path):
    """The rank-collapse jobs start with the costliest model (the measured order of their jobs' times: Qwen2.5-0.5B's
    0.6 B parameters, MPNet's two float64 weight sets, SmolLM2's 30 layers, Gemma-3 before the base-size encoders,
    MiniLM last), all in (0, 0.5] so that the path-effectiveness chains (priority >= 1) go first; a model made bigger
    moves forward. The dry run shows the rules' priorities: a pretrained acquisition adds 0.5."""
    import copy

    from san.experiments import check_config
    from san.rank_collapse.spec import model_priorities

    cfg = copy.deepcopy(default_config)
    check_config(cfg, ROOT / "workflow" / "schemas")
    prio = model_priorities(cfg)
    order = sorted(prio, key=prio.get, reverse=True)
    assert order[:4] == ["Qwen2.5-Coder-0.5B-Instruct", "all-mpnet-base-v2", "SmolLM2-135M-Instruct", "gemma-3-270m"]
    assert order[-1] == "all-MiniLM-L6-v2"
    assert all(0 < p <= 0.5 for p in prio.values())
    cfg["models"]["all-MiniLM-L6-v2"]["init"]["config"]["num_hidden_layers"] = 96
    assert max(model_priorities(cfg).items(), key=lambda kv: kv[1])[0] == "all-MiniLM-L6-v2"
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "2", "results/rank_collapse/gemma-3-270m.nc"],
        cwd=copy_workflow(tmp_path / "wf"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    jobs = {
        (m.group(1), m.group(2).strip()): float(m.group(3))
        for m in re.finditer(
            r"rule (\w+):\n(?:    .*\n)*?    wildcards: (.*)\n(?:    .*\n)*?    priority: ([0-9.]+)", out
        )
    }
    gemma = prio["gemma-3-270m"]
    assert jobs[("acquire_model", "model=gemma-3-270m, weights=pretrained")] == gemma + 0.5
    assert jobs[("acquire_model", "model=gemma-3-270m, weights=init")] == gemma
    assert jobs[("rank_collapse", "model=gemma-3-270m")] == gemma
