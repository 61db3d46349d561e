"""Scopes: a prefix in a blob store through which bodies read and write files, so that file
bytes never ride the wire (the payload carries keys)::

    from lakeshore import scope, run

    with scope("scene7"):                                  # file://$LAKESHORE_HOME/blobs/scene7/
        mesh = run.write("process/mesh.ply")               # a local path to write at
        extract_mesh(run.read("splats.ply")).save(mesh)    # read: a local path to read
        key = run.write_bytes("frames/0001.png", data)     # bytes in, the key out
        data = run.read_bytes(key)

``run.write(key)`` and ``run.read(key)`` answer local paths as dreamlake-lakeshore's
``dls.run.write``/``read`` do (issue 24, semantics 4). On a directory store the path *is*
the blob (nothing is copied). On ``mem://``, ``s3://`` and ``gs://`` stores ``write`` hands
out a path in a staging directory of the scope and the scope uploads what was written there
when its ``with`` block ends without an exception (``publish(key)`` uploads one key at once,
``flush()`` all of them); ``read`` downloads the key into the staging directory on first use.
``write(key, data)`` keeps the bytes form (stores ``data``, returns the key).

Stores (``store=``, or ``$LAKESHORE_STORE``):

- ``None`` / ``""``: ``file://$LAKESHORE_HOME/blobs`` (``~/.lakeshore/blobs``), the Go
  SDK's default (package ``scope``), so Go and Python bodies on one machine share files;
- ``file:///dir`` or a plain directory path: files under that directory, written atomically
  (a temporary file renamed into place) by the bytes form;
- ``mem://``: a store in this process's memory (tests).

- ``s3://bucket?region=…&endpoint=…&disable_https=true&use_path_style=true`` and
  ``gs://bucket``: an object store through ``pyarrow.fs`` (the ``data`` extra), the URLs of
  the Go SDK's stores (gocloud.dev/blob): the same bucket and prefix name the same objects
  from Go and Python. Credentials come from the environment as for the AWS and Google
  clients (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``GOOGLE_APPLICATION_CREDENTIALS``).

``azblob://`` is served by the Go SDK only (pyarrow has no Azure filesystem in every build).
Keys follow the Go SDK's rules: relative, ``/``-separated, no empty, ``.`` or ``..``
segment, no backslash or NUL, valid UTF-8; nothing escapes the prefix.
"""

from __future__ import annotations

import contextvars
import os
import shutil
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import Any, overload
from urllib.parse import parse_qs, urlsplit

from lakeshore import errors

__all__ = ["Scope", "scope", "run"]

_mem: dict[str, bytes] = {}
_mem_lock = threading.Lock()


def _check_key(what: str, key: object) -> str:
    ok = isinstance(key, str) and key != "" and "\x00" not in key and "\\" not in key and not key.startswith("/")
    if ok:
        assert isinstance(key, str)
        ok = all(seg not in ("", ".", "..") for seg in key.split("/"))
        try:
            key.encode("utf-8")
        except UnicodeEncodeError:
            ok = False
    if not ok:
        raise errors.InvalidError(
            f"invalid {what} {key!r}: a relative '/'-separated path without empty, '.' or '..' segments, "
            "backslashes or NUL",
            field=what,
            value=str(key),
            rule="a relative key inside the scope",
        )
    assert isinstance(key, str)
    return key


