"""Offers in the ``lakeshore worker --offers`` form, as a provider passes them to the workers it
launches for a shape (``$LAKESHORE_OFFERS``; docs/providers.md, "Launching by shape").

The form is Go's ``plane.ParseOffers``: comma-separated ``NAME=VALUE`` pairs, ``cpus`` (a
decimal with at most three decimals, or millicpus ``500m``), ``memory`` (bytes with an optional
unit: K, M, G, T powers of 1000; Ki, Mi, Gi, Ti powers of 1024; a trailing B optional),
``gpus`` (an integer), ``gpu_type`` and ``label.KEY=VALUE``; each name at most once.
"""

from __future__ import annotations

import re
from typing import Any

from . import errors

ENV_OFFERS = "LAKESHORE_OFFERS"

_RULE = "use NAME=VALUE pairs separated by commas: cpus, memory, gpus, gpu_type, label.KEY"
# What each parsed value may be, as Go's plane.offerValueRules says it.
_VALUE_RULES = {
    "cpus": "cpus is a number of CPUs with at most three decimals (8, 0.5) or millicpus (500m)",
    "memory": "memory is a number of bytes with an optional unit (64GiB, 512MiB, 2G)",
    "gpus": "gpus is a whole number (1)",
}
_UNITS = [("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40), ("K", 10**3), ("M", 10**6), ("G", 10**9), ("T", 10**12)]


def parse_offers(text: str, field: str = "$" + ENV_OFFERS) -> dict[str, Any]:
    """Read offers written as ``cpus=8,memory=64GiB,gpus=1,gpu_type=a100,label.zone=east`` into
    run_worker's ``offers`` mapping (``cpus_milli``, ``memory_bytes``, ``gpus``, ``gpu_type``,
    ``labels``); ``""`` is no offer (an empty mapping). The values' ranges are the server's to
    check. Raises InvalidError naming ``field`` and the bad pair."""
    out: dict[str, Any] = {}
    if not text.strip():
        return out
    seen: set[str] = set()
    for pair in text.split(","):
        name, eq, value = pair.strip().partition("=")
        if not eq or not name:
            raise _invalid(field, pair, _RULE)
        if name in seen:
            raise _invalid(field, pair, f"{name} is given twice; {_RULE}, each once")
        seen.add(name)
        if name not in ("cpus", "memory", "gpus", "gpu_type") and not name.startswith("label."):
            raise _invalid(field, pair, f'unknown name "{name}"; {_RULE}')
        try:
            if name == "cpus":
                out["cpus_milli"] = _milli_cpus(value)
            elif name == "memory":
                out["memory_bytes"] = _memory(value)
            elif name == "gpus":
                out["gpus"] = int(value, 10)
            elif name == "gpu_type":
                out["gpu_type"] = value
            else:
                out.setdefault("labels", {})[name[len("label.") :]] = value
        except ValueError:
            raise _invalid(field, pair, f"{_VALUE_RULES[name]}; {_RULE}") from None
    return out


def _milli_cpus(s: str) -> int:
    if s.endswith("m"):
        return int(s[:-1], 10)
    if not re.fullmatch(r"[0-9]+(\.[0-9]{1,3})?", s):
        raise ValueError(s)
    whole, _, frac = s.partition(".")
    return int(whole) * 1000 + int((frac + "00")[:3])


def _memory(s: str) -> int:
    s = s.removesuffix("B")
    for suffix, scale in _UNITS:
        if s.endswith(suffix):
            return int(s[: -len(suffix)], 10) * scale
    return int(s, 10)


def _invalid(field: str, value: str, rule: str) -> errors.InvalidError:
    return errors.InvalidError(f"invalid {field} {value!r}: {rule}", field=field, value=value, rule=rule)
