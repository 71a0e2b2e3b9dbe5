"""Incremental reruns: after a complete run, an edit reruns exactly the jobs it affects, read from ``snakemake -n``.

A minimal config of the whole workflow is built once (the session's tiny run, shared with the report tests) and its
rules listed once; each case copies that finished workspace (with its ``.snakemake`` metadata and file times), makes
one edit and reads the dry run's jobs and ``reason:`` lines:

* a config overlay (``--configfile``, the README's way to change settings) that restates a section's values in
  another key order: nothing to do, for every section of the config;
* an overlay that changes one key: the jobs that read it rerun because their params changed, then the jobs that read
  their results (figures, tables, the report summary) because their input was rebuilt; nothing else;
* a ``san`` library module: the rules whose scripts import it (their inputs, derived from the imports in
  workflow/rules/common.smk), then their consumers;
* a figure-only key (``figures``, ``circle.plot``): only figure rules.

(``snakemake --list-changes params`` lists every output in Snakemake 9.27, changed or not; hence the dry run.)

Every rule, config section, key and module the cases name must exist: a rename fails the first test (before the
build), naming what is missing, and never leaves a case that checks nothing.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from san.figures import FIGURES
from san.imports import library_inputs

from helpers import ROOT, TINY, reversed_keys, snakemake, tiny_config, write_config

# Rules that read the experiments' results for the report (summary, captions, and what reads the summary: the
# pretrained phenomena's table and its figure): a changed result may rerun them, a restyled figure must not (but the
# phenomena figure, which is a figure rule too, and the runtimes table, which reads the benchmark file of every job and
# so follows every rerun). Listed here so that the cases need not name them.
REPORT_RULES = frozenset({"wing_summary", "summary", "runtimes", "readme_tables", "phenomena_table", "phenomena"})
REPORT_RULES |= {"report_pages"}
FOLLOWS_EVERY_RERUN = frozenset({"runtimes"})
# Reruns because an input was rebuilt by another job (every other reason counts as a direct effect of the edit).
REBUILT_INPUT = "Input files updated by another job"


@dataclass(frozen=True)
class Job:
    rule: str
    wildcards: str
    reasons: tuple[str, ...]

    @property
    def direct(self) -> bool:
        return any(not reason.startswith(REBUILT_INPUT) for reason in self.reasons)


def dry_run(workdir: Path, *args: str) -> list[Job]:
    """Jobs of ``snakemake -n`` (rule ``all`` left out), with their wildcards and reasons."""
    out = snakemake(workdir, "-n", *args, timeout=300).stdout
    jobs: list[Job] = []
    rule = None
    fields: dict[str, str] = {}
    for line in [*out.splitlines(), ""]:
        head = re.match(r"^(?:local)?rule (\S+):$", line)
        if head or not line.startswith("    "):
            if rule is not None and rule != "all":
                reasons = tuple(r.strip() for r in fields.get("reason", "").split("; ") if r.strip())
                jobs.append(Job(rule, fields.get("wildcards", ""), reasons))
            rule, fields = (head.group(1) if head else None), {}
        elif rule is not None and ":" in line:
            key, value = line.strip().split(":", 1)
            fields[key] = value.strip()
    return jobs


def describe(jobs: list[Job]) -> str:
    return "\n".join(f"  {j.rule}[{j.wildcards}]: {'; '.join(j.reasons)}" for j in jobs) or "  (none)"


def workflow_rules(workdir: Path) -> set[str]:
    return {line.split()[0] for line in snakemake(workdir, "--list-rules", timeout=120).stdout.splitlines() if line}


@pytest.fixture(scope="module")
def built(tiny_run: Path) -> Path:
    """The workflow with the minimal config, run to completion once (the session's tiny run, shared with the report
    tests; every case edits a copy of it)."""
    assert dry_run(tiny_run) == [], "a finished run should leave nothing to do"
    return tiny_run


@pytest.fixture(scope="module")
def rules(built: Path) -> set[str]:
    """The rules of the built workflow, listed once (no edit of a case adds or removes a rule)."""
    return workflow_rules(built)


@pytest.fixture
def work(built: Path, tmp_path: Path) -> Path:
    """A fresh copy of the finished workspace (file times and .snakemake metadata kept)."""
    return Path(shutil.copytree(built, tmp_path / "wf", symlinks=True))


@dataclass(frozen=True)
class Case:
    """One edit and the rules it must rerun: ``direct`` for the edit itself, ``downstream`` as their consumers."""

    name: str
    direct: frozenset[str]
    downstream: frozenset[str] = frozenset()
    key: tuple[str, ...] = ()  # config key path (config cases)
    value: Any = None  # its new value
    wildcards: str = ""  # the wildcards every direct job has (the one job of a sweep, a model), when given
    module: str = ""  # san module (module cases)
    report: bool = True  # the report rules read the rebuilt results
    needs: frozenset[str] = field(default_factory=frozenset)  # rules the case names (each must exist)


def case(name: str, direct: set[str], downstream: set[str] = frozenset(), **kw: Any) -> Case:
    needs = kw.pop("needs", None) or (set(direct) | set(downstream))
    return Case(name, frozenset(direct), frozenset(downstream), needs=frozenset(needs), **kw)


CIRCLE_PLOTS = {"circle", "circle_distance", "circle_loss"}
RANK_PLOTS = {"rank_collapse_model", "rank_collapse_overview", "attention_products_model"}
PATHS_PLOTS = {"path_effectiveness", "path_length_distribution", "path_decomposition"}
FIGURE_RULES = CIRCLE_PLOTS | RANK_PLOTS | PATHS_PLOTS | {"theorem_bound", "propagation", "vision", "training_dynamics"}
FIGURE_RULES |= {"phenomena"}

CONFIG_CASES = [
    # the image encoders' spatial measure: their jobs and their figure, nothing of the text models
    case(
        "vision.high_frequency_cutoff",
        {"vision_model"},
        {"vision"},
        key=("vision", "high_frequency_cutoff"),
        value=0.3,
    ),
    # a model that no experiment analyses still counts among the path-length distribution's architectures
    case(
        "models.tiny-xlnet.init.config.n_layer",
        {"paths_counts"},
        {"path_length_distribution"},
        key=("models", "tiny-xlnet", "init", "config", "n_layer"),
        value=5,
    ),
    # the text: the corpus, then every model's token ids and every experiment that reads them
    case(
        "text.seed",
        {"corpus"},
        {"tokenize_inputs", "rank_collapse", "attention_products", "theorem_sweep", "propagation_sweep"}
        | RANK_PLOTS
        | {"theorem_bound", "propagation", "rank_collapse_series", "training_dynamics"},
        key=("text", "seed"),
        value=1,
    ),
    # the training experiments: one job per seed / task, then the gather, tables and figures reading them
    case(
        "circle.train.epochs",
        {"circle_train"},
        {"circle_gather", "circle_table", *CIRCLE_PLOTS},
        key=("circle", "train", "epochs"),
        value=3,
    ),
    case(
        "paths.sorting.train.epochs",
        {"paths_train"},
        {"paths_evaluate", "paths_decompose", "paths_table", "path_effectiveness", "path_decomposition"},
        key=("paths", "sorting", "train", "epochs"),
        value=3,
    ),
    case(
        "paths.evaluation.n_repeats",
        {"paths_evaluate"},
        {"paths_table", "path_effectiveness", "path_decomposition"},
        key=("paths", "evaluation", "n_repeats"),
        value=3,
    ),
    # the offline training series is analysed with the rank-collapse settings too
    case(
        "rank_collapse.dtype",
        {"rank_collapse", "rank_collapse_series"},
        {"rank_collapse_model", "rank_collapse_overview", "training_dynamics"},
        key=("rank_collapse", "dtype"),
        value="float32",
    ),
    # a claim threshold: only its wing's summary rechecks its claims (its verdict may flip; see the claims tests)
    case(
        "report.theorem.log10_gamma_max",
        {"wing_summary"},
        key=("report", "theorem", "log10_gamma_max"),
        value=-1.0,
        wildcards="wing=theory",
    ),
    case(
        "attention_products.n_paths",
        {"attention_products"},
        {"attention_products_model"},
        key=("attention_products", "n_paths"),
        value=6,
    ),
    case(
        "theory.residual_iterations",
        {"theorem_sweep"},
        {"theorem_bound"},
        key=("theory", "residual_iterations"),
        value=11,
    ),
    # one sweep's key: that sweep's job only, then the figure job of all sweeps
    case(
        "propagation.sweeps.qk_variance.depth",
        {"propagation_sweep"},
        {"propagation"},
        key=("propagation", "sweeps", "qk_variance", "depth"),
        value=4,
        wildcards="sweep=qk_variance",
    ),
]
MODULE_CASES = [
    case(
        "san/measures/residual.py",
        {"rank_collapse", "attention_products", "propagation_sweep", "rank_collapse_series", "vision_inputs"},
        RANK_PLOTS | {"propagation", "vision_model", "vision", "training_dynamics"},
        module="measures/residual",
    ),
    case(
        "san/circle/experiment.py",
        {"circle_train"},
        {"circle_gather", "circle_table", *CIRCLE_PLOTS},
        module="circle/experiment",
    ),
    case(
        "san/paths/training.py",
        {"paths_train"},
        {"paths_evaluate", "paths_decompose", "paths_table", "path_effectiveness", "path_decomposition"},
        module="paths/training",
    ),
    case("san/core/plotting.py", FIGURE_RULES | {"report_pages"}, module="core/plotting", report=False),
]
FIGURE_CASES = [
    case("figures.dpi", FIGURE_RULES, key=("figures", "dpi"), value=41, report=False),
    case("circle.plot.axis_limit", {"circle"}, key=("circle", "plot", "axis_limit"), value=0.5, report=False),
]


def set_key(config: dict, key: tuple[str, ...], value: Any) -> None:
    section = config
    for part in key[:-1]:
        section = section[part]
    assert section[key[-1]] != value, f"{'.'.join(key)} is already {value!r}"
    section[key[-1]] = value


def check(work: Path, rules: set[str], c: Case, *args: str) -> list[Job]:
    """The dry run of ``work`` (with ``args``) reruns exactly ``c.direct`` for the edit, then ``c.downstream``
    (+ report rules); every rule the case names is one of the workflow's ``rules``."""
    missing = c.needs - rules
    assert not missing, f"{c.name} names rules {sorted(missing)} that the workflow does not define (renamed?)"
    jobs = dry_run(work, *args)
    direct = {j.rule for j in jobs if j.direct}
    downstream = {j.rule for j in jobs if not j.direct}
    listing = describe(jobs)
    print(f"{c.name}: dry run\n{listing}")
    assert direct == c.direct, f"jobs rerun by the edit of {c.name}:\n{listing}"
    assert downstream - REPORT_RULES == set(c.downstream), f"jobs rerun downstream of {c.name}:\n{listing}"
    # the report rules may read the rebuilt results; a figure-only edit must not reach them
    reached = downstream & (REPORT_RULES - FOLLOWS_EVERY_RERUN)
    assert c.report or not reached, f"{c.name} reruns report rules:\n{listing}"
    assert all(c.wildcards in j.wildcards for j in jobs if j.direct), f"{c.name} reruns other jobs:\n{listing}"
    return jobs


