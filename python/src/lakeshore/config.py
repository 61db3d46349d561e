"""Compute modes: the project file ``lakeshore.yaml`` and the derived host key.

A project declares named compute modes, the providers they name and the code its runs
ship, in ``lakeshore.yaml`` (found in the working directory or the nearest parent that has
one; ``$LAKESHORE_CONFIG`` names another)::

    providers:
      slurm-gpu: {type: slurm, partition: gpu}
    modes:
      a100:
        resources: {cpus: 8, memory: 64GiB, gpus: 1, gpu_type: a100, labels: {zone: us-east}}
        setup: [pip install -r requirements.txt]     # once per worker environment
        run_setup: [mkdir -p /tmp/scratch]           # before each body
        env: {HF_HOME: /cache/hf}
        provider: slurm-gpu
        time_limit: 2h
    code:
      max_size: 50MB
      mounts: [{path: src, exclude: ["*.pyc", __pycache__]}]   # default: the git tree

``@udf(mode="a100")`` or ``submit(..., mode="a100")`` names a mode; the run declaration
travels with the invocation in its metadata (:data:`META_MODE`, :data:`META_HOST_KEY`,
:data:`META_RUN`, :data:`META_CODE`). The Go package ``fabric`` parses the same file the same
way and computes the same host key (``fabric/testdata/vectors.json``); docs/fabric.md has
the decisions.

Scalars are read by their text, not by YAML's type resolution (PyYAML resolves YAML 1.1,
Go's parser YAML 1.2), so that both SDKs read one file alike.
"""

from __future__ import annotations

import dataclasses
import hashlib
import ipaddress
import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "CONFIG_FILE",
    "ENV_CONFIG",
    "Config",
    "ConfigError",
    "Mode",
    "Resources",
    "Provider",
    "Host",
    "Code",
    "Mount",
    "find",
    "load",
    "load_file",
    "parse",
    "host_key",
    "declaration_host_key",
    "parse_cpus",
    "parse_memory",
    "parse_duration",
    "PROVIDER_TYPES",
    "META_MODE",
    "META_HOST_KEY",
    "META_RUN",
    "META_CODE",
    "META_FUNCTION",
    "META_GIT",
]

CONFIG_FILE = "lakeshore.yaml"
"""The project file's name."""
ENV_CONFIG = "LAKESHORE_CONFIG"
"""The environment variable naming the project file (no walking up)."""
DEFAULT_MAX_CODE_BYTES = 100 << 20
"""The compressed-size ceiling of a code archive when the file sets none (100 MiB)."""
PROVIDER_TYPES = ("exec", "kubernetes", "local", "slurm", "ssh")
"""The provider types a project file may declare."""

def host_address_problem(address: str) -> str:
    """What is wrong with ``address`` as the host of an ssh provider's inventory, as a sentence
    ("" when it is fine): it must be a host name or an IP address (v4 or v6, unbracketed), with
    no user (that is ``user:``), no port (that is ``port:``) and no spaces or slashes. The Go SDK
    (fabric.CheckHostAddress) gives the same answers."""
    if not address or any(c in address for c in " \t\r\n/@\x00"):
        return f"bad host {json.dumps(address)}: want a host name or an IP address (the user goes in user:)"
    if ":" in address:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            return f"bad host {json.dumps(address)}: want a host name or an IP address without a port (the port goes in port:)"
        return ""
    if not _HOST_NAME.match(address):
        # Errors print the host in a command to copy (ssh-keyscan … HOST >> known_hosts): a
        # name is only what a host name can be, so no copied line runs more than it says.
        return (
            f"bad host {json.dumps(address, ensure_ascii=False)}: want a host name (up to 253 of letters, digits, "
            '".", "-" and "_", starting with a letter, digit or "_") or an IP address'
        )
    return ""


_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}\Z")


def plane_url_problem(url: str) -> str:
    """What is wrong with ``url`` as a ``plane_url`` (the LAKESHORE_URL a provider's workers reach
    the plane by), as a sentence ("" when it is fine): it must be an http:// or https:// URL. The
    URL is not repeated (it may carry credentials), as fabric.CheckPlaneURL does."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("http", "https") or not rest or rest.startswith("/"):
        return 'bad plane_url: want an http:// or https:// URL of the plane ("http://10.0.0.5:7070")'
    return ""


HOST_KEYS = ("dir", "host", "key_file", "lakeshore", "offers", "plane_url", "pool", "port", "user", "workers")
"""The keys a host of an ssh provider's ``hosts:`` list may have (Go: ``fabric.HostKeys``)."""

