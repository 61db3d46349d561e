"""A private PostgreSQL server for the Python tests, as internal/pgtest starts one for Go's:
initdb into a temporary directory, ``pg_ctl start`` on a free loopback port (no Unix
socket, password authentication for the superuser), stopped when the test session ends.
As root (CI) initdb and the server run as ``nobody`` through ``runuser``, because initdb
refuses to run as root. Each test gets its own schema of the ``postgres`` database through
the URL's ``schema`` parameter (pgplane.ParseURL), which ``lakeshore serve`` creates.

Where PostgreSQL is not installed, :func:`start` raises :class:`NotInstalled` naming the
package to install; the ``postgres_url`` fixture (conftest.py) skips then, and fails with
``CI=true``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SUPERUSER = "lakeshore"
PASSWORD = "lakeshore-test"
INSTALL_HINT = (
    "PostgreSQL is not installed: install it with `apt-get install postgresql` (the tests look for "
    "initdb and pg_ctl on PATH and under /usr/lib/postgresql/*/bin)"
)


class NotInstalled(RuntimeError):
    """initdb or pg_ctl cannot be found."""


def find_binaries() -> str:
    """The directory of initdb and pg_ctl: PATH first, then the newest
    /usr/lib/postgresql/*/bin (internal/pgtest.FindBinaries). Raises NotInstalled."""
    initdb = shutil.which("initdb")
    if initdb:
        d = os.path.dirname(os.path.realpath(initdb))
        if os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    dirs = glob.glob("/usr/lib/postgresql/*/bin")
    dirs.sort(key=lambda d: int(Path(d).parent.name) if Path(d).parent.name.isdigit() else 0, reverse=True)
    for d in dirs:
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    raise NotInstalled(INSTALL_HINT)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running server: ``url(schema)`` names a schema of its ``postgres`` database."""

    port: int
    dir: Path
    bin: str
    user: str  # "" unless the server runs as an unprivileged user (tests as root)

    def url(self, schema: str) -> str:
        return (
            f"postgres://{SUPERUSER}:{PASSWORD}@127.0.0.1:{self.port}/postgres"
            f"?sslmode=disable&schema={schema}"
        )

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [os.path.join(self.bin, args[0]), *args[1:]]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory."""
        self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.dir / "data"))
        shutil.rmtree(self.dir, ignore_errors=True)


def start() -> PgServer:
    """Start a fresh server. Raises NotInstalled, or RuntimeError with what initdb or pg_ctl
    said."""
    bin_dir = find_binaries()
    user = "nobody" if os.geteuid() == 0 else ""
    d = Path(tempfile.mkdtemp(prefix="pytest-pg-"))
    s = PgServer(port=0, dir=d, bin=bin_dir, user=user)
    try:
        if user:
            shutil.chown(d, user)
        pwfile = d / "pwfile"
        pwfile.write_text(PASSWORD + "\n")
        pwfile.chmod(0o600)
        if user:
            shutil.chown(pwfile, user)
        data = str(d / "data")
        r = s._run(
            "initdb", "-D", data, "-U", SUPERUSER, "--pwfile", str(pwfile), "--auth", "scram-sha-256",
            "-E", "UTF8", "--locale", "C", "--no-sync",
        )
        if r.returncode != 0:
            raise RuntimeError(f"initdb: {r.stdout}{r.stderr}")
        for _ in range(5):  # the free port may be taken between the probe and the bind
            s.port = _free_port()
            opts = (
                f"-p {s.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
                "-c fsync=off -c max_connections=200 -c shared_buffers=32MB"
            )
            r = s._run("pg_ctl", "start", "-w", "-t", "60", "-D", data, "-l", str(d / "log"), "-o", opts)
            if r.returncode == 0:
                return s
            log = (d / "log").read_text(errors="replace") if (d / "log").exists() else ""
            if "in use" not in log:
                raise RuntimeError(f"pg_ctl start: {r.stdout}{r.stderr}\n{log[-2000:]}")
        raise RuntimeError("pg_ctl start: no free port after 5 tries")
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
