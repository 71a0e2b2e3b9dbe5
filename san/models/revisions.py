"""Checkpoint schedules and revision names of a training series (torch-free).

Pythia (Biderman et al. 2023) saves step 0 (the initialisation), the log-spaced steps 1, 2, 4, ..., 512, then every
1000 steps up to 143000: 154 revisions named ``step<n>``. :func:`log_then_every` builds such a schedule for any
sizes, so a config names a series by three numbers instead of 154 names; :func:`step_of` and :func:`tokens_of` read
the training step and the tokens seen from a revision's name (Pythia's ``step1000``, OLMo's
``stage1-step1000-tokens5B``).

A series of hub revisions (:func:`expand_revisions`: a list, a schedule or every branch the repository lists) is pinned
once (:func:`pinned_revisions`: revision -> commit, in a file the workflow reuses), a revision the repository lacks is
refused by name before anything is written (:func:`pin_revisions`), and revisions that serve identical weights are
found by the sha256 of their weight files (:func:`acquire_series`). A series whose checkpoints are repositories of
their own (MultiBERTs, Sellam et al. 2022: ``google/multiberts-seed_<s>-step_<k>k``) names each revision's repository
(``repos``: revision -> repository); each is then that repository's ``main`` branch, pinned and acquired the same way.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from san.models.folders import AcquisitionError

_STEP = re.compile(r"(?:^|[-_])step(\d+)(?:$|[-_])")
_TOKENS = re.compile(r"(?:^|[-_])tokens(\d+)([KMBT]?)(?:$|[-_])")
_SCALE = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def log_then_every(last: int, every: int, log_until: int | None = None) -> list[int]:
    """Step 0, the powers of two up to ``log_until`` (default: the largest one below ``every``), then every
    ``every`` steps up to ``last`` (always included): Pythia's schedule is ``log_then_every(143000, 1000, 512)``."""
    if last < 0 or every < 1:
        raise ValueError(f"a schedule needs last >= 0 and every >= 1 (got last={last}, every={every})")
    top = every - 1 if log_until is None else log_until
    steps = {0}
    power = 1
    while power <= min(top, last):
        steps.add(power)
        power *= 2
    steps.update(range(every, last + 1, every))
    steps.add(last)
    return sorted(steps)


def revision_name(step: int) -> str:
    """The name of the revision saved at ``step`` (Pythia's branch names: ``step<n>``)."""
    return f"step{int(step)}"


def step_of(revision: str) -> int | None:
    """The training step a revision's name states (``step143000``, ``stage1-step1000-tokens5B``), None otherwise."""
    found = _STEP.search(revision)
    return int(found.group(1)) if found else None


def tokens_of(revision: str) -> int | None:
    """The tokens seen that a revision's name states (OLMo's ``...-tokens5B``: 5e9), None otherwise."""
    found = _TOKENS.search(revision)
    return int(found.group(1)) * _SCALE[found.group(2)] if found else None


def _is_commit(revision: str) -> bool:
    """A full 40-character commit id (pins itself)."""
    return len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)


def list_revisions(repo_id: str, key: str) -> dict[str, str]:
    """The branches and tags of hub repository ``repo_id`` and the commit each points to (huggingface_hub's
    ``list_repo_refs``); ``key`` is the config entry named in errors."""
    import huggingface_hub

    from san.models.hub import hub_errors

    with hub_errors(repo_id, "refs", key):
        refs = huggingface_hub.HfApi().list_repo_refs(repo_id)
    return {ref.name: ref.target_commit for ref in [*refs.branches, *refs.tags]}