META_MODE = "lakeshore.mode"
"""Invocation metadata: the mode's name."""
META_HOST_KEY = "lakeshore.host_key"
"""Invocation metadata: the mode's host key."""
META_RUN = "lakeshore.run"
"""Invocation metadata: the run declaration as JSON."""
META_CODE = "lakeshore.code"
"""Invocation metadata: the digest of the code shipped with the run."""
META_FUNCTION = "lakeshore.function"
"""Invocation metadata: the function a shipped-code run imports (``module:qualname``)."""
META_GIT = "lakeshore.git"
"""Invocation metadata: the git context of the shipped code as JSON
(:class:`lakeshore.code.GitContext`: commit, branch, dirty, diff_sha256, submodules)."""

HOST_KEY_PREFIX = "hk1_"


class ConfigError(ValueError):
    """A project file that cannot be used: its ``file``, ``line`` (0: unknown), the
    field's dotted path, what was wrong and, when the field takes one of a set, the
    ``allowed`` values. ``code`` is ``"invalid_config"`` (as the Go SDK's)."""

    code = "invalid_config"

    def __init__(self, file: str, line: int, field: str, message: str, allowed: tuple[str, ...] | list[str] = ()) -> None:
        self.file, self.line, self.field, self.message, self.allowed = file, line, field, message, tuple(allowed)
        text = file + (f":{line}" if line > 0 else "") + ": " + (f"{field}: " if field else "") + message
        if self.allowed:
            text += " (allowed: " + ", ".join(self.allowed) + ")"
        super().__init__(text)


@dataclasses.dataclass(frozen=True)
class Resources:
    """What a run needs from its worker: ``milli_cpus`` (CPUs × 1000), ``memory_bytes``,
    ``gpus``, ``gpu_type`` and free-form ``labels`` (0 / "" / empty: unspecified)."""

    milli_cpus: int = 0
    memory_bytes: int = 0
    gpus: int = 0
    gpu_type: str = ""
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def requirement(self) -> dict[str, Any] | None:
        """These resources as a submit's ``requires`` (placement, docs/semantics.md): the
        wire's fields ``cpus_milli``, ``memory_bytes``, ``gpus``, ``gpu_type``,
        ``labels``, only those set; None when none is (the default shape, which every
        worker takes). Go: ``fabric.Resources.Requirement``."""
        out: dict[str, Any] = {}
        if self.milli_cpus:
            out["cpus_milli"] = self.milli_cpus
        if self.memory_bytes:
            out["memory_bytes"] = self.memory_bytes
        if self.gpus:
            out["gpus"] = self.gpus
        if self.gpu_type:
            out["gpu_type"] = self.gpu_type
        if self.labels:
            out["labels"] = dict(self.labels)
        return out or None


@dataclasses.dataclass(frozen=True)
class Mode:
    """One compute mode: the run declaration a submit names.

    Attributes:
        name: the mode's name.
        resources: what a run needs.
        setup: shell commands run once per worker environment (host key and code digest),
            in the code's directory, before its first body.
        run_setup: shell commands run before each body.
        env: environment variables of each body (and its run_setup), not of setup.
        provider: the provider that launches workers for it ("" : none).
        time_limit: seconds one attempt may take (0: no limit); sent as the attempt timeout.
        code: whether a submit ships the submitter's code.
    """

    name: str
    resources: Resources = Resources()
    setup: tuple[str, ...] = ()
    run_setup: tuple[str, ...] = ()
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    provider: str = ""
    time_limit: int = 0
    code: bool = False

    @property
    def host_key(self) -> str:
        """The mode's host key (:func:`host_key`)."""
        return host_key(self)

    def declaration(self) -> dict[str, Any]:
        """The run declaration stored under :data:`META_RUN` (the Go SDK's
        ``fabric.RunDeclaration``: units spelled out, empty fields left out)."""
        r = self.resources
        out: dict[str, Any] = {"mode": self.name}
        for k, v in (
            ("provider", self.provider),
            ("cpus_milli", r.milli_cpus),
            ("memory_bytes", r.memory_bytes),
            ("gpus", r.gpus),
            ("gpu_type", r.gpu_type),
            ("labels", dict(r.labels)),
            ("setup", list(self.setup)),
            ("run_setup", list(self.run_setup)),
            ("env", dict(self.env)),
            ("time_limit", self.time_limit),
        ):
            if v:
                out[k] = v
        out["host_key"] = self.host_key
        return out

    def metadata(self, code_digest: str = "") -> dict[str, str]:
        """The invocation metadata of a run of the mode; ``code_digest`` adds
        :data:`META_CODE`."""
        md = {
            META_MODE: self.name,
            META_HOST_KEY: self.host_key,
            META_RUN: json.dumps(self.declaration(), sort_keys=True, separators=(",", ":")),
        }
        if code_digest:
            md[META_CODE] = code_digest
        return md


