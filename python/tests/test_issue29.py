"""Issue 29's defects in the Python client: plane targets it cannot serve, a failing body's
log, NotFoundError naming the id, data reads across partitions, reader ranks from the
environment, tag-only KV updates, a stopped job's error, packaging and README's snippet."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import lakeshore
from lakeshore import HttpDispatch, InvalidError, LocalDispatch, NotFoundError, SyncQueue, run_worker, udf
from lakeshore.data import KVInterface
from lakeshore.data import Queue as DataQueue
from tests.conftest import PLANES, Planes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=PLANES)
def d(request: pytest.FixtureRequest, planes: Planes) -> HttpDispatch:
    return planes.get(str(request.param))


# -- item 5: a target the client cannot serve is refused, never a SQLite file named after it


@pytest.mark.parametrize(
    "target",
    [
        "postgres://lake:secret@db.example:5432/lake",
        "postgresql://db/lake?password=secret",
        "redis://:secret@r:6379/0",
        "s3://bucket/x",
        # Before, these two were a SQLite file named after the string (the second a
        # directory " postgres:" too), and HttpDispatch's refusal showed their password.
        "host=db.example port=5432 user=lake password=secret dbname=lake",
        " postgres://lake:secret@db.example/lake",
        # A URL without its "//": before, LocalDispatch made a SQLite file of that name in
        # the working directory (the second a directory "postgres:"), password and all.
        "postgres:lake:secret@db.example",
        "Postgres:/lake:secret@db.example/lake",
        "http:127.0.0.1:7077",
    ],
)
def test_non_http_urls_are_refused(target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for make in (
        lambda: lakeshore.Dispatch(target),
        lambda: LocalDispatch(target),
        lambda: HttpDispatch(target),
        lambda: DataQueue("q", storage_path=target),
    ):
        with pytest.raises(InvalidError) as e:
            make()
        assert "secret" not in str(e.value), "the message shows the target redacted"
        assert "http://" in str(e.value), "it says what is accepted"
    if target.startswith("postgres"):
        with pytest.raises(InvalidError, match="lakeshore serve --target"):
            lakeshore.Dispatch(target)
    assert list(tmp_path.iterdir()) == [], "nothing was made for it"


def test_the_postgres_hint_keeps_the_password_off_the_command_line() -> None:
    """The refusal of a ``postgres://`` target tells how to serve it: ``lakeshore serve
    --target`` with the URL *without* its password (PGPASSWORD or ~/.pgpass), since a
    command line is read by every user of the machine. Before, it suggested
    ``LAKESHORE_URL=postgres://… lakeshore serve``, which serve never reads (it served its
    SQLite file instead), and the keyword/value refusal a URL with its password."""
    for target in ("postgres://lake:secret@db/lake", "host=db user=lake password=secret"):
        with pytest.raises(InvalidError) as e:
            lakeshore.Dispatch(target)
        msg = str(e.value)
        assert "PGPASSWORD" in msg, msg
        assert "LAKESHORE_URL=postgres" not in msg, msg
        hint = msg[msg.index("lakeshore serve --target") :]
        assert "secret" not in hint and "xxxxx" not in hint and ":password@" not in hint, hint


def test_lakeshore_url_postgres_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKESHORE_URL", "postgres://lake:secret@db/lake")
    monkeypatch.setattr(lakeshore.dispatch, "_default", None)
    with pytest.raises(InvalidError, match="LAKESHORE_URL|url"):
        lakeshore.default_dispatch()


# -- item 7: a failing body logs its traceback on every attempt


def test_a_failing_body_logs_its_traceback(d: HttpDispatch, qname: str, caplog: pytest.LogCaptureFixture) -> None:
    @udf(queue=qname, dispatch=d, max_attempts=2)
    def broken(x: int) -> int:
        raise ValueError(f"bad input {x}")

    inv = broken.submit(x=7)
    with caplog.at_level(logging.WARNING, logger="lakeshore"):
        assert run_worker(d, queues=[broken], once=True, wait=5) == 1
        assert run_worker(d, queues=[broken], once=True, wait=5) == 1
    failed = [r for r in caplog.records if inv in r.getMessage() and "failed" in r.getMessage()]
    assert len(failed) == 2, caplog.text
    assert failed[0].levelno == logging.WARNING
    assert "attempt 1" in failed[0].getMessage() and "will be retried" in failed[0].getMessage()
    assert "attempt 2" in failed[1].getMessage() and "no retry" in failed[1].getMessage()
    assert failed[0].exc_info is not None and "bad input 7" in caplog.text and "raise ValueError" in caplog.text


def test_readme_python_snippet_runs(lakeshore_bin: str) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## From Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    home = Path(tempfile.mkdtemp(prefix="ls-readme-"))
    env = dict(os.environ, LAKESHORE_BIN=lakeshore_bin, LAKESHORE_HOME=str(home))
    env.pop("LAKESHORE_URL", None)
    try:
        r = subprocess.run([sys.executable, "-c", code.group(1)], cwd=home, env=env, capture_output=True, text=True, timeout=60)
    finally:
        from lakeshore import _daemon

        for sock in home.glob("run/*/daemon.sock"):
            _daemon._request(str(sock), "POST", "/v1/daemon/stop")
        shutil.rmtree(home, ignore_errors=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "[5.0, 2.0]", r.stdout + r.stderr


# -- item 9: NotFoundError names the id and the likely causes


def test_not_found_names_the_id(d: HttpDispatch, qname: str) -> None:
    q = SyncQueue(qname, dispatch=d)
    unknown = "01J" + "0" * 23
    for what, call in (
        ("result", lambda: q.result(unknown, timeout=0.5)),
        ("cancel", lambda: q.cancel(unknown)),
        ("stream", lambda: list(q.stream(unknown, timeout=0.5))),
    ):
        with pytest.raises(NotFoundError) as e:
            call()
        assert unknown in str(e.value), what
        assert "retention" in str(e.value) and "namespace" in str(e.value), what
        assert e.value.code == "not_found"


# -- item 11: a read of the default partition says where the records are


def test_get_without_partition_names_the_other_partitions(d: HttpDispatch, qname: str, caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        q = DataQueue(qname, dispatch=d)
        await q.put_batch([{"i": i} for i in range(8)], partition_id="train_0")
        await q.flush()
        with caplog.at_level(logging.WARNING, logger="lakeshore.data"):
            assert await q.get(limit=100) == []
        assert "train_0" in caplog.text and "partition_id=" in caplog.text, caplog.text
        assert len(await q.get(limit=100, partition_id="train_0")) == 8

    asyncio.run(main())


# -- item 12: reader ranks default to RANK / WORLD_SIZE


def test_reader_rank_from_environment(d: HttpDispatch, qname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    q = DataQueue(qname, dispatch=d)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    r = q.reader()
    assert (r.rank, r.world_size) == (0, 1)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    r = q.reader()
    assert (r.rank, r.world_size) == (3, 4)
    assert (q.reader(1, 2).rank, q.reader(1, 2).world_size) == (1, 2), "explicit arguments win"
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(InvalidError, match="RANK"):
        q.reader()


# -- item 13: a tag-only KV update merges the tag and keeps the data


def test_tag_only_kv_put(d: HttpDispatch, qname: str) -> None:
    pytest.importorskip("pyarrow")

    async def main() -> None:
        q = DataQueue(qname, dispatch=d)
        kv = KVInterface(q)
        i = await kv.kv_put("k1", {"score": 1.5}, partition_id="prod", tag={"status": "new"})
        assert await kv.kv_put("k1", data=None, partition_id="prod", tag={"model": "llama"}) == i
        (e,) = await kv.kv_list(partition_id="prod")
        assert e[1] == {"status": "new", "model": "llama"}
        (rec,) = await kv.kv_batch_get(["k1"], partition_id="prod")
        assert rec["score"] == 1.5
        with pytest.raises(InvalidError):
            await kv.kv_put("k1", data=None, partition_id="prod")
        with pytest.raises(InvalidError):
            await kv.kv_put("k1", data=[1, 2], partition_id="prod")  # type: ignore[arg-type]

    asyncio.run(main())


# -- item 14: packaging


def test_pyarrow_is_installed_by_the_readme_command() -> None:
    project = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("pyarrow") for d in project["optional-dependencies"]["data"])
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e 'python[data,test]'" in readme
    assert ".venv/" in (ROOT / ".gitignore").read_text().split()


def test_printed_urls_are_redacted() -> None:
    from lakeshore._transport import redact_url

    assert redact_url("http://user:secret@h:7077/x?token=secret&a=1") == "http://user:xxxxx@h:7077/x?token=xxxxx&a=1"
    assert redact_url("postgres://lake:secret@db/lake?sslpassword=secret") == "postgres://lake:xxxxx@db/lake?sslpassword=xxxxx"
    assert redact_url("/home/me/lakeshore.db") == "/home/me/lakeshore.db"
    # A libpq keyword string's password, and a URL with white space around it (printed
    # whole before), as the Go side's plane.RedactURL.
    assert redact_url("host=db password='se cret' dbname=lake") == "host=db password=xxxxx dbname=lake"
    assert redact_url(" postgres://lake:secret@db/lake\n") == " postgres://lake:xxxxx@db/lake\n"
    # A password holding '/', '?' or '#' after digits: the URL parses with part of the password
    # as host and port (printed whole before): masked up to its last "@".
    for cut, want in [
        ("postgres://u:9731#secret@h/db", "postgres://xxxxx@h/db"),
        ("postgres://u:9731/secret@h/db", "postgres://xxxxx@h/db"),
        ("postgres://u:9731?secret@h/db?token=secret", "postgres://xxxxx@h/db?token=xxxxx"),
        ("http://u:9731@secret#secret@h:7077", "http://xxxxx@h:7077"),
        ("postgres://db:5432/lake?user=me@example", "postgres://xxxxx@example"),
        # The query's secrets after the last "@" stay masked (the first version printed them).
        ("https://host:443/p?email=a@b&token=secret", "https://xxxxx@b&token=xxxxx"),
        ("https://u:pw@host/p?email=a@b&access_token=secret", "https://xxxxx@b&access_token=xxxxx"),
        ("postgres://u:9731#secret@h:5432/db?token=secret", "postgres://xxxxx@h:5432/db?token=xxxxx"),
        ("postgres://h:5432/db?user=me@example&session_token=secret", "postgres://xxxxx@example&session_token=xxxxx"),
    ]:
        assert redact_url(cut) == want, cut
    assert redact_url("postgres://db/lake?user=me@example") == "postgres://db/lake?user=me@example"
    # A URL written without its "://": printed whole before (the Go side's TestRedactURL rows).
    for mistyped, want in [
        ("postgres:/lake:secret@db:5432/lake", "postgres:/xxxxx@db:5432/lake"),
        ("postgres//lake:secret@db/lake", "postgres//xxxxx@db/lake"),
        ("postgres:lake:secret@db/lake", "postgres:xxxxx@db/lake"),
        ("lake:secret@db/lake", "lake:xxxxx@db/lake"),
        ("./postgres://lake:secret@db/lake", "xxxxx@db/lake"),
        ("user@example.com", "user@example.com"),
        ("ghcr.io/org/img:v1@sha256:e3b0c44298fc1c149afbf4c8996fb924", "ghcr.io/org/img:v1@sha256:e3b0c44298fc1c149afbf4c8996fb924"),
        ("postgres:lake:secret@[::1]:5432/lake", "postgres:xxxxx@[::1]:5432/lake"),
    ]:
        assert redact_url(mistyped) == want, mistyped
    d = HttpDispatch("http://user:secret@127.0.0.1:9", retry_for=0.0)
    try:
        assert "secret" not in repr(d)
        with pytest.raises(lakeshore.errors.UnavailableError) as e:
            SyncQueue("q", dispatch=d).count()
        assert "secret" not in str(e.value) and "xxxxx" in str(e.value)
    finally:
        d.close()


def test_password_cut_at_question_mark_is_redacted() -> None:
    """A password holding '?' unescaped puts the rest of the URL in a parameter's value
    (``postgres://u:12?a=b@h/db``): masked up to its last "@", the same rows as the Go side's
    ``TestURLAuthorityCutQuery`` (plane/redact_test.go), where the server refuses such a URL."""
    from lakeshore._transport import redact_url

    for cut, want in [
        ("postgres://u:12?a=b@h/db", "postgres://xxxxx@h/db"),
        ("postgres://u:12?a=b@h", "postgres://xxxxx@h"),
        ("postgres://u:12/x?a=b@h/db", "postgres://xxxxx@h/db"),
        ("postgres://u:pw@h:5432?user=me@example", "postgres://xxxxx@example"),
        ("postgres://db:5432/lake?user=me@example", "postgres://xxxxx@example"),
    ]:
        assert redact_url(cut) == want, cut