# every section of config.yaml that holds settings (the top-level device is a single value)
SECTIONS = ("text", "models", "rank_collapse", "attention_products", "theory", "propagation", "report", "figures")
SECTIONS += ("circle", "paths", "compute", "vision", "series", "phenomena")


def overlay(work: Path, section: str, key: tuple[str, ...] = (), value: Any = None) -> list[str]:
    """Write an overlay of the copy's config.yaml that restates ``section`` with every mapping's keys in reverse
    order (and ``key`` set to ``value`` when given); the arguments that lay it over config.yaml."""
    config = yaml.safe_load((work / "config.yaml").read_text())
    assert section in config, f"config.yaml has no section {section!r} (renamed?)"
    restated = {section: reversed_keys(config[section])}
    if key:
        set_key(restated, key, value)
    write_config(work, restated, "overlay.yaml")
    return ["--configfile", "overlay.yaml"]


def resolves(config: dict, key: tuple[str, ...]) -> bool:
    node: Any = config
    for part in key:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_name_the_cases_use_exists(workflow_copy: Path, default_config: dict) -> None:
    """Before the workflow is built: every rule, config section, key and module the cases name exists (a rename
    fails here, naming what is missing, rather than leaving a case that checks nothing)."""
    rules = workflow_rules(workflow_copy)
    cases = [*CONFIG_CASES, *MODULE_CASES, *FIGURE_CASES]
    named = set(REPORT_RULES) | FIGURE_RULES | {r for c in cases for r in c.needs | c.direct | c.downstream}
    problems = [f"rule {r}" for r in sorted(named - rules)]
    config = tiny_config(default_config)
    problems += [f"config.yaml section {s}" for s in SECTIONS if not isinstance(default_config.get(s), dict)]
    problems += [f"config key {'.'.join(c.key)}" for c in cases if c.key and not resolves(config, c.key)]
    problems += [
        f"module san/{c.module}.py" for c in cases if c.module and not (ROOT / "san" / f"{c.module}.py").is_file()
    ]
    assert not problems, "the incremental cases name what does not exist:\n  " + "\n  ".join(problems)


