"""A local server speaking the subset of the Hugging Face hub's HTTP protocol that huggingface_hub and ``datasets``
use, serving repositories built from files on disk; the real clients are pointed at it with ``HF_ENDPOINT``.

Served (as the hub does it):

- ``GET /api/{models,datasets}/<repo>[/revision/<rev>]``: the repository's info at a revision (``sha``: the
  commit it resolves to; ``siblings``, with ``blobId`` and ``lfs.sha256`` when ``?blobs=true``).
- ``GET /api/<kind>s/<repo>/refs``: the branches and the commit each points to (``list_repo_refs``).
- ``GET /api/<kind>s/<repo>/tree/<rev>[/<path>]`` and ``POST .../paths-info/<rev>``: file listings with each file's
  git blob id (``oid``) and, for LFS files, ``lfs.oid`` = the sha256 of its content.
- ``HEAD``/``GET /[datasets/]<repo>/resolve/<rev>/<path>``: ``X-Repo-Commit`` and ``ETag`` (the git blob id); an LFS
  file answers 302 to ``/lfs/<sha256>`` with ``X-Linked-Etag`` (its sha256) and ``X-Linked-Size``, and ``/lfs/``
  honours ``Range``.
- Errors with the hub's ``X-Error-Code``: ``RepoNotFound`` and ``RevisionNotFound`` (404), ``EntryNotFound`` (404)
  and, for a gated repository, ``GatedRepo`` (401) on the file requests (its info and listings stay public).

Test levers: :attr:`Repo.tampered` serves other bytes for a file while announcing the genuine file's hashes, and
:attr:`Repo.reset_once` / :attr:`Repo.cut_once` reset / close the connection half-way through a file's next
download. Every request is logged in
:attr:`HubServer.requests`.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

#: files stored in git LFS on the hub (the rest are plain git blobs)
LFS_SUFFIXES = (".safetensors", ".bin", ".parquet", ".model", ".gguf", ".h5", ".msgpack")


def git_blob_id(data: bytes) -> str:
    """The git object id of a blob: sha1 of ``blob <size>\\0`` and the content (the hub's ETag of a plain file)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    """The git-LFS pointer file committed in place of an LFS file's content."""
    sha = hashlib.sha256(data).hexdigest()
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n".encode()


@dataclass
class Repo:
    """One repository: branches, each a file tree (path -> bytes) at one commit.

    Attributes:
        repo_id: ``owner/name`` (or a bare canonical name).
        kind: ``model`` or ``dataset``.
        branches: branch name -> files (path -> content); each branch is one commit.
        gated: file requests answer 401 ``GatedRepo`` (info and listings stay public).
        tampered: path -> bytes served instead of the committed content (announced hashes stay the genuine ones).
        reset_once: paths whose next download is reset (TCP RST) half-way.
        cut_once: paths whose next download ends half-way (the connection closed before the announced length).
    """

    repo_id: str
    kind: str = "model"
    branches: dict[str, dict[str, bytes]] = field(default_factory=dict)
    gated: bool = False
    tampered: dict[str, bytes] = field(default_factory=dict)
    reset_once: set[str] = field(default_factory=set)
    cut_once: set[str] = field(default_factory=set)

    @classmethod
    def from_folders(cls, repo_id: str, kind: str = "model", **branches: dict[str, Path | bytes]) -> Repo:
        """A repository whose branch ``name`` holds the given files (repo path -> a file on disk, or bytes)."""
        trees = {
            name.replace("__", "/"): {p: v if isinstance(v, bytes) else Path(v).read_bytes() for p, v in files.items()}
            for name, files in branches.items()
        }
        return cls(repo_id, kind, trees)

    def commit(self, branch: str) -> str:
        """The commit id of a branch: a hash of its tree (stable across runs)."""
        h = hashlib.sha1(f"{self.repo_id}@{branch}".encode())
        for path, data in sorted(self.branches[branch].items()):
            h.update(path.encode() + b"\0" + hashlib.sha256(data).digest())
        return h.hexdigest()

    def resolve(self, revision: str) -> str | None:
        """The branch that ``revision`` (a branch name or a commit id) names, or None."""
        if revision in self.branches:
            return revision
        return next((b for b in self.branches if self.commit(b) == revision), None)


def entry(path: str, data: bytes) -> dict:
    """A file's entry in a tree listing / paths-info answer."""
    out = {"type": "file", "path": path, "size": len(data)}
    if path.endswith(LFS_SUFFIXES):
        pointer = lfs_pointer(data)
        out["oid"] = git_blob_id(pointer)
        out["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": len(pointer)}
    else:
        out["oid"] = git_blob_id(data)
    return out


def tree_entries(files: dict[str, bytes], prefix: str, recursive: bool) -> list[dict]:
    """The tree listing of folder ``prefix`` (``""``: the root): files and folders, recursively or one level."""
    base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    out, folders = [], set()
    for path, data in sorted(files.items()):
        if not path.startswith(base):
            continue
        rest = path[len(base) :].split("/")
        for depth in range(1, len(rest)):
            if recursive or depth == 1:
                folders.add(base + "/".join(rest[:depth]))
        if recursive or len(rest) == 1:
            out.append(entry(path, data))
    dirs = [{"type": "directory", "path": d, "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0} for d in folders]
    return sorted(dirs, key=lambda d: d["path"]) + out


class Listener(ThreadingHTTPServer):
    """One listening socket of the hub (the API and files, or the content store's other host)."""

    daemon_threads = True

    def __init__(self, host: str, hub: HubServer):
        super().__init__((host, 0), Handler)
        self.hub = hub

    @property
    def url(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}"


class HubServer:
    """The hub on a free loopback port (:attr:`endpoint` is what ``HF_ENDPOINT`` should be) and its content store
    on another loopback address, a host of its own as the hub's CDN is: the client reads a file's metadata from
    the hub's redirect and does not follow it to another host for that."""

    def __init__(self, repos: list[Repo] = ()):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self.api = Listener("127.0.0.1", self)
        self.cdn = Listener("127.0.0.2", self)
        for repo in repos:
            self.add(repo)

    @property
    def endpoint(self) -> str:
        return self.api.url

    def add(self, repo: Repo) -> Repo:
        self.repos[(repo.kind, repo.repo_id)] = repo
        return repo

    def blob(self, sha: str) -> tuple[Repo, str, bytes] | None:
        """The repository, path and served content of the LFS file whose announced sha256 is ``sha``."""
        for repo in self.repos.values():
            for files in repo.branches.values():
                for path, data in files.items():
                    if hashlib.sha256(data).hexdigest() == sha:
                        return repo, path, repo.tampered.get(path, data)
        return None

    def start(self) -> HubServer:
        for listener in (self.api, self.cdn):
            threading.Thread(target=listener.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        for listener in (self.api, self.cdn):
            listener.shutdown()
            listener.server_close()


class Handler(BaseHTTPRequestHandler):
    """Answers one request of the hub's protocol (see the module docstring)."""

    protocol_version = "HTTP/1.1"
    server: Listener

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the base class's signature
        pass

    # --- answers ------------------------------------------------------------------------------------------------

    def send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, obj, headers: dict[str, str] | None = None) -> None:
        self.send(200, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})

    def error(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": message}).encode()
        extra = {"X-Error-Code": code, "X-Error-Message": message, "Content-Type": "application/json"}
        self.send(status, body, {**extra, **(headers or {})})

    # --- routing ------------------------------------------------------------------------------------------------

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self.route()

    def do_GET(self) -> None:  # noqa: N802
        self.route()

    def do_POST(self) -> None:  # noqa: N802
        self.route()

    def route(self) -> None:
        url = urlsplit(self.path)
        with self.server.hub.lock:
            self.server.hub.requests.append((self.command, unquote(url.path)))
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        query = parse_qs(url.query)
        if parts[:1] == ["api"] and len(parts) > 2 and parts[1] in ("models", "datasets"):
            return self.api(parts[1][:-1], parts[2:], query)
        if parts[:1] == ["lfs"] and len(parts) == 2:
            return self.lfs(parts[1])
        if parts[:1] == ["datasets"]:
            return self.resolve_file("dataset", parts[1:])
        return self.resolve_file("model", parts)

    def find(self, kind: str, parts: list[str]) -> tuple[Repo | None, list[str]]:
        """The repository that the first one or two path parts name, and the remaining parts."""
        for n in (2, 1):
            repo = self.server.hub.repos.get((kind, "/".join(parts[:n])))
            if repo is not None:
                return repo, parts[n:]
        return None, parts

    def repo_or_error(self, kind: str, parts: list[str]) -> tuple[Repo | None, list[str]]:
        repo, rest = self.find(kind, parts)
        if repo is None:
            self.error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}.")
        return repo, rest

    def branch_or_error(self, repo: Repo, revision: str) -> str | None:
        branch = repo.resolve(revision)
        if branch is None:
            self.error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return branch

    # --- the API ------------------------------------------------------------------------------------------------

    def api(self, kind: str, parts: list[str], query: dict[str, list[str]]) -> None:
        repo, rest = self.repo_or_error(kind, parts)
        if repo is None:
            return
        # a revision with slashes (refs/convert/parquet) arrives percent-encoded as one part
        if not rest or rest[0] == "revision":
            branch = self.branch_or_error(repo, rest[1] if len(rest) > 1 else "main")
            if branch is not None:
                self.send_json(self.info(repo, branch, query.get("blobs") == ["true"]))
        elif rest[0] == "tree" and len(rest) >= 2:
            branch = self.branch_or_error(repo, rest[1])
            if branch is not None:
                recursive = query.get("recursive", ["false"])[0].lower() in ("true", "1")
                self.send_json(tree_entries(repo.branches[branch], "/".join(rest[2:]), recursive))
        elif rest == ["refs"]:  # list_repo_refs: every branch and the commit it points to
            self.send_json(self.refs(repo))
        elif rest[0] == "paths-info" and len(rest) == 2:
            branch = self.branch_or_error(repo, rest[1])
            if branch is not None:
                self.send_json(self.paths_info(repo.branches[branch]))
        else:
            self.error(404, "EntryNotFound", f"no API route {self.path}")

    def refs(self, repo: Repo) -> dict:
        """The answer of ``GET /api/<kind>s/<repo>/refs``: the branches (each one commit), no tags or conversions."""
        branches = [
            {"name": b, "ref": f"refs/heads/{b}", "targetCommit": repo.commit(b)} for b in sorted(repo.branches)
        ]
        return {"branches": branches, "converts": [], "tags": []}

    def info(self, repo: Repo, branch: str, blobs: bool) -> dict:
        files = repo.branches[branch]
        siblings = []
        for path, data in sorted(files.items()):
            sib = {"rfilename": path}
            if blobs:  # as the hub answers ?blobs=true: size, git blob id and the LFS file's sha256
                e = entry(path, data)
                sib.update(size=e["size"], blobId=e["oid"])
                if "lfs" in e:
                    sib["lfs"] = {"sha256": e["lfs"]["oid"], "size": e["size"], "pointerSize": e["lfs"]["pointerSize"]}
            siblings.append(sib)
        return {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "sha": repo.commit(branch),
            "private": False,
            "gated": "manual" if repo.gated else False,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "lastModified": "2024-01-01T00:00:00.000Z",
            "createdAt": "2024-01-01T00:00:00.000Z",
            "siblings": siblings,
        }

    def paths_info(self, files: dict[str, bytes]) -> list[dict]:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        if self.headers.get("Content-Type", "").startswith("application/json"):
            paths = json.loads(body).get("paths", [])
        else:
            paths = parse_qs(body).get("paths", [])
        out = []
        for path in paths:
            path = path.strip("/")
            if path in files:
                out.append(entry(path, files[path]))
            elif any(p.startswith(f"{path}/") for p in files) or path == "":
                out.append({"type": "directory", "path": path, "oid": hashlib.sha1(path.encode()).hexdigest()})
        return out

    # --- files --------------------------------------------------------------------------------------------------

    def resolve_file(self, kind: str, parts: list[str]) -> None:
        repo, rest = self.repo_or_error(kind, parts)
        if repo is None:
            return
        if len(rest) < 3 or rest[0] != "resolve":
            return self.error(404, "EntryNotFound", f"no route {self.path}")
        branch = self.branch_or_error(repo, rest[1])
        if branch is None:
            return
        commit = {"X-Repo-Commit": repo.commit(branch)}
        if repo.gated:
            msg = f"Access to model {repo.repo_id} is restricted. You must have access to it and be authenticated."
            return self.error(401, "GatedRepo", msg, commit)
        path = "/".join(rest[2:])
        files = repo.branches[branch]
        if path not in files:
            return self.error(404, "EntryNotFound", f"{path} does not exist on {rest[1]}", commit)
        data = files[path]
        e = entry(path, data)
        if "lfs" in e:
            sha = e["lfs"]["oid"]
            headers = {
                **commit,
                "ETag": f'"{e["oid"]}"',
                "X-Linked-Etag": f'"{sha}"',
                "X-Linked-Size": str(len(data)),
                "Location": f"{self.server.hub.cdn.url}/lfs/{sha}",
            }
            return self.send(302, b"", headers)
        served = repo.tampered.get(path, data)
        self.send(200, served, {**commit, "ETag": f'"{e["oid"]}"', "Content-Type": "application/octet-stream"})

    def lfs(self, sha: str) -> None:
        """The content store: an LFS file by its sha256, with ``Range`` support and the connection-reset lever."""
        found = self.server.hub.blob(sha)
        if found is None:
            return self.error(404, "EntryNotFound", f"no LFS object {sha}")
        repo, path, data = found
        start, end = 0, len(data) - 1
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            first, _, last = rng[len("bytes=") :].partition("-")
            start = int(first) if first else max(0, len(data) - int(last))
            end = int(last) if first and last else len(data) - 1
        body = data[start : end + 1]
        status = 206 if rng else 200
        headers = {"ETag": f'"{sha}"', "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
        if rng:
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
        for lever in (repo.reset_once, repo.cut_once):
            if self.command == "GET" and path in lever:
                lever.discard(path)
                return self.cut_after(status, headers, body, len(body) // 2, reset=lever is repo.reset_once)
        self.send(status, body, headers)

    def cut_after(self, status: int, headers: dict[str, str], body: bytes, cut: int, reset: bool) -> None:
        """Announce ``body`` in full, send its first ``cut`` bytes, then reset (``reset``) or close the connection."""
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:cut])
        self.wfile.flush()
        if reset:  # RST: the connection fails at once (unread data is dropped)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        else:  # FIN: the client reads what was sent, then finds the body incomplete
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.recv(1)  # wait for the client to drop the connection
        self.close_connection = True


def model_url(endpoint: str, repo_id: str, revision: str, path: str) -> str:
    """The resolve URL of a file (as ``huggingface_hub.hf_hub_url`` builds it)."""
    return f"{endpoint}/{repo_id}/resolve/{quote(revision, safe='')}/{path}"
