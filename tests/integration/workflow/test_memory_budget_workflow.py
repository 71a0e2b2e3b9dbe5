"""A memory budget in the config reaches exactly the jobs of its rule (or of its model), with the key that sets it
(named in the job's errors); a config without one gives every job the params it had."""

from __future__ import annotations

import copy

from helpers import copy_workflow, job_params, write_config


def test_a_memory_budget_reaches_the_jobs_of_its_rule_or_its_model_only(tmp_path, default_config):
    """``compute.<rule>.memory_budget_mb``: every job of that rule; ``models.<name>.memory_budget_mb``: every analysis
    job of that model (rank collapse, the context lengths, the quantisation control), in place of its rule's. Each
    with the key that sets it; no other job's params change."""
    workflow = copy_workflow(tmp_path / "wf")
    plain = job_params(workflow)
    config = copy.deepcopy(default_config)
    config["compute"]["rank_collapse"]["memory_budget_mb"] = 2048
    budgeted = job_params(workflow, write_config(workflow, config, "budget.yaml"))
    changed = {job.split("[")[0] for job in plain if budgeted[job] != plain[job]}
    # every torch rule has its own compute entry: the series analyses (rank_collapse_series) keep theirs
    assert changed == {"rank_collapse"}
    for job, params in budgeted.items():
        if job.startswith("rank_collapse["):
            text = " ".join(params)
            assert "'memory_budget_mb': 2048" in text and "'compute.rank_collapse.memory_budget_mb'" in text, job

    config = copy.deepcopy(default_config)
    model = "Qwen2.5-Coder-0.5B-Instruct"
    config["models"][model]["memory_budget_mb"] = 1500
    budgeted = job_params(workflow, write_config(workflow, config, "model.yaml"))
    changed = sorted(job for job in plain if budgeted[job] != plain[job])
    assert changed and all(f"'model': '{model}'" in job for job in changed), changed
    assert {job.split("[")[0] for job in changed} >= {"rank_collapse", "sink_context", "quantisation_drift"}
    for job in changed:
        text = " ".join(budgeted[job])
        assert "'memory_budget_mb': 1500" in text and f"'models.{model}.memory_budget_mb'" in text, job