@dataclasses.dataclass(frozen=True)
class Host:
    """One machine of an ssh provider's inventory: its ``options`` as strings (keys of
    :data:`HOST_KEYS` but ``offers``; ``host`` is always there) and what it ``offers``."""

    options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    offers: Resources = dataclasses.field(default_factory=lambda: Resources())


@dataclasses.dataclass(frozen=True)
class Provider:
    """A declared provider: its ``name``, ``type`` (one of :data:`PROVIDER_TYPES`),
    ``options`` as strings and, for type ssh, its inventory ``hosts``. The supervisor
    (Go) launches through it; the Python SDK reads it only to check the file."""

    name: str
    type: str
    options: Mapping[str, str] = dataclasses.field(default_factory=dict)
    hosts: tuple[Host, ...] = ()


@dataclasses.dataclass(frozen=True)
class Mount:
    """A directory to ship, relative to the project root, filtered by ``include`` and
    ``exclude`` patterns (see :mod:`lakeshore.code`)."""

    path: str
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Code:
    """The code section: ``mounts`` (empty: the git tree) and the compressed-size ceiling
    ``max_bytes``."""

    mounts: tuple[Mount, ...] = ()
    max_bytes: int = DEFAULT_MAX_CODE_BYTES


@dataclasses.dataclass(frozen=True)
class Config:
    """A parsed project file: its ``file`` and ``dir`` (the project root), ``modes``,
    ``providers`` and ``code`` (None: no code section)."""

    file: str
    dir: str
    modes: Mapping[str, Mode]
    providers: Mapping[str, Provider]
    code: Code | None = None

    def mode(self, name: str) -> Mode:
        """The mode named ``name``.

        Raises:
            ConfigError: no such mode (its ``allowed`` lists the modes there are)."""
        m = self.modes.get(name)
        if m is None:
            msg = f"no mode {json.dumps(name)}" + ("" if self.modes else " (the file declares no modes)")
            raise ConfigError(self.file, 0, "modes", msg, sorted(self.modes))
        return m


def find(start: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Path | None:
    """The project file: ``$LAKESHORE_CONFIG`` when set, else ``lakeshore.yaml`` in
    ``start`` (default: the working directory) or its nearest parent that has one; None
    when there is none. A file found in a parent directory must belong to the user running
    this, or to root: the walk up never takes a file another user left above the working
    directory (a ``/tmp/lakeshore.yaml`` on a shared machine), as Go's ``fabric.Find``.

    Raises:
        ConfigError: a parent's file belongs to another user (naming it, and
            ``$LAKESHORE_CONFIG`` to take it anyway)."""
    env = os.environ if environ is None else environ
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]).absolute()
    d = Path(start if start is not None else os.getcwd()).absolute()
    for p in (d, *d.parents):
        f = p / CONFIG_FILE
        if f.is_file():
            owner = f.stat().st_uid if hasattr(os, "getuid") else None
            if p != d and owner is not None and owner not in (os.getuid(), 0):
                raise ConfigError(
                    str(f), 0, "",
                    f"found above the working directory {d}, and it belongs to another user (uid {owner}): "
                    f"refusing a project file someone else may have left there; set {ENV_CONFIG}={f} to use it, "
                    f"or put a {CONFIG_FILE} in your project",
                )  # fmt: skip
            return f
    return None