def expand_revisions(spec: Any, repo_id: str, key: str) -> list[str]:
    """The revision names of a series entry: a list of names as given; ``{"schedule": {last, every, log_until}}``:
    :func:`log_then_every`'s steps as ``step<n>``; ``"all"``: every branch and tag the repository lists, ordered by
    the step their names state (names without one last, alphabetically)."""
    if isinstance(spec, list | tuple):
        return [str(r) for r in spec]
    if isinstance(spec, dict) and "schedule" in spec:
        s = spec["schedule"]
        return [revision_name(n) for n in log_then_every(s["last"], s["every"], s.get("log_until"))]
    if spec == "all":
        names = list(list_revisions(repo_id, key))
        return sorted(names, key=lambda n: (step_of(n) is None, step_of(n) or 0, n))
    raise ValueError(f"{key}: revisions must be a list of names, {{schedule: {{last, every}}}} or 'all'; got {spec!r}")


#: the branch of a series revision that is a repository of its own (``repos``)
REPO_BRANCH = "main"


def pin_revisions(repo_id: str, revisions: list[str], key: str, repos: dict[str, str] | None = None) -> dict[str, str]:
    """Each of ``revisions`` (a branch, a tag or a commit id) and the commit it resolves to now; a revision that the
    repository does not have is refused, all of them named, before anything is downloaded or written. With
    ``repos`` (revision -> repository) each revision is the :data:`REPO_BRANCH` of its own repository (a missing
    repository is refused by the hub's error, naming it)."""
    if repos:
        commits = {}
        for revision in revisions:
            refs = list_revisions(repos[revision], f"{key}.repos.{revision}")
            if REPO_BRANCH not in refs:
                raise AcquisitionError(f"{key}.repos.{revision}: hub {repos[revision]} has no branch {REPO_BRANCH!r}")
            commits[revision] = refs[REPO_BRANCH]
        return commits
    refs = list_revisions(repo_id, key)
    missing = [r for r in revisions if r not in refs and not _is_commit(r)]
    if missing:
        raise AcquisitionError(
            f"{key}: hub {repo_id} has no revision(s) {missing} (it has {len(refs)} branches and tags, e.g. "
            f"{sorted(refs)[:5]}); check the names or the schedule"
        )
    return {r: refs.get(r, r) for r in revisions}


def pinned_revisions(
    path: str | Path, repo_id: str, revisions: list[str], key: str, repos: dict[str, str] | None = None
) -> dict[str, str]:
    """The pins of a series (revision -> commit), written to ``path`` the first time and read from it afterwards, so
    that a rerun never changes silently when a branch moves: a pins file of another repository, other revisions or
    other repositories of the revisions (``repos``) is refused, naming it (delete it to pin again)."""
    path = Path(path)
    repos = {r: repos[r] for r in revisions} if repos else {}
    if path.is_file():
        pinned = json.loads(path.read_text())
        if (
            pinned.get("repo_id") != repo_id
            or list(pinned.get("commits", {})) != list(revisions)
            or pinned.get("repos", {}) != repos
        ):
            raise AcquisitionError(
                f"{path} pins {pinned.get('repo_id')} at {list(pinned.get('commits', {}))}, but {key} asks for "
                f"{repo_id} at {list(revisions)}: delete {path} to pin the series again"
            )
        return dict(pinned["commits"])
    commits = pin_revisions(repo_id, revisions, key, repos)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_text(
        json.dumps({"repo_id": repo_id, "commits": commits, **({"repos": repos} if repos else {})}, indent=2)
    )
    part.replace(path)
    return commits


