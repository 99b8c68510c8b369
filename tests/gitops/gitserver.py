"""Real Git servers on loopback for the hand-off tests: ``git daemon`` started as a user would (its own
process, stopped by its id), and ``git http-backend`` behind a small CGI runner that asks for HTTP basic
credentials, as a Git host in front of a private repository does."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.fixtures.waits import free_port


def git(*args: str, cwd: Path | None = None, stdin: str | None = None) -> str:
    """git with this machine's configuration left out, failing loudly."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"})
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def seed(root: Path, name: str = "fleet.git") -> Path:
    """A bare repository with two commits on main: a README, then an offloading of the fleet."""
    bare = root / name
    git("init", "--quiet", "--bare", "--initial-branch=main", str(bare))
    work = root / f"{name}-seed"
    git("clone", "--quiet", str(bare), str(work))
    ident = ["-c", "user.name=Fleet Admin", "-c", "user.email=admin@example.com"]
    (work / "README.md").write_text("# fleet\n")
    git("add", "README.md", cwd=work)
    git(*ident, "commit", "--quiet", "-m", "Start", cwd=work)
    (work / "clusters" / "prod").mkdir(parents=True)
    (work / "clusters" / "prod" / "kustomization.yaml").write_text("resources: []\n")
    git("add", "clusters", cwd=work)
    git(*ident, "commit", "--quiet", "-m", "The production cluster", cwd=work)
    git("push", "--quiet", "origin", "main", cwd=work)
    return bare


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


class GitDaemon:
    """``git daemon --export-all --enable=receive-pack --base-path=ROOT --port=P --reuseaddr`` on 127.0.0.1."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log = root / "git-daemon.log"

    def start(self) -> GitDaemon:
        for _ in range(5):  # another process may take the free port before the daemon binds it
            self.port = free_port()
            with self.log.open("ab") as log:
                self.process = subprocess.Popen(
                    [
                        "git",
                        "daemon",
                        "--export-all",
                        "--enable=receive-pack",
                        f"--base-path={self.root}",
                        f"--port={self.port}",
                        "--reuseaddr",
                        "--listen=127.0.0.1",
                        str(self.root),
                    ],
                    stdout=log,
                    stderr=log,
                    start_new_session=True,
                )
            if _wait_for_port(self.port, self.process):
                return self
            self.stop()
        raise AssertionError(f"git daemon did not start: {self.log.read_text()}")

    def url(self, name: str = "fleet.git") -> str:
        return f"git://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            # the daemon and the children it forked per connection: its own process group
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.process = None


class _Handler(BaseHTTPRequestHandler):
    server: GitHttpServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _serve(self) -> None:
        auth = self.headers.get("Authorization", "")
        self.server.seen.append((self.command, self.path, auth))
        if auth != self.server.expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="fleet"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.server.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "REMOTE_USER": self.server.username,
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        body = self._body() if self.command == "POST" else b""
        env["CONTENT_LENGTH"] = str(len(body))
        done = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, timeout=60)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode("latin-1").split("\r\n"):
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class GitHttpServer(ThreadingHTTPServer):
    """``git http-backend`` over HTTP on 127.0.0.1 (an OS-chosen port), every request asked for
    ``username``:``password`` with HTTP basic; ``seen`` lists (method, path, Authorization) of each request."""

    daemon_threads = True

    def __init__(self, root: Path, username: str, password: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root, self.username = root, username
        self.expected = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.seen: list[tuple[str, str, str]] = []
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    def start(self) -> GitHttpServer:
        self.thread.start()
        return self

    def url(self, name: str = "fleet.git") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(timeout=10)