def test_overlay_sections_are_every_section(built: Path) -> None:
    sections = [k for k, v in yaml.safe_load((built / "config.yaml").read_text()).items() if isinstance(v, dict)]
    assert set(sections) == set(SECTIONS)


def test_overlay_restating_every_section_in_another_order_reruns_nothing(work: Path) -> None:
    """One overlay restating every section with each mapping's keys reversed (one dry run for all: a section whose
    order mattered shows by its jobs' reasons, which name the params that differ)."""
    config = yaml.safe_load((work / "config.yaml").read_text())
    write_config(work, {section: reversed_keys(config[section]) for section in SECTIONS}, "overlay.yaml")
    jobs = dry_run(work, "--configfile", "overlay.yaml")
    assert jobs == [], f"an overlay restating every section in reverse key order reruns:\n{describe(jobs)}"


@pytest.mark.parametrize("c", CONFIG_CASES, ids=lambda c: c.name)
def test_overlay_changing_one_key_reruns_its_jobs(work: Path, rules: set[str], c: Case) -> None:
    jobs = check(work, rules, c, *overlay(work, c.key[0], c.key, c.value))
    assert all(any("Params have changed" in r for r in j.reasons) for j in jobs if j.direct), describe(jobs)


@pytest.mark.parametrize("c", MODULE_CASES, ids=lambda c: c.name)
def test_module_edit_reruns_its_rules(work: Path, rules: set[str], c: Case) -> None:
    path = work / "san" / f"{c.module}.py"
    assert path.is_file(), f"{c.name}: no module san/{c.module}.py (renamed?)"
    path.write_text(path.read_text() + "\n# edited by test_incremental\n")
    check(work, rules, c)


