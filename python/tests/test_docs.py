"""Every public class, function, method and property has a docstring."""

from __future__ import annotations

import inspect

import lakeshore
from lakeshore import data, dispatch, errors, queue, scopes, wire, worker


def test_public_api_is_documented() -> None:
    missing = []
    for mod in (lakeshore, wire, errors, queue, dispatch, worker, scopes, data):
        assert (mod.__doc__ or "").strip(), mod.__name__
        for name in mod.__all__:
            obj = getattr(mod, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not (obj.__doc__ or "").strip():
                missing.append(f"{mod.__name__}.{name}")
            if inspect.isclass(obj):
                for member, value in vars(obj).items():
                    if member.startswith("_") or not (callable(value) or isinstance(value, property)):
                        continue
                    if not (getattr(value, "__doc__", None) or "").strip():
                        missing.append(f"{mod.__name__}.{name}.{member}")
    assert not missing, f"undocumented: {sorted(set(missing))}"


def test_timeout_error_does_not_shadow_the_builtin_on_star_import() -> None:
    assert "TimeoutError" not in lakeshore.__all__
    assert issubclass(lakeshore.TimeoutError, TimeoutError)