def weight_hashes(manifest: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The sha256 of a model folder's weight files (``*.safetensors``), as its manifest records them."""
    return tuple(sorted((n, h) for n, h in manifest.get("sha256", {}).items() if n.endswith(".safetensors")))


def drop_cached(commit: str) -> None:
    """Remove the snapshot of ``commit`` from the huggingface_hub cache (its blobs that no other snapshot links):
    a series that keeps no revision keeps no download of it either (huggingface_hub's ``scan_cache_dir``)."""
    import huggingface_hub

    huggingface_hub.scan_cache_dir().delete_revisions(commit).execute()


def acquire_series(
    name: str,
    family: str | None,
    source: dict[str, Any],
    out_root: str | Path,
    key: str,
    analyse: Callable[[str, Path], None] | None = None,
    keep: bool = True,
) -> dict[str, Any]:
    """Acquire every revision of the hub entry ``source`` (``repo_id``, ``revisions``: :func:`expand_revisions`)
    into ``out_root/<revision>``, one after the other, each a verified model folder
    (:func:`san.models.acquire.materialise` at its pinned commit), and hand each to ``analyse``; without ``keep`` a
    revision's folder and its download in the huggingface_hub cache (:func:`drop_cached`) are removed once it is
    analysed, so at most one revision is on disk at a time. The pins are written
    to ``out_root/pins.json`` first and reused by a rerun; a missing revision is refused before anything is
    downloaded. A revision whose commit or weights (the sha256 of its weight files, e.g. the 86 of pythia-2.8b's 154
    branches that serve its final weights) equal an earlier revision's is a duplicate: analysed once, not kept, and
    recorded. With ``repos`` each revision is the ``main`` branch of its own repository (module docstring). The
    series record, also written to ``out_root/series.json``: the repository, the revisions, their commits, the
    duplicates (revision -> the first revision with its weights), the manifests, the folders kept and, with
    ``repos``, each revision's repository."""
    from san.models.acquire import materialise

    root = Path(out_root)
    revisions = expand_revisions(source["revisions"], source["repo_id"], key)
    repos = source.get("repos") or {}
    missing = [r for r in revisions if repos and r not in repos]
    if missing:
        raise AcquisitionError(f"{key}.repos: no repository for revision(s) {missing}")
    commits = pinned_revisions(root / "pins.json", source["repo_id"], revisions, key, repos)
    drop = ("revisions", "keep_revisions", "revision", "commit", "sha256", "repos")
    base = {k: v for k, v in source.items() if k not in drop}
    manifests: dict[str, dict[str, Any]] = {}
    same: dict[str, str] = {}
    by_commit: dict[str, str] = {}
    by_weights: dict[tuple[tuple[str, str], ...], str] = {}
    for revision in revisions:
        if commits[revision] in by_commit:  # the same commit: the same files, nothing to download
            same[revision] = by_commit[commits[revision]]
            continue
        by_commit[commits[revision]] = revision
        folder = root / revision
        where = {"repo_id": repos[revision], "revision": REPO_BRANCH} if repos else {"revision": revision}
        entry = {**base, **where, "commit": commits[revision]}
        manifest = materialise(name, family, "pretrained", entry, folder)
        hashes = weight_hashes(manifest)
        if hashes in by_weights:
            same[revision] = by_weights[hashes]
            _remove(folder, commits[revision], keep, duplicate=True)
            continue
        by_weights[hashes] = revision
        manifests[revision] = manifest
        if analyse is not None:
            analyse(revision, folder)
        _remove(folder, commits[revision], keep)
    return _write_record(root, source["repo_id"], revisions, commits, same, manifests, repos)


def _remove(folder: Path, commit: str, keep: bool, duplicate: bool = False) -> None:
    """Remove a revision's folder (always for a duplicate, else unless the entry keeps its revisions) and, unless
    kept, its download in the huggingface_hub cache (:func:`drop_cached`)."""
    if duplicate or not keep:
        shutil.rmtree(folder)
    if not keep:
        drop_cached(commit)


def _write_record(
    root: Path,
    repo_id: str,
    revisions: list[str],
    commits: dict[str, str],
    same: dict[str, str],
    manifests: dict[str, dict[str, Any]],
    repos: dict[str, str],
) -> dict[str, Any]:
    """The series record of :func:`acquire_series`, written to ``root/series.json``."""
    record = {
        "repo_id": repo_id,
        "revisions": revisions,
        "commits": commits,
        "duplicates": {r: same[r] for r in revisions if r in same},
        "manifests": manifests,
        "folders": {r: str(root / r) for r in manifests if (root / r).is_dir()},
        **({"repos": {r: repos[r] for r in revisions}} if repos else {}),
    }
    (root / "series.json").write_text(json.dumps(record, indent=2))
    return record