@pytest.mark.parametrize("c", FIGURE_CASES, ids=lambda c: c.name)
def test_figure_edit_reruns_only_figures(work: Path, rules: set[str], c: Case) -> None:
    """A figure-only key, edited in config.yaml itself (the overlays above change the other keys)."""
    config = yaml.safe_load((work / "config.yaml").read_text())
    set_key(config, c.key, c.value)
    write_config(work, config)
    check(work, rules, c)


# --- every rule's library inputs are its script's imports (san.imports, added in workflow/rules/common.smk) -------


#: a rule's first line: ``rule NAME:``, or ``use rule BASE as NAME with:`` (a rule of its base's job shape and script)
RULE = re.compile(r"^(?:rule (\w+)|use rule (\w+) as (\w+) with):\n", re.M)


def rule_scripts(workdir: Path) -> dict[str, tuple[Path, list[str]]]:
    """The script of every rule that has one (a rule derived from another runs its base's), from
    workflow/rules/*.smk, with the experiment whose ``run`` the script calls when the rule names one
    (``params.experiment``) and the draw modules of the registered figures it reports (``figure_report``)."""
    blocks: dict[str, tuple[Path, str]] = {}
    bases: dict[str, str] = {}
    for smk in sorted((workdir / "workflow" / "rules").glob("*.smk")):
        text = smk.read_text()
        found = list(RULE.finditer(text))
        for i, m in enumerate(found):
            name = m.group(1) or m.group(3)
            blocks[name] = (smk, text[m.end() : found[i + 1].start() if i + 1 < len(found) else len(text)])
            if m.group(2):
                bases[name] = m.group(2)
    scripts = {}
    for name, (_, block) in blocks.items():
        smk, base = blocks[bases.get(name, name)]
        found = re.search(r"^\s+script:\s*\n\s+[rf]?\"([^\"]+)\"", base, flags=re.M)
        if found:
            runs = re.findall(r"^\s+experiment=\"(san[\w.]+)\"", block, flags=re.M)
            # the figure script draws each figure its rule reports with the registry's draw function, by name
            # (a name built in an f-string, f"propagation_{s}", stands for every registered name it can build)
            for named in re.findall(r"figure_report\(\s*f?\"([\w{}]+)\"", block):
                pattern = re.compile(re.sub(r"\{\w+\}", r"\\w+", named) + "$")
                runs += sorted({FIGURES[n].draw.split(":")[0] for n in FIGURES if pattern.match(n)})
            scripts[name] = ((smk.parent / found.group(1)).resolve(), runs)
    return scripts


