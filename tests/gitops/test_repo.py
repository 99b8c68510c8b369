"""offloading.gitops.repo against real Git servers on loopback: `git daemon` (receive-pack enabled) and
`git http-backend` behind HTTP basic. Each test reads the server's bare repository with `git log` and
`git show`: the branch, the author, the message, the files, and the parent (the base branch's head)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from offloading.gitops import repo as r
from offloading.gitops.files import FileChange, change_files
from tests.fixtures.waits import free_port
from tests.gitops.conftest import HTTP_PASSWORD, HTTP_USER
from tests.gitops.gitserver import GitDaemon, GitHttpServer, git

SPEC = {"podOffloadingStrategy": "Remote", "namespaceMappingStrategy": "EnforceSameName"}
BASE = {"podOffloadingStrategy": "LocalAndRemote", "namespaceMappingStrategy": "EnforceSameName"}
FILES = change_files(
    [
        FileChange(12, "web", "offload", desired_spec=SPEC, label_namespace=True),
        FileChange(13, "shop", "update", desired_spec=SPEC, base_spec=BASE),
    ],
    requester="alice",
)
PATH = "clusters/prod/liqo"


def settings(url: str, branch: str = "main", username: str = "", password_file: str = "") -> r.RepoSettings:
    return r.RepoSettings(url, branch, PATH, username, password_file, timeout=20)


def heads(bare: Path) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads", cwd=bare)
    return dict(line.split(" ") for line in out.splitlines())


def test_a_hand_off_lands_on_a_new_branch(daemon: GitDaemon, served: Path) -> None:
    bare = served / "fleet.git"
    before = heads(bare)
    result = r.commit(FILES, settings(daemon.url()), requester="alice", author_email="alice@example.com")

    assert result.branch == "liqo-dash/changes-12-13" and result.base_branch == "main"
    assert result.directory == f"{PATH}/changes-12-13" and result.url == daemon.url()
    after = heads(bare)
    assert after == {**before, "liqo-dash/changes-12-13": result.sha}  # main did not move
    assert result.base_sha == before["main"]
    log = git("log", "-1", "--format=%P%n%an <%ae>%n%cn%n%B", result.sha, cwd=bare).splitlines()
    assert log[0] == before["main"]  # one parent: the base branch's head
    assert log[1:3] == ["alice <alice@example.com>", "liqo-dash"]
    message = "\n".join(log[3:])
    assert message.startswith("liqo-dash: changes #12, #13 requested by alice\n\n#12 offload web\n#13 update shop\n")
    assert "Approvals: none" in message and "Files: clusters/prod/liqo/changes-12-13/" in message
    assert "also label namespace web liqo.io/scheduling-enabled=true" in message
    assert message.rstrip().endswith("Requested-by: alice\nLiqo-Dash-Change: 12\nLiqo-Dash-Change: 13")
    changed = git("diff-tree", "--no-commit-id", "--name-status", "-r", result.sha, cwd=bare).splitlines()
    assert changed == [f"A\t{path}" for path in sorted(FILES.under(PATH))]
    for path, data in FILES.under(PATH).items():
        assert git("show", f"{result.sha}:{path}", cwd=bare).encode() == data
    # the rest of the tree is the base's
    assert git("show", f"{result.sha}:README.md", cwd=bare) == "# fleet\n"


def test_approvals_are_named(daemon: GitDaemon, served: Path) -> None:
    approvals = [r.Approval("bob", "2026-05-04T10:00:00Z", "looks right\nship it"), r.Approval("carol")]
    result = r.commit(FILES, settings(daemon.url()), requester="alice", approvals=approvals)
    message = git("log", "-1", "--format=%B", result.sha, cwd=served / "fleet.git")
    assert '\nApprovals:\n- bob at 2026-05-04T10:00:00Z: "looks right ship it"\n- carol\n' in message
    assert "\nRequested-by: alice\nApproved-by: bob\nApproved-by: carol\nLiqo-Dash-Change: 12\n" in message


def test_an_existing_branch_is_a_clear_error(daemon: GitDaemon, served: Path) -> None:
    r.commit(FILES, settings(daemon.url()), requester="alice")
    before = heads(served / "fleet.git")
    with pytest.raises(r.BranchExists, match="already has branch liqo-dash/changes-12-13"):
        r.commit(FILES, settings(daemon.url()), requester="bob")
    assert heads(served / "fleet.git") == before


def test_a_merged_hand_off_is_not_committed_twice(daemon: GitDaemon, served: Path) -> None:
    bare = served / "fleet.git"
    first = r.commit(FILES, settings(daemon.url()), requester="alice")
    git("update-ref", "refs/heads/main", first.sha, cwd=bare)  # merged (fast-forward) ...
    git("update-ref", "-d", "refs/heads/liqo-dash/changes-12-13", cwd=bare)  # ... and the branch deleted
    with pytest.raises(r.NothingToCommit, match="already holds clusters/prod/liqo/changes-12-13"):
        r.commit(FILES, settings(daemon.url()), requester="alice")
    edited = change_files([FileChange(12, "web", "offload", desired_spec=BASE), FileChange(13, "shop", "unoffload")])
    second = r.commit(edited, settings(daemon.url()), requester="alice")
    status = git("diff-tree", "--no-commit-id", "--name-status", "-r", second.sha, cwd=bare).splitlines()
    directory = f"{PATH}/changes-12-13"
    assert status == [
        f"M\t{directory}/kustomization.yaml",
        f"D\t{directory}/shop/namespaceoffloading.yaml",
        f"A\t{directory}/shop/observed.yaml",
        f"M\t{directory}/shop/patch.yaml",
        f"M\t{directory}/web/namespaceoffloading.yaml",
    ]


def test_a_missing_base_branch(daemon: GitDaemon) -> None:
    with pytest.raises(r.BaseBranchMissing, match="has no branch release"):
        r.commit(FILES, settings(daemon.url(), branch="release"), requester="alice")


def test_a_missing_repository(daemon: GitDaemon) -> None:
    with pytest.raises(r.RepositoryNotFound, match="no such repository"):
        r.commit(FILES, settings(daemon.url("nothing.git")), requester="alice")


def test_an_unreachable_server(tmp_path: Path) -> None:
    url = f"git://127.0.0.1:{free_port()}/fleet.git"  # nobody listens there
    with pytest.raises(r.Unreachable, match="cannot be reached"):
        r.commit(FILES, settings(url), requester="alice")


def password_file(tmp_path: Path, password: str) -> str:
    path = tmp_path / "gitops-password"
    path.write_text(password + "\n")  # a mounted Secret often ends with a newline
    return str(path)


def test_http_basic_credentials_from_the_password_file(
    http_server: GitHttpServer, served: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = settings(http_server.url(), username=HTTP_USER, password_file=password_file(tmp_path, HTTP_PASSWORD))
    result = r.commit(FILES, config, requester="alice")
    assert heads(served / "fleet.git")["liqo-dash/changes-12-13"] == result.sha
    assert git("log", "-1", "--format=%P", result.sha, cwd=served / "fleet.git").strip() == result.base_sha
    # git asked without credentials first, then answered the 401 with the helper's
    assert http_server.seen[0][2] == "" and any(auth == http_server.expected for _, _, auth in http_server.seen)
    assert any(method == "POST" and path.endswith("/git-receive-pack") for method, path, _ in http_server.seen)
    assert HTTP_PASSWORD not in caplog.text and HTTP_PASSWORD not in repr(result)
    assert f"pushed {result.sha} to branch liqo-dash/changes-12-13" in caplog.text


def test_a_wrong_password_is_refused_and_never_shown(
    http_server: GitHttpServer, served: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "not-the-Pa55word"
    config = settings(http_server.url(), username=HTTP_USER, password_file=password_file(tmp_path, wrong))
    with pytest.raises(r.AuthRefused, match="refused the credentials") as caught:
        r.commit(FILES, config, requester="alice")
    assert wrong not in str(caught.value) and wrong not in caplog.text
    assert "liqo-dash/changes-12-13" not in heads(served / "fleet.git")
    with pytest.raises(r.AuthRefused):  # no credentials configured at all
        r.commit(FILES, settings(http_server.url()), requester="alice")


@pytest.mark.parametrize(
    ("values", "error", "words"),
    [
        ({}, r.NotConfigured, "no Git repository"),
        ({"REPO_URL": "ext::sh -c touch% pwned"}, r.ConfigInvalid, "must be"),
        ({"REPO_URL": "https://bot:hunter2@git.example.com/fleet.git"}, r.ConfigInvalid, "carries a password"),
        ({"REPO_URL": "https://git.example.com/f.git", "USERNAME": "bot"}, r.ConfigInvalid, "PASSWORD_FILE is not"),
        ({"REPO_URL": "https://git.example.com/f.git", "PASSWORD_FILE": "/x"}, r.ConfigInvalid, "USERNAME is not"),
        ({"REPO_URL": "https://git.example.com/f.git", "BRANCH": "a..b"}, r.ConfigInvalid, "not a valid branch"),
        ({"REPO_URL": "https://git.example.com/f.git", "USERNAME": "a\nb"}, r.ConfigInvalid, "one line"),
        ({"REPO_URL": "https://git.example.com/f.git", "PATH": "../up"}, r.ConfigInvalid, "inside the repository"),
    ],
)
def test_settings_are_checked(values: dict[str, str], error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        r.RepoSettings.from_mapping(values)


def test_settings_from_the_mapping() -> None:
    found = r.RepoSettings.from_mapping(
        {"REPO_URL": "https://bot@git.example.com:8443/fleet.git", "BRANCH": "", "PATH": "liqo"}
    )
    assert (found.branch, found.path, found.safe_url) == ("main", "liqo", "https://git.example.com:8443/fleet.git")
    assert r.RepoSettings.from_mapping({"REPO_URL": "git@github.example:org/fleet.git"}).safe_url.startswith("git@")


def test_an_unreadable_password_file(tmp_path: Path) -> None:
    config = settings("https://git.example.com/f.git", username="bot", password_file=str(tmp_path / "missing"))
    with pytest.raises(r.ConfigInvalid, match="cannot be read: No such file"):
        r.commit(FILES, config, requester="alice")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(r.ConfigInvalid, match="is empty"):
        r.commit(FILES, settings("https://git.example.com/f.git", username="bot", password_file=str(empty)), "alice")


@pytest.mark.parametrize(
    ("stderr", "error"),
    [
        ("fatal: Authentication failed for 'https://git.example.com/f.git/'", r.AuthRefused),
        ("remote: Repository not found.\nfatal: repository 'https://x/f.git/' not found", r.RepositoryNotFound),
        ("fatal: unable to access 'https://x/': Could not resolve host: x", r.Unreachable),
        ("!\trefs/heads/a:refs/heads/a\t[rejected] (fetch first)\nerror: failed to push some refs", r.BranchExists),
        ("!\trefs/heads/a:refs/heads/a\t[remote rejected] (pre-receive hook declined)", r.PushRefused),
        ("fatal: something else entirely", r.GitOpsError),
    ],
)
def test_git_complaints_are_classified(stderr: str, error: type[r.GitOpsError]) -> None:
    found = r.classify(stderr, "https://x/f.git")
    assert type(found) is error
    assert str(found).startswith("https://x/f.git ") or str(found).startswith("git failed on https://x/f.git")


def test_this_machines_git_configuration_is_not_read(
    daemon: GitDaemon, served: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's or the system's git configuration (here one that sends the daemon's URL nowhere, and a
    credential store) does not change where or how liqo-dash pushes."""
    misleading = tmp_path / "gitconfig"
    misleading.write_text(
        f'[url "git://127.0.0.1:1/"]\n\tinsteadOf = {daemon.url("")}\n[credential]\n\thelper = store\n'
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(misleading.read_text())
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(misleading))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'url.git://127.0.0.1:1/.insteadof'='{daemon.url('')}'")
    result = r.commit(FILES, settings(daemon.url()), requester="alice")
    assert heads(served / "fleet.git")["liqo-dash/changes-12-13"] == result.sha