class Scope:
    """A prefix in a blob store (see the module's doc for the stores)."""

    def __init__(self, prefix: str = "", store: str | None = None) -> None:
        if prefix:
            prefix = _check_key("prefix", prefix.rstrip("/"))
        self.prefix = prefix
        store = store if store is not None else os.environ.get("LAKESHORE_STORE", "")
        self.store = store
        self._root: Path | None
        self._fs: Any = None  # a pyarrow.fs.FileSystem for s3:// and gs://
        self._bucket = ""
        if store == "mem://":
            self._root = None
        elif store == "":
            home = Path(os.environ.get("LAKESHORE_HOME") or Path.home() / ".lakeshore")
            self._root = home / "blobs"
        elif store.startswith("file://"):
            self._root = Path(store[len("file://") :])
        elif store.startswith(("s3://", "gs://")):
            self._root = None
            self._fs, self._bucket = _object_store(store)
        elif "://" in store:
            raise errors.InvalidError(
                f"unsupported store {store!r}: the Python SDK reads and writes file:// directories, s3:// and gs:// "
                "buckets and mem:// (other stores are served by the Go SDK's scope package)",
                field="store",
                value=store,
                rule="file:///dir, a directory path, s3://bucket, gs://bucket or mem://",
            )
        else:
            self._root = Path(store)
        self._token: contextvars.Token[Scope | None] | None = None
        self._staging: Path | None = None  # mem:// and object stores: local copies
        self._staged: dict[str, Path] = {}  # keys handed out by write(key), not uploaded yet

    def __repr__(self) -> str:
        return f"Scope({self.prefix!r}, store={self.store or 'file://$LAKESHORE_HOME/blobs'!r})"

    def _name(self, key: str) -> str:
        key = _check_key("key", key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _local(self, key: str) -> Path | None:
        """The path of ``key`` on a directory store, None on the others."""
        return None if self._root is None else self._root / self._name(key)

    def _stage(self, key: str) -> Path:
        """The staging path of ``key`` (mem:// and object stores), its directories made."""
        name = self._name(key)
        if self._staging is None:
            self._staging = Path(tempfile.mkdtemp(prefix="lakeshore-scope-"))
        path = self._staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    @overload
    def write(self, key: str, data: None = None, *, dir: bool = False) -> Path: ...

    @overload
    def write(self, key: str, data: bytes | bytearray | memoryview | str, *, dir: bool = False) -> str: ...

    def write(self, key: str, data: bytes | bytearray | memoryview | str | None = None, *, dir: bool = False) -> Path | str:
        """Without ``data``: the local path to write ``key`` at (its parent directories made;
        with ``dir=True`` the directory itself, whose files become ``key/…``). On a directory
        store the path is the blob; on the others it is staged and uploaded when the scope's
        ``with`` block ends without an exception, or at :meth:`publish`/:meth:`flush`.
        With ``data`` (str is written as UTF-8): store it at ``key`` now and return ``key``
        (:meth:`write_bytes`)."""
        if data is not None:
            return self.write_bytes(key, data)
        path = self._local(key)
        if path is None:
            path = self._stage(key)
            self._staged[self._name(key)] = path
        if dir:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def read(self, key: str) -> Path:
        """The local path holding ``key``: the blob itself on a directory store, else a copy
        downloaded into the scope's staging directory on first use (or what ``write(key)``
        staged). Raises NotFoundError when there is none."""
        path = self._local(key)
        if path is not None:
            if not path.exists():
                raise self._not_found(key)
            return path
        name = self._name(key)
        staged = self._staged.get(name)
        if staged is not None and staged.exists():
            return staged
        path = self._stage(key)
        if not path.exists():
            data = self.read_bytes(key)
            tmp = path.with_name(path.name + ".part")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return path

    def publish(self, key: str) -> str:
        """Upload what was written at ``write(key)``'s path now, during the run (a no-op on a
        directory store, where the path is the blob); return ``key``. Raises NotFoundError
        when nothing was written there."""
        name = self._name(key)
        path = self._staged.get(name)
        if path is None:
            if self._root is not None:
                return key
            raise self._not_found(key)
        if path.is_dir():
            for f in sorted(p for p in path.rglob("*") if p.is_file()):
                self.write_bytes(f"{key}/{f.relative_to(path).as_posix()}", f.read_bytes())
        elif path.exists():
            self.write_bytes(key, path.read_bytes())
        else:
            raise errors.NotFoundError(f"publish {key!r}: nothing was written at {path}")
        del self._staged[name]
        return key

    def flush(self) -> list[str]:
        """Upload every staged write (:meth:`publish` each) and return their keys, in the
        order they were handed out. A staged path the body never wrote is skipped."""
        done = []
        prefix = f"{self.prefix}/" if self.prefix else ""
        for name, path in list(self._staged.items()):
            if not path.exists():
                del self._staged[name]
                continue
            key = name[len(prefix) :]
            done.append(self.publish(key))
        return done

    def close(self) -> None:
        """Drop the staging directory (staged writes not yet uploaded are lost)."""
        self._staged.clear()
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None

    def _not_found(self, key: str) -> errors.NotFoundError:
        return errors.NotFoundError(f"no blob {key!r} in scope {self.prefix!r} of {self.store or 'the default store'}")

    def write_bytes(self, key: str, data: bytes | bytearray | memoryview | str) -> str:
        """Store ``data`` (str is written as UTF-8) at ``key``, replacing it; return ``key``."""
        name = self._name(key)
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if self._fs is not None:
            try:
                with self._fs.open_output_stream(f"{self._bucket}/{name}") as f:
                    f.write(raw)
            except OSError as e:
                raise errors.UnavailableError(f"write {key!r} to {self.store}: {e}", code="unavailable") from e
            return key
        if self._root is None:
            with _mem_lock:
                _mem[name] = raw
            return key
        path = self._root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(raw)
            os.replace(tmp, path)
        except BaseException:
            with _suppress():
                os.unlink(tmp)
            raise
        return key

    def read_bytes(self, key: str) -> bytes:
        """The bytes at ``key``. Raises NotFoundError when there is none."""
        name = self._name(key)
        if self._fs is not None:
            try:
                with self._fs.open_input_stream(f"{self._bucket}/{name}") as f:
                    data = bytes(f.read())
            except FileNotFoundError:
                data = None
            except OSError as e:
                if "NoSuchKey" in str(e) or "does not exist" in str(e) or "Path does not exist" in str(e):
                    data = None
                else:
                    raise errors.UnavailableError(f"read {key!r} from {self.store}: {e}", code="unavailable") from e
        elif self._root is None:
            with _mem_lock:
                data = _mem.get(name)
        else:
            try:
                data = (self._root / name).read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                data = None
        if data is None:
            raise self._not_found(key)
        return data

    def exists(self, key: str) -> bool:
        """Whether ``key`` holds a blob."""
        try:
            self.read_bytes(key)
        except errors.NotFoundError:
            return False
        return True

    def __enter__(self) -> Scope:
        self._token = _current.set(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None
        try:
            if exc_type is None:
                self.flush()
        finally:
            self.close()


def _object_store(store: str) -> tuple[Any, str]:
    """A pyarrow filesystem and bucket name for an s3:// or gs:// URL of gocloud.dev/blob."""
    u = urlsplit(store)
    q = {k: v[-1] for k, v in parse_qs(u.query).items()}
    if not u.netloc:
        raise errors.InvalidError(
            f"invalid store {store!r}: name a bucket ({u.scheme}://bucket)", field="store", value=store, rule="s3://bucket or gs://bucket"
        )
    try:
        import pyarrow.fs as pafs
    except ImportError as e:
        raise errors.InvalidError(
            f"store {store!r} needs pyarrow: pip install 'lakeshore-queue[data]'", field="store", value=store, rule="pyarrow installed"
        ) from e
    if u.scheme == "gs":
        return pafs.GcsFileSystem(), u.netloc
    kw: dict[str, Any] = {}
    if "region" in q:
        kw["region"] = q["region"]
    endpoint = q.get("endpoint")
    if endpoint:
        if endpoint.startswith(("http://", "https://")):
            scheme, _, endpoint = endpoint.partition("://")
            kw["scheme"] = scheme
        kw["endpoint_override"] = endpoint
    if q.get("disable_https") in ("true", "1"):
        kw["scheme"] = "http"
    if q.get("use_path_style") in ("true", "1") or q.get("s3ForcePathStyle") in ("true", "1"):
        kw["force_virtual_addressing"] = False
    return pafs.S3FileSystem(**kw), u.netloc


class _suppress:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


_current: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("lakeshore_scope", default=None)


def scope(prefix: str = "", store: str | None = None) -> Scope:
    """A scope: ``with scope(prefix):`` makes it the current one for :data:`run`."""
    return Scope(prefix, store)


class _Run:
    """``run.read`` / ``run.write`` through the current scope (``with scope(...)``)."""

    def current(self) -> Scope:
        """The current scope. Raises InvalidError outside one."""
        s = _current.get()
        if s is None:
            raise errors.InvalidError(
                "run.read/run.write outside a scope: wrap the body in `with lakeshore.scope(prefix):`",
                field="scope",
                rule="inside `with scope(...)`",
            )
        return s

    def read(self, key: str) -> Path:
        """The local path holding ``key`` in the current scope (:meth:`Scope.read`)."""
        return self.current().read(key)

    @overload
    def write(self, key: str, data: None = None, *, dir: bool = False) -> Path: ...

    @overload
    def write(self, key: str, data: bytes | bytearray | memoryview | str, *, dir: bool = False) -> str: ...

    def write(self, key: str, data: bytes | bytearray | memoryview | str | None = None, *, dir: bool = False) -> Path | str:
        """The local path to write ``key`` at in the current scope, or with ``data`` store it
        and return the key (:meth:`Scope.write`)."""
        if data is None:
            return self.current().write(key, dir=dir)
        return self.current().write_bytes(key, data)

    def read_bytes(self, key: str) -> bytes:
        """The bytes at ``key`` in the current scope."""
        return self.current().read_bytes(key)

    def write_bytes(self, key: str, data: bytes | bytearray | memoryview | str) -> str:
        """Store ``data`` at ``key`` in the current scope; return the key."""
        return self.current().write_bytes(key, data)

    def publish(self, key: str) -> str:
        """Upload ``write(key)``'s file now (:meth:`Scope.publish`); return the key."""
        return self.current().publish(key)


run = _Run()
"""Reads and writes through the current scope."""
