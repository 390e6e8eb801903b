"""Which openbell built a season's record: the installed package's version and, where it can be
found, the git commit of its source.

This module owns `code_version()`. The version is the installed distribution's. The commit comes
from pip's record of where the package was installed from (`direct_url.json`): an install from a
git URL names its commit; an install from a folder (the editable install of a checkout) names the
folder, whose `.git` is read as files (HEAD, then the branch's ref, loose or packed, in the
worktree's common git directory); nothing runs `git`. Where none of this is found, the commit is
`unknown`, and so said: whether the working tree had uncommitted changes is never claimed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

#: The distribution whose version and source are read.
DISTRIBUTION = "openbell"
#: What stands for a version or commit that cannot be found.
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeVersion:
    """The package's `version` and its source's git `commit` (`UNKNOWN` when not found)."""

    version: str
    commit: str

    def record(self) -> dict[str, str]:
        """The manifest's `code` entry."""
        return {"package": DISTRIBUTION, "version": self.version, "commit": self.commit}


def code_version() -> CodeVersion:
    """The installed openbell's version and commit (see the module docstring). Every
    distribution of that name on the path is asked for the commit (run from a checkout, its
    `openbell.egg-info` comes first and records no source)."""
    found = list(metadata.distributions(name=DISTRIBUTION))
    if not found:
        return CodeVersion(version=UNKNOWN, commit=UNKNOWN)
    commits = (_commit(distribution) for distribution in found)
    commit = next((commit for commit in commits if commit is not None), UNKNOWN)
    return CodeVersion(version=found[0].version, commit=commit)


def _commit(distribution: metadata.Distribution) -> str | None:
    text = distribution.read_text("direct_url.json")
    if not text:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    vcs = found.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str):
        return str(vcs["commit_id"])
    url = found.get("url")
    if not isinstance(url, str) or not url.startswith("file:"):
        return None
    return git_head(Path(unquote(urlparse(url).path)))


def git_head(folder: Path) -> str | None:
    """The commit checked out in the git work tree at `folder` (a checkout or a worktree), read
    from its files; None when it is not one or its HEAD cannot be resolved."""
    git = folder / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: PATH"
            pointer = git.read_text("utf-8").strip()
            if not pointer.startswith("gitdir:"):
                return None
            git = (folder / pointer.removeprefix("gitdir:").strip()).resolve()
        head = (git / "HEAD").read_text("utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head if _is_sha(head) else None
    return _resolve_ref(git, head.removeprefix("ref:").strip())


def _resolve_ref(git: Path, ref: str) -> str | None:
    common = git
    try:
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text("utf-8").strip()).resolve()
        for where in (git, common):
            loose = where / ref
            if loose.is_file():
                value = loose.read_text("utf-8").strip()
                return value if _is_sha(value) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text("utf-8").splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and _is_sha(sha):
                    return sha
    except OSError:
        return None
    return None


def _is_sha(value: str) -> bool:
    return len(value) in (40, 64) and all(char in "0123456789abcdef" for char in value)
