"""Commit a hand-off's files to the configured Git repository, on a new branch, and push it.

Debian's ``git`` does the work (subprocess, no library): a throw-away clone of the base branch's head
(one commit deep), the overlay written under the configured path, one commit whose message names the
requester, the change ids and the approvals, and a push of a branch that must not exist yet. It returns
the commit's sha and the branch.

Credentials: HTTP basic, the user name from the settings and the password read from a file (a mounted
Secret) by a git credential helper at the moment git asks for it. The password is never in the URL, in a
command line, in the environment or in a log line; git's own configuration on this machine (system and
global, their credential helpers included) is not read. Every failure is a ``GitOpsError`` subclass
with a sentence that names no secret: unreachable, repository not found, authentication refused, base
branch missing, branch exists, push refused, nothing to commit.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from offloading.gitops.files import ChangeFiles, FilesError, clean_path

logger = logging.getLogger(__name__)

BRANCH_PREFIX = "liqo-dash/"
SCHEMES = ("https", "http", "ssh", "git", "file")
# The credential helper: git runs it with "get" when the server asks for credentials; it answers the
# user name and the content of the password file, both named by the environment git is given.
_HELPER = (
    '!f() { test "$1" = get || exit 0; '
    'printf "username=%s\\n" "$LIQO_GITOPS_USERNAME"; '
    'printf "password=%s\\n" "$(cat "$LIQO_GITOPS_PASSWORD_FILE")"; }; f'
)
_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}")
_SCP = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+")


class GitOpsError(Exception):
    """The hand-off to Git failed; ``str(error)`` is a sentence for the page and the API."""

    reason = "GitFailed"


class NotConfigured(GitOpsError):
    reason = "NotConfigured"


class ConfigInvalid(GitOpsError):
    reason = "ConfigInvalid"


class Unreachable(GitOpsError):
    reason = "Unreachable"


class RepositoryNotFound(GitOpsError):
    reason = "RepositoryNotFound"


class AuthRefused(GitOpsError):
    reason = "AuthRefused"


class BaseBranchMissing(GitOpsError):
    reason = "BaseBranchMissing"


class BranchExists(GitOpsError):
    reason = "BranchExists"


class PushRefused(GitOpsError):
    reason = "PushRefused"


class NothingToCommit(GitOpsError):
    reason = "NothingToCommit"


@dataclass(frozen=True)
class RepoSettings:
    """Where to commit: the repository, its base branch, the directory for the overlays, the HTTP user
    and the file holding the password (settings.LIQO_DASH_GITOPS)."""

    url: str
    branch: str = "main"
    path: str = "liqo-dash"
    username: str = ""
    password_file: str = ""
    timeout: float = 60.0
    committer_name: str = "liqo-dash"
    committer_email: str = ""

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RepoSettings:
        """From ``settings.LIQO_DASH_GITOPS`` (REPO_URL, BRANCH, PATH, USERNAME, PASSWORD_FILE), checked."""
        settings = cls(
            url=str(values.get("REPO_URL") or ""),
            branch=str(values.get("BRANCH") or "main"),
            path=str(values.get("PATH") or ""),
            username=str(values.get("USERNAME") or ""),
            password_file=str(values.get("PASSWORD_FILE") or ""),
        )
        settings.check()
        return settings

    def check(self) -> None:
        if not self.url:
            raise NotConfigured("no Git repository is configured (LIQO_DASH_GITOPS_REPO_URL)")
        parts = urlsplit(self.url)
        if parts.scheme not in SCHEMES and not _SCP.fullmatch(self.url):
            raise ConfigInvalid(f"the repository URL must be {', '.join(s + '://' for s in SCHEMES)} or user@host:path")
        if parts.password is not None:
            raise ConfigInvalid(
                "the repository URL carries a password: put it in the file named by LIQO_DASH_GITOPS_PASSWORD_FILE"
            )
        if not valid_branch(self.branch):
            raise ConfigInvalid(f"the base branch {self.branch!r} is not a valid branch name")
        try:
            clean_path(self.path)
        except FilesError as error:
            raise ConfigInvalid(str(error)) from None
        if not self.username.isprintable() or ":" in self.username:
            raise ConfigInvalid("LIQO_DASH_GITOPS_USERNAME must be one line without ':'")
        if self.username and not self.password_file:
            raise ConfigInvalid("LIQO_DASH_GITOPS_USERNAME is set but LIQO_DASH_GITOPS_PASSWORD_FILE is not")
        if self.password_file and not self.username:
            raise ConfigInvalid("LIQO_DASH_GITOPS_PASSWORD_FILE is set but LIQO_DASH_GITOPS_USERNAME is not")

    @property
    def safe_url(self) -> str:
        """The URL without any user information, for pages and logs."""
        parts = urlsplit(self.url)
        if parts.scheme in SCHEMES and parts.username is not None:
            host = parts.hostname or ""
            netloc = f"{host}:{parts.port}" if parts.port else host
            return urlunsplit(parts._replace(netloc=netloc))
        return self.url


@dataclass(frozen=True)
class Approval:
    """Who approved, when (ISO 8601) and what they said."""

    approver: str
    at: str = ""
    comment: str = ""


@dataclass(frozen=True)
class CommitResult:
    sha: str
    branch: str
    base_branch: str
    base_sha: str
    directory: str
    url: str

    def to_dict(self) -> dict[str, str]:
        return {
            "sha": self.sha,
            "branch": self.branch,
            "baseBranch": self.base_branch,
            "baseSha": self.base_sha,
            "directory": self.directory,
            "url": self.url,
        }


def valid_branch(name: str) -> bool:
    """A branch name git accepts (the subset of ``git check-ref-format --branch`` liqo-dash needs)."""
    return (
        bool(_REF.fullmatch(name))
        and ".." not in name
        and "//" not in name
        and not name.endswith(("/", ".", ".lock"))
        and "/." not in name
    )


def branch_for(files: ChangeFiles) -> str:
    return BRANCH_PREFIX + files.name


def _line(text: str, limit: int = 200) -> str:
    """One line of user-given text: whitespace (newlines included) collapsed, control characters out."""
    flat = " ".join("".join(ch for ch in str(text) if ch.isprintable() or ch.isspace()).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def commit_message(files: ChangeFiles, requester: str, approvals: Sequence[Approval], directory: str) -> str:
    """The subject names the change ids and the requester; the body lists each change, the notes and the
    approvals; trailers (Requested-by, Approved-by, Liqo-Dash-Change) say it again for tools."""
    who = _line(requester) or "an unknown user"
    ids = [f"#{i}" for i in files.change_ids]
    if len(ids) == 1:
        subject = f"liqo-dash: change {ids[0]} requested by {who}"
    elif len(ids) <= 5:
        subject = f"liqo-dash: changes {', '.join(ids)} requested by {who}"
    else:
        subject = f"liqo-dash: {len(ids)} changes ({ids[0]} to {ids[-1]}) requested by {who}"
    body = [subject, "", *files.described, "", f"Files: {directory}/"]
    if files.notes:
        body += ["", "Notes:", *(f"- {_line(n, 500)}" for n in files.notes)]
    body += ["", "Approvals:" if approvals else "Approvals: none"]
    for approval in approvals:
        said = f': "{_line(approval.comment, 500)}"' if approval.comment else ""
        when = f" at {_line(approval.at, 40)}" if approval.at else ""
        body.append(f"- {_line(approval.approver)}{when}{said}")
    body += ["", f"Requested-by: {who}"]
    body += [f"Approved-by: {_line(a.approver)}" for a in approvals]
    body += [f"Liqo-Dash-Change: {i}" for i in files.change_ids]
    body += [f"Liqo-Dash-Cluster: {files.cluster}"] if files.cluster else []
    return "\n".join(body) + "\n"


class _Git:
    """git in one working directory, isolated from this machine's git configuration."""

    def __init__(self, settings: RepoSettings, workdir: Path) -> None:
        self.settings = settings
        self.workdir = workdir
        self.secret = ""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "SSH_ASKPASS"))}
        env.update(
            {
                "HOME": str(workdir),
                "XDG_CONFIG_HOME": str(workdir),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "GIT_TERMINAL_PROMPT": "0",
                "GIT_HTTP_LOW_SPEED_LIMIT": "1000",
                "GIT_HTTP_LOW_SPEED_TIME": str(int(max(settings.timeout, 1))),
                "LC_ALL": "C",
                "LANGUAGE": "C",
            }
        )
        config = [("credential.helper", ""), ("core.hooksPath", os.devnull), ("commit.gpgSign", "false")]
        if settings.username:
            config.append(("credential.helper", _HELPER))
            env["LIQO_GITOPS_USERNAME"] = settings.username
            env["LIQO_GITOPS_PASSWORD_FILE"] = settings.password_file
            try:
                self.secret = Path(settings.password_file).read_text().strip()
            except OSError as error:
                raise ConfigInvalid(
                    f"the password file (LIQO_DASH_GITOPS_PASSWORD_FILE) cannot be read: {error.strerror}"
                ) from None
            if not self.secret:
                raise ConfigInvalid("the password file (LIQO_DASH_GITOPS_PASSWORD_FILE) is empty")
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for index, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{index}"], env[f"GIT_CONFIG_VALUE_{index}"] = key, value
        self.env = env

    def scrub(self, text: str) -> str:
        if self.secret:
            text = text.replace(self.secret, "***")
        return re.sub(r"(://)[^/@\s]+@", r"\1***@", text)

    def run(self, *args: str, stdin: str | None = None, env: Mapping[str, str] | None = None) -> str:
        try:
            done = subprocess.run(
                ["git", *args],
                cwd=self.workdir,
                env={**self.env, **(env or {})},
                input=stdin,
                capture_output=True,
                text=True,
                timeout=self.settings.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise Unreachable(f"{self.settings.safe_url} did not answer within {self.settings.timeout:g} s") from None
        except FileNotFoundError:
            raise GitOpsError("git is not installed on this machine") from None
        if done.returncode != 0:
            # push --porcelain reports a rejected ref on stdout, the rest of git on stderr
            raise classify(self.scrub(f"{done.stdout}\n{done.stderr}"), self.settings.safe_url)
        return done.stdout


# What git says (LC_ALL=C), to the error it means; the first that matches wins.
_CLASSES: tuple[tuple[type[GitOpsError], tuple[str, ...], str], ...] = (
    (
        AuthRefused,
        (
            "authentication failed",
            "could not read username",
            "could not read password",
            "terminal prompts disabled",
            "returned error: 401",
            "returned error: 403",
            "permission denied",
        ),
        "refused the credentials (LIQO_DASH_GITOPS_USERNAME and the password file)",
    ),
    (
        RepositoryNotFound,
        ("repository not exported", "not found", "does not appear to be a git repository", "returned error: 404"),
        "has no such repository (or does not export it)",
    ),
    (
        Unreachable,
        (
            "could not resolve host",
            "connection refused",
            "failed to connect",
            "unable to connect",
            "timed out",
            "network is unreachable",
            "no route to host",
            "unable to access",
            "unable to look up",
            "connection reset",
        ),
        "cannot be reached",
    ),
    (
        BranchExists,
        ("[rejected]", "already exists", "non-fast-forward", "fetch first", "stale info"),
        "already has that branch",
    ),
    (PushRefused, ("hook declined", "protected branch", "[remote rejected]"), "refused the push"),
)


def classify(stderr: str, url: str) -> GitOpsError:
    """The typed error for git's complaint; its sentence quotes git's last line (secrets already scrubbed)."""
    lowered = stderr.lower()
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    said = f" (git: {_line(lines[-1], 300)})" if lines else ""
    for kind, needles, meaning in _CLASSES:
        if any(needle in lowered for needle in needles):
            return kind(f"{url} {meaning}{said}")
    return GitOpsError(f"git failed on {url}{said}")


def _heads(git: _Git, *branches: str) -> dict[str, str]:
    """{branch: sha} of those of ``branches`` the repository has."""
    out = git.run("ls-remote", "--heads", "origin", *(f"refs/heads/{b}" for b in branches))
    found = {}
    for line in out.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.startswith("refs/heads/") and ref[len("refs/heads/") :] in branches:
            found[ref[len("refs/heads/") :]] = sha
    return found


def commit(
    files: ChangeFiles,
    settings: RepoSettings,
    requester: str,
    approvals: Sequence[Approval] = (),
    author_email: str = "",
) -> CommitResult:
    """Commit ``files`` under ``<path>/<overlay>`` (``<path>/<cluster>/<overlay>`` for another managed
    cluster than the default) on a new branch from the base branch's head, push it,
    and return where it landed. The author is the requester, the committer liqo-dash."""
    settings.check()
    branch = branch_for(files)
    if not valid_branch(branch):
        raise ConfigInvalid(f"{branch!r} is not a valid branch name")
    directory = files.directory(settings.path)
    with tempfile.TemporaryDirectory(prefix="liqo-dash-gitops-") as tmp:
        workdir = Path(tmp) / "repo"
        workdir.mkdir()
        git = _Git(settings, workdir)
        git.run("init", "--quiet")
        git.run("remote", "add", "origin", settings.url)
        heads = _heads(git, settings.branch, branch)
        if branch in heads:
            raise BranchExists(f"{settings.safe_url} already has branch {branch}")
        if settings.branch not in heads:
            raise BaseBranchMissing(f"{settings.safe_url} has no branch {settings.branch}")
        remote = f"refs/remotes/origin/{settings.branch}"
        git.run("fetch", "--quiet", "--no-tags", "--depth=1", "origin", f"+refs/heads/{settings.branch}:{remote}")
        base_sha = git.run("rev-parse", remote).strip()
        git.run("checkout", "--quiet", "--no-track", "-b", branch, remote)
        target = workdir / directory
        if target.exists():
            git.run("rm", "-r", "--quiet", "--ignore-unmatch", "--", directory)
        for rel, data in files.under(settings.path).items():
            path = workdir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        git.run("add", "--all", "--", directory)
        if not git.run("status", "--porcelain", "--", directory).strip():
            raise NothingToCommit(f"branch {settings.branch} of {settings.safe_url} already holds {directory} as it is")
        who = _line(requester) or "unknown"
        identity = {
            "GIT_AUTHOR_NAME": who,
            "GIT_AUTHOR_EMAIL": _line(author_email),
            "GIT_COMMITTER_NAME": settings.committer_name,
            "GIT_COMMITTER_EMAIL": settings.committer_email,
        }
        message = commit_message(files, requester, approvals, directory)
        git.run("commit", "--quiet", "--no-verify", "--file=-", stdin=message, env=identity)
        sha = git.run("rev-parse", "HEAD").strip()
        git.run("push", "--quiet", "--porcelain", "origin", f"refs/heads/{branch}:refs/heads/{branch}")
    logger.info("gitops: pushed %s to branch %s of %s (base %s)", sha, branch, settings.safe_url, base_sha)
    return CommitResult(sha, branch, settings.branch, base_sha, directory, settings.safe_url)