def test_every_rule_has_its_scripts_imports_as_inputs(workflow_copy: Path) -> None:
    """The inputs of every job that runs a script in a dry run of the default config (every rule scheduled) hold
    exactly the ``san`` modules that the script imports (directly or not, with their packages; san.imports), and
    those of the experiment its rule names, so a rule defined anywhere gets them."""
    out = snakemake(workflow_copy, "-n", "-F", timeout=300).stdout
    declared: dict[str, set[str]] = {}
    rule = None
    for line in out.splitlines():
        head = re.match(r"^(?:local)?rule (\S+):$", line)
        if head:
            rule = head.group(1)
        elif rule and line.strip().startswith("input:"):
            declared.setdefault(rule, set()).update(re.findall(r"(?:^|[\s,])(san/[\w/.-]+)", line))
    scripts = rule_scripts(workflow_copy)
    # a hub checkpoint series' rules run only for `series.hub_models` (tests/integration/test_hub_series_workflow.py)
    # one model's report runs only for the target model_report (tests/integration/test_model_report.py)
    unscheduled = {"rank_collapse_hub_series", "training_dynamics_model", "model_page", "model_verdicts"}
    assert set(scripts) - unscheduled <= set(declared), "every rule with a script is scheduled"
    package = workflow_copy / "san"
    problems = []
    assert scripts["vision_model"] == (scripts["rank_collapse"][0], ["san.rank_collapse.vision.experiment"])
    for name, (script, runs) in sorted(scripts.items()):
        expected = {p.relative_to(workflow_copy).as_posix() for p in library_inputs(script, package, runs)}
        if name in declared and declared[name] != expected:
            problems.append(f"rule {name}: inputs {sorted(declared[name] ^ expected)} differ from its imports")
    assert not problems, "\n".join(problems)


def test_tiny_config_shrinks_every_section(default_config: dict) -> None:
    """The tiny config shrinks every experiment section (a new section needs an entry in tests/config/tiny.yaml)."""
    known = set(yaml.safe_load(TINY.read_text())) | {"torch_env", "model"}  # scalars, not experiment sections
    new = set(default_config) - known
    assert not new, f"config sections {sorted(new)} are not shrunk by tests/config/tiny.yaml"