_cache: dict[Path, tuple[int, int, Config]] = {}


def load(start: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Find (:func:`find`) and read the project file (cached by its modification time).

    Raises:
        ConfigError: none found, or it cannot be used."""
    p = find(start, environ)
    if p is None:
        where = Path(start if start is not None else os.getcwd()).absolute()
        raise ConfigError(str(where), 0, "", f"no {CONFIG_FILE} here or in a parent directory (set {ENV_CONFIG} to name one)")
    return load_file(p)


def load_file(path: str | os.PathLike[str]) -> Config:
    """Read and parse the project file at ``path`` (cached by modification time and size).

    Raises:
        ConfigError: a missing file, or one that cannot be used."""
    p = Path(path).absolute()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ConfigError(str(p), 0, "", "no such file") from None
    hit = _cache.get(p)
    if hit is not None and hit[0] == st.st_mtime_ns and hit[1] == st.st_size:
        return hit[2]
    c = parse(str(p), p.read_text(encoding="utf-8"))
    _cache[p] = (st.st_mtime_ns, st.st_size, c)
    return c


# ------------------------------------------------------------------------------ values

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\Z")
_LABEL_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,62}\Z")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CPUS = re.compile(r"([0-9]+)(?:\.([0-9]{1,3}))?\Z|([0-9]+)m\Z")
_MEMORY = re.compile(r"([0-9]+) ?(B|K|KB|Ki|KiB|M|MB|Mi|MiB|G|GB|Gi|GiB|T|TB|Ti|TiB)?\Z")
_DURATION = re.compile(r"(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?\Z")
_DIGITS = re.compile(r"[0-9]+\Z")

TIME_LIMIT_MAX = (1 << 32) - 1
"""The longest time limit, in seconds (about 136 years), in every spelling (Go's
``fabric.TimeLimitMax``)."""
_TIME_LIMIT_TOO_LARGE = "too large: at most 4294967295 seconds (1193046h28m15s)"
_NUL_VALUE = (
    "holds a NUL byte (\\0): no value of the project file may (a command, an environment value or a path cannot carry one)"
)
_LABEL_VALUE_RULE = "use 0-255 bytes of printable UTF-8 without control characters"

_UNITS = {
    None: 1, "B": 1,
    "K": 10**3, "KB": 10**3, "Ki": 1 << 10, "KiB": 1 << 10,
    "M": 10**6, "MB": 10**6, "Mi": 1 << 20, "MiB": 1 << 20,
    "G": 10**9, "GB": 10**9, "Gi": 1 << 30, "GiB": 1 << 30,
    "T": 10**12, "TB": 10**12, "Ti": 1 << 40, "TiB": 1 << 40,
}  # fmt: skip


def valid_label_value(v: str) -> bool:
    """Whether ``v`` may be a label's value: at most 255 bytes of UTF-8 without control
    characters (Go's ``plane.ValidLabelValue``)."""
    if len(v.encode("utf-8", "surrogatepass")) > 255:
        return False
    return not any(c == "\ufffd" or ord(c) < 0x20 or ord(c) == 0x7F or 0x80 <= ord(c) < 0xA0 or 0xD800 <= ord(c) < 0xE000 for c in v)


def _over(digits: str, limit: int) -> bool:
    """Whether the ASCII digits ``digits`` are a number over ``limit`` (without reading a
    number longer than Python's int conversion takes)."""
    return len(digits.lstrip("0")) > len(str(limit)) or int(digits) > limit


def parse_cpus(s: str) -> int:
    """A CPU count (``"8"``, ``"0.5"``, ``"500m"``) as millicpus.

    Raises:
        ValueError: saying what is allowed."""
    m = _CPUS.match(s)
    if m is None or (m.group(3) and _over(m.group(3), 1 << 40)) or (m.group(1) and _over(m.group(1), 1 << 30)):
        raise ValueError('want a CPU count: a number with at most 3 decimals ("2", "0.5") or millicpus ("500m")')
    if m.group(3):
        return int(m.group(3))
    return int(m.group(1)) * 1000 + int((m.group(2) or "").ljust(3, "0"))


def parse_memory(s: str) -> int:
    """A size (``"16GiB"``, ``"512MB"``, ``"1073741824"``) as bytes: K, M, G, T powers of
    1000, Ki, Mi, Gi, Ti powers of 1024.

    Raises:
        ValueError: saying what is allowed."""
    m = _MEMORY.match(s)
    if m is None:
        raise ValueError(
            "want a size: an integer with an optional unit B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)"
        )
    if _over(m.group(1), 1 << 50):
        raise ValueError("too large")
    n, unit = int(m.group(1)), _UNITS[m.group(2)]
    if n > (1 << 62) // unit:
        raise ValueError("too large")
    return n * unit


def parse_duration(s: str) -> int:
    """A time limit as seconds: ``"3600"`` or hours, minutes, seconds (``"1h30m"``).

    Raises:
        ValueError: saying what is allowed."""
    if _DIGITS.match(s):
        if _over(s, TIME_LIMIT_MAX):
            raise ValueError(_TIME_LIMIT_TOO_LARGE)
        return int(s)
    m = _DURATION.match(s)
    if m is None or not s:
        raise ValueError('want seconds ("3600") or hours, minutes, seconds ("2h", "1h30m", "90s")')
    total = 0
    for g, unit in zip(m.groups(), (3600, 60, 1)):
        if g:
            if _over(g, 1 << 30):
                raise ValueError("too large")
            total += int(g) * unit
    if total > TIME_LIMIT_MAX:
        raise ValueError(_TIME_LIMIT_TOO_LARGE)
    return total


def host_key(mode: Mode) -> str:
    """Same key ⇒ two runs may share a warm worker: ``"hk1_"`` and the first 16 bytes of
    the SHA-256 of a canonical text of the provider, the resources and the setup commands
    (not env, run_setup, the time limit or the code), in hex. The Go SDK's
    ``fabric.HostKey`` computes the same; docs/fabric.md gives the text."""
    r = mode.resources
    return _host_key(mode.provider, r.milli_cpus, r.memory_bytes, r.gpus, r.gpu_type, r.labels, mode.setup)


def declaration_host_key(declaration: Mapping[str, Any]) -> str:
    """The host key of a run declaration (the ``lakeshore.run`` metadata, as
    :meth:`Mode.declaration` writes it), computed from its fields: a worker keys the
    set-ups it did by this, never by the ``host_key`` the declaration states (a submitter
    writes that, and could name another run's key to make it skip its set-up).

    Raises:
        ValueError: a field of the wrong type."""
    labels = declaration.get("labels") or {}
    setup = declaration.get("setup") or []
    if not isinstance(labels, Mapping) or not isinstance(setup, list):
        raise ValueError("a run declaration's labels must be a mapping and its setup a list")
    return _host_key(
        str(declaration.get("provider") or ""),
        int(declaration.get("cpus_milli") or 0),
        int(declaration.get("memory_bytes") or 0),
        int(declaration.get("gpus") or 0),
        str(declaration.get("gpu_type") or ""),
        {str(k): str(v) for k, v in labels.items()},
        [str(c) for c in setup],
    )


def _host_key(provider: str, milli_cpus: int, memory_bytes: int, gpus: int, gpu_type: str,
              labels: Mapping[str, str], setup: Sequence[str]) -> str:
    parts = ["lakeshore host key 1\n"]

    def field(name: str, value: str) -> None:
        b = value.encode("utf-8")
        parts.append(f"{name} {len(b)}:{value}\n")

    field("provider", provider)
    field("cpus_milli", str(milli_cpus))
    field("memory_bytes", str(memory_bytes))
    field("gpus", str(gpus))
    field("gpu_type", gpu_type)
    for k in sorted(labels, key=lambda k: k.encode("utf-8")):
        field("label", f"{k}={labels[k]}")
    for s in setup:
        field("setup", s)
    return HOST_KEY_PREFIX + hashlib.sha256("".join(parts).encode("utf-8")).hexdigest()[:32]


# ------------------------------------------------------------------------------ the parser

_NULL = "tag:yaml.org,2002:null"


class _Parser:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, node: yaml.Node | None, field: str, message: str, allowed: tuple[str, ...] | list[str] = ()) -> ConfigError:
        line = node.start_mark.line + 1 if node is not None else 0
        return ConfigError(self.file, line, field, message, allowed)

    @staticmethod
    def join(field: str, key: str) -> str:
        return f"{field}.{key}" if field else key

    def mapping(self, n: yaml.Node, field: str, allowed: tuple[str, ...] | None) -> list[tuple[yaml.Node, yaml.Node]]:
        if isinstance(n, yaml.ScalarNode) and n.tag == _NULL:
            return []
        if not isinstance(n, yaml.MappingNode):
            raise self.fail(n, field, "want a mapping (key: value lines)")
        seen: set[str] = set()
        out: list[tuple[yaml.Node, yaml.Node]] = []
        for k, v in n.value:
            if not isinstance(k, yaml.ScalarNode):
                raise self.fail(k, field, "want a plain key")
            sub = self.join(field, k.value)
            if allowed is not None and k.value not in allowed:
                raise self.fail(k, sub, f"unknown key {json.dumps(k.value, ensure_ascii=False)}", allowed)
            if k.value in seen:
                raise self.fail(k, sub, "given twice")
            seen.add(k.value)
            out.append((k, v))
        return out

    def scalar(self, n: yaml.Node, field: str) -> str:
        if not isinstance(n, yaml.ScalarNode):
            raise self.fail(n, field, "want a single value (quote text that holds \": \" or starts with { or [)")
        if "\0" in str(n.value):
            raise self.fail(n, field, _NUL_VALUE)
        return str(n.value)

    def strings(self, n: yaml.Node, field: str) -> tuple[str, ...]:
        if isinstance(n, yaml.ScalarNode):
            return () if n.tag == _NULL else (self.scalar(n, field),)
        if not isinstance(n, yaml.SequenceNode):
            raise self.fail(n, field, "want a list of strings")
        return tuple(self.scalar(c, f"{field}[{i}]") for i, c in enumerate(n.value))

    def string_map(self, n: yaml.Node, field: str, key_re: re.Pattern[str], rule: str) -> dict[str, str]:
        out = {}
        for k, v in self.mapping(n, field, None):
            sub = self.join(field, k.value)
            if not key_re.match(k.value):
                raise self.fail(k, sub, f"bad key {json.dumps(k.value, ensure_ascii=False)}: want {rule}")
            out[k.value] = self.scalar(v, sub)
        return out

    def boolean(self, n: yaml.Node, field: str) -> bool:
        s = self.scalar(n, field)
        if s in ("true", "false"):
            return s == "true"
        raise self.fail(n, field, f"{json.dumps(s)} is not a boolean", ("true", "false"))

    def parse(self, text: str) -> Config:
        try:
            doc = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            raise ConfigError(self.file, mark.line + 1 if mark else 0, "", f"not valid YAML: {e}") from None
        d = os.path.dirname(self.file)
        if doc is None:
            return Config(self.file, d, {}, {}, None)
        modes: list[tuple[yaml.Node, yaml.Node]] = []
        providers: dict[str, Provider] = {}
        code: Code | None = None
        for k, v in self.mapping(doc, "", ("code", "modes", "providers")):
            if k.value == "modes":
                modes = self.mapping(v, "modes", None)
            elif k.value == "providers":
                providers = self.providers(v)
            else:
                code = self.code(v)
        out: dict[str, Mode] = {}
        for k, v in modes:
            m = self.mode(k, v, providers, code is not None)
            out[m.name] = m
        return Config(self.file, d, out, providers, code)

    def providers(self, n: yaml.Node) -> dict[str, Provider]:
        out = {}
        for k, v in self.mapping(n, "providers", None):
            name, field = k.value, "providers." + k.value
            if not _NAME.match(name):
                raise self.fail(k, field, f"bad provider name {json.dumps(name)}: want 1-63 of [A-Za-z0-9_.-], starting with a letter or digit")
            typ, options = "", {}
            hosts_node: yaml.Node | None = None
            for fk, fv in self.mapping(v, field, None):
                if fk.value == "hosts":
                    hosts_node = fv
                    continue
                val = self.scalar(fv, self.join(field, fk.value))
                if fk.value == "type":
                    if val not in PROVIDER_TYPES:
                        raise self.fail(fv, field + ".type", f"unknown provider type {json.dumps(val)}", PROVIDER_TYPES)
                    typ = val
                else:
                    if fk.value == "plane_url" and (problem := plane_url_problem(val)):
                        raise self.fail(fv, self.join(field, fk.value), problem)
                    options[fk.value] = val
            if not typ:
                raise self.fail(k, field + ".type", "missing", PROVIDER_TYPES)
            hosts: tuple[Host, ...] = ()
            if hosts_node is not None:
                if typ != "ssh":
                    raise self.fail(hosts_node, field + ".hosts", f"a {typ} provider has no hosts (only type ssh has an inventory)")
                hosts = self.hosts(hosts_node, field + ".hosts")
            out[name] = Provider(name, typ, options, hosts)
        return out

    def hosts(self, n: yaml.Node, field: str) -> tuple[Host, ...]:
        if not isinstance(n, yaml.SequenceNode) or not n.value:
            raise self.fail(n, field, "want a list of hosts (host, port, user, key_file, lakeshore, dir, workers, pool, plane_url, offers)")
        out = []
        for i, hn in enumerate(n.value):
            sub = f"{field}[{i}]"
            if isinstance(hn, yaml.ScalarNode) and hn.tag != _NULL:
                if problem := host_address_problem(str(hn.value)):
                    raise self.fail(hn, self.join(sub, "host"), problem)
                out.append(Host({"host": str(hn.value)}))
                continue
            options: dict[str, str] = {}
            offers = Resources()
            for k, v in self.mapping(hn, sub, HOST_KEYS):
                if k.value == "offers":
                    offers = self.resources(v, self.join(sub, "offers"))
                else:
                    options[k.value] = self.scalar(v, self.join(sub, k.value))
                    check = {"host": host_address_problem, "plane_url": plane_url_problem}.get(k.value)
                    if check is not None and (problem := check(options[k.value])):
                        raise self.fail(v, self.join(sub, k.value), problem)
            if not options.get("host"):
                raise self.fail(hn, self.join(sub, "host"), "missing: name the machine (a host name or address)")
            out.append(Host(options, offers))
        return tuple(out)

    def mount_path(self, n: yaml.Node, field: str) -> str:
        s = self.scalar(n, field)
        clean = os.path.normpath(s).replace(os.sep, "/") if s else ""
        if not s or os.path.isabs(s) or clean == ".." or clean.startswith("../"):
            raise self.fail(n, field, f"bad mount path {json.dumps(s)}: want a directory inside the project root, relative to it")
        return clean

    def code(self, n: yaml.Node) -> Code:
        max_bytes, mounts = DEFAULT_MAX_CODE_BYTES, []
        for k, v in self.mapping(n, "code", ("max_size", "mounts")):
            field = "code." + k.value
            if k.value == "max_size":
                s = self.scalar(v, field)
                try:
                    max_bytes = parse_memory(s)
                except ValueError:
                    max_bytes = 0
                if max_bytes == 0:
                    raise self.fail(v, field, f'bad size {json.dumps(s)}: want a positive size ("50MB", "1GiB")')
                continue
            if not isinstance(v, yaml.SequenceNode):
                raise self.fail(v, field, "want a list of mounts (path, include, exclude)")
            for i, mn in enumerate(v.value):
                sub = f"{field}[{i}]"
                if isinstance(mn, yaml.ScalarNode):
                    mounts.append(Mount(self.mount_path(mn, sub + ".path")))
                    continue
                path = ""
                include: tuple[str, ...] = ()
                exclude: tuple[str, ...] = ()
                for fk, fv in self.mapping(mn, sub, ("exclude", "include", "path")):
                    ff = self.join(sub, fk.value)
                    if fk.value == "path":
                        path = self.mount_path(fv, ff)
                        continue
                    pats = self.strings(fv, ff)
                    from lakeshore.code import check_pattern

                    for j, pat in enumerate(pats):
                        err = check_pattern(pat)
                        if err:
                            raise self.fail(fv, f"{ff}[{j}]", f"bad pattern {json.dumps(pat)}: {err}")
                    if fk.value == "include":
                        include = pats
                    else:
                        exclude = pats
                if not path:
                    raise self.fail(mn, sub + ".path", "missing")
                mounts.append(Mount(path, include, exclude))
        return Code(tuple(mounts), max_bytes)

    def mode(self, k: yaml.Node, n: yaml.Node, providers: Mapping[str, Provider], has_code: bool) -> Mode:
        name, field = k.value, "modes." + k.value
        if not _NAME.match(name):
            raise self.fail(k, field, f"bad mode name {json.dumps(name)}: want 1-63 of [A-Za-z0-9_.-], starting with a letter or digit")
        kw: dict[str, Any] = {"code": has_code}
        for fk, v in self.mapping(n, field, ("code", "env", "provider", "resources", "run_setup", "setup", "time_limit")):
            sub = self.join(field, fk.value)
            key = fk.value
            if key == "resources":
                kw["resources"] = self.resources(v, sub)
            elif key in ("setup", "run_setup"):
                kw[key] = self.strings(v, sub)
            elif key == "env":
                kw["env"] = self.string_map(v, sub, _ENV_KEY, "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
            elif key == "provider":
                s = self.scalar(v, sub)
                if s not in providers and s != "local":
                    allowed = sorted({"local", *providers})
                    raise self.fail(v, sub, f"no provider {json.dumps(s)} (declare it under providers:)", allowed)
                kw["provider"] = s
            elif key == "time_limit":
                s = self.scalar(v, sub)
                try:
                    kw["time_limit"] = parse_duration(s)
                except ValueError as e:
                    raise self.fail(v, sub, f"bad time limit {json.dumps(s)}: {e}") from None
            else:
                kw["code"] = self.boolean(v, sub)
        return Mode(name, **kw)

    def resources(self, n: yaml.Node, field: str) -> Resources:
        kw: dict[str, Any] = {}
        for k, v in self.mapping(n, field, ("cpus", "gpu_type", "gpus", "labels", "memory")):
            sub = self.join(field, k.value)
            if k.value == "labels":
                kw["labels"] = self.string_map(v, sub, _LABEL_KEY, "1-63 of [A-Za-z0-9_./-], starting with a letter or digit")
                if len(kw["labels"]) > LABELS_MAX:
                    raise self.fail(v, sub, f"{len(kw['labels'])} labels: at most {LABELS_MAX} are allowed")
                for lk, lv in v.value if isinstance(v, yaml.MappingNode) else ():
                    if not valid_label_value(kw["labels"][lk.value]):
                        q = json.dumps(kw["labels"][lk.value], ensure_ascii=False)
                        raise self.fail(lv, self.join(sub, lk.value), f"bad label value {q}: {_LABEL_VALUE_RULE}")
                continue
            s = self.scalar(v, sub)
            q = json.dumps(s, ensure_ascii=False)
            if k.value == "cpus":
                try:
                    kw["milli_cpus"] = parse_cpus(s)
                except ValueError as e:
                    raise self.fail(v, sub, f"bad CPU count {q}: {e}") from None
                if kw["milli_cpus"] > CPUS_MAX * 1000:
                    raise self.fail(v, sub, f"bad CPU count {q}: at most {CPUS_MAX} CPUs")
            elif k.value == "memory":
                try:
                    kw["memory_bytes"] = parse_memory(s)
                except ValueError as e:
                    raise self.fail(v, sub, f"bad memory size {q}: {e}") from None
                if kw["memory_bytes"] > MEMORY_MAX:
                    raise self.fail(v, sub, f"bad memory size {q}: at most 1PiB")
            elif k.value == "gpus":
                if not _DIGITS.match(s) or _over(s, 1024):
                    raise self.fail(v, sub, f"bad GPU count {q}: want an integer 0-1024")
                kw["gpus"] = int(s)
            else:
                if not _LABEL_KEY.match(s):
                    raise self.fail(v, sub, f'bad GPU type {q}: want 1-63 of [A-Za-z0-9_./-] ("a100", "h100-80gb")')
                kw["gpu_type"] = s
        return Resources(**kw)


CPUS_MAX = 1024
"""The most CPUs a resource declaration may ask for (the plane's RequirementCPUsMax)."""
MEMORY_MAX = 1 << 50
"""The most memory a resource declaration may ask for, in bytes: 1 PiB (RequirementMemoryMax)."""
LABELS_MAX = 32
"""The most labels of one resource declaration (PlacementLabelsMax)."""


def parse(file: str, text: str) -> Config:
    """Parse a project file's ``text``; ``file`` names it in errors.

    Raises:
        ConfigError: naming the file, the line, the field and what is allowed."""
    return _Parser(file).parse(text)


