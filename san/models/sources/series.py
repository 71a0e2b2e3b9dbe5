"""A series of hub revisions as a source: the revisions an entry names (a list, a schedule or every branch the
repository lists: :func:`expand_revisions`), pinned once (:func:`pinned_revisions`: revision -> commit, in a file
the workflow reuses), a revision the repository lacks refused by name before anything is written
(:func:`pin_revisions`). A series whose checkpoints are repositories of their own (MultiBERTs, Sellam et al. 2022:
``google/multiberts-seed_<s>-step_<k>k``) names each revision's repository (``repos``: revision -> repository); each
is then that repository's ``main`` branch, pinned the same way. Each revision is acquired as a hub source at its
commit (:func:`san.models.store.acquire_series`), and revisions that serve identical weights are found by the sha256
of their weight files (:func:`weight_hashes`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from san.models.folders import AcquisitionError
from san.models.revisions import log_then_every, revision_name, step_of
from san.models.sources.hub import hub_errors


def _is_commit(revision: str) -> bool:
    """A full 40-character commit id (pins itself)."""
    return len(revision) == 40 and all(c in "0123456789abcdef" for c in revision)


def list_revisions(repo_id: str, key: str) -> dict[str, str]:
    """The branches and tags of hub repository ``repo_id`` and the commit each points to (huggingface_hub's
    ``list_repo_refs``); ``key`` is the config entry named in errors."""
    import huggingface_hub

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
