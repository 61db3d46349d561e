"""Lakeshore for Python: a durable job queue and data queue for ML work.

The Go binary is the engine; this package is its Python client. Built so far: the wire
codec (:mod:`lakeshore.wire`), the error types (:mod:`lakeshore.errors`).
"""

from __future__ import annotations

from lakeshore import wire
from lakeshore.wire import thunk

__all__ = ["wire", "thunk"]

__version__ = "0.1.0.dev0"
