"""The workflow's layout promises: one name per thing, documented rules, one resources table (the torch-free parse:
tests/integration/workflow/test_torch_free.py)."""

from __future__ import annotations

import re

import yaml

from helpers import ROOT

RULES = sorted((ROOT / "workflow" / "rules").glob("*.smk"))
#: a rule's first line: ``rule NAME:``, or ``use rule BASE as NAME with:`` (a rule of its base's job shape)
RULE = re.compile(r"^(?:rule (\w+)|use rule (\w+) as (\w+) with):\n", re.M)


def _rule_texts() -> list[tuple[str, str | None, str]]:
    """Every rule of the rules files: its name, the rule it is derived from (None for its own), its text."""
    out = []
    for path in RULES:
        text = path.read_text()
        found = list(RULE.finditer(text))
        for i, m in enumerate(found):
            nxt = found[i + 1] if i + 1 < len(found) else None
            out.append((m.group(1) or m.group(3), m.group(2), text[m.end() : nxt.start() if nxt else len(text)]))
    return out


def rule_blocks() -> dict[str, str]:
    """Each rule's text, by name, from the rules files."""
    return {name: text for name, _, text in _rule_texts()}


def derived_rules() -> dict[str, str]:
    """The rules written as another rule's job shape (``use rule BASE as NAME with:``): name -> base."""
    return {name: base for name, base, _ in _rule_texts() if base is not None}


def target_rules(blocks: dict[str, str]) -> set[str]:
    """Rules that only request results (docstring "Target: ..."), and the default target."""
    return {name for name, text in blocks.items() if '"""Target:' in text.split("\n\n\n")[0]} | {"all"}


def test_rule_script_log_and_benchmark_share_the_rule_name():
    """A rule's script, log and benchmark share its name; a rule derived from another's job shape runs that rule's
    script and keeps its own log and benchmark; a figure rule runs the one figure script (scripts/figure.py, which
    draws each figure from the figure registry, san.figures)."""
    blocks = rule_blocks()
    assert derived_rules() == {"vision_model": "rank_collapse", "vision_quantisation_drift": "quantisation_drift"}
    assert {"fig2", "fig3", "fig4", "theorem"} <= target_rules(blocks)
    for name, text in blocks.items():
        body = text.split("\n\n\n")[0]
        assert re.match(r'\s+"""\S', body), f"rule {name} has no docstring"
        if name in target_rules(blocks):
            continue
        # a rule derived from another runs its base's script (the one job shape, e.g. vision_model: rank_collapse)
        base = derived_rules().get(name, name)
        script = re.search(r'"\.\./\.\./scripts/(\w+)\.py"', blocks[base].split("\n\n\n")[0])
        expected = "figure" if figure_stems(body) else base
        assert script and script.group(1) == expected, f"rule {name} runs {script and script.group(1)}"
        assert re.search(rf'"logs/{name}[/.]', body), f"rule {name}: log not under logs/{name}"
        assert re.search(rf"benchmarks/{name}[/.]", body), f"rule {name}: benchmark not under benchmarks/{name}"


def figure_stems(body: str) -> list[str]:
    """The literal start of every figure a rule writes (``results/figures/<stem>.<ext>``), up to its first
    wildcard or formatted part: ``figures("circle")`` gives ``circle``, ``figures(f"propagation_{s}")`` gives
    ``propagation_``."""
    outputs = body.split("    output:", 1)[1].split("\n    log:", 1)[0] if "    output:" in body else ""
    stems = re.findall(r'figures\(f?"([^"{]*)', outputs)
    stems += re.findall(r'figure_report\(\s*f?"([^"{]*)', outputs)
    stems += re.findall(r"/figures/([^\"{]*)", outputs)
    return stems


def test_figure_stems_are_read_from_the_outputs():
    body = '    """Doc."""\n    output:\n        a=figures("circle"),\n        b=figures(f"propagation_{s}"),\n'
    body += '        c=expand(f"{RESULTS}/figures/rank_collapse_model_{{{{model}}}}.{{ext}}"),\n'
    body += '        d=figure_report(f"propagation_{s}", labels={"sweep": s}),\n    log:\n'
    assert figure_stems(body) == ["circle", "propagation_", "propagation_", "rank_collapse_model_"]


def test_every_figure_is_named_after_the_rule_that_writes_it():
    """A figure's file is ``<rule>.<ext>``, or ``<rule>_<part>.<ext>`` for a rule that writes several (one per
    model, sweep or scale); its report caption ``workflow/report/<figure>.rst`` shares the name, and no rule with a
    longer name would claim it."""
    blocks = rule_blocks()
    writers = {name: figure_stems(text.split("\n\n\n")[0]) for name, text in blocks.items()}
    assert {"circle", "path_effectiveness", "path_length_distribution", "theorem_bound"} <= {
        name for name, stems in writers.items() if stems
    }
    for name, stems in writers.items():
        for stem in stems:
            assert stem == name or stem.startswith(f"{name}_"), f"rule {name} writes figure {stem}*"
            claims = [other for other in blocks if stem == other or stem.startswith(f"{other}_")]
            assert max(claims, key=len) == name, f"figure {stem}* reads as rule {max(claims, key=len)}'s"
        captions = re.findall(r'caption=caption\(f?"([^"{]*)', blocks[name].split("\n\n\n")[0])
        for cap in captions if stems else []:
            assert cap == name or cap.startswith(f"{name}_"), f"rule {name}: caption {cap}"
            assert list((ROOT / "workflow" / "report").glob(f"{cap}*.rst")), f"no caption template {cap}*.rst"


def test_resources_table_lists_exactly_the_rules():
    table = yaml.safe_load((ROOT / "workflow" / "resources.yaml").read_text())
    blocks = rule_blocks()
    jobs = set(blocks) - target_rules(blocks)
    assert set(table) == jobs, f"missing: {sorted(jobs - set(table))}, stale: {sorted(set(table) - jobs)}"
    for rule, res in table.items():
        assert set(res) == {"mem_mb", "disk_mb", "runtime"} and all(v > 0 for v in res.values()), rule


def test_costliest_path_chains_are_scheduled_first(default_config):
    """The priorities follow the tasks' arithmetic, in the order of their measured training times."""
    import copy

    from san.experiments import check_config
    from san.paths.spec import priorities

    cfg = copy.deepcopy(default_config)
    slices = check_config(cfg, ROOT / "workflow" / "schemas")["paths"]
    ev = cfg["paths"]["evaluation"]
    prio = priorities(slices, ev["n_paths"], ev["n_repeats"])
    assert sorted(prio, key=prio.get) == ["sorting", "sorting_10k", "convex_hull", "memorization"]
    cfg["paths"]["sorting"]["data"]["n_train"] = 10**6  # a bigger task moves forward
    slices = check_config(cfg, ROOT / "workflow" / "schemas")["paths"]
    assert max(priorities(slices, ev["n_paths"], ev["n_repeats"]).items(), key=lambda kv: kv[1])[0] == "sorting"
