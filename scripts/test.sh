#!/bin/sh
# Every test of the repository, Go and Python, in one command (README's test command;
# .ci/run runs it too).
#
#   sh scripts/test.sh
#
# 1. go test ./... — the conformance suite on every plane (SQLite file, :memory:, HTTP,
#    PostgreSQL), crash tests, the data queue's stores, the CLI, the dashboard in Chromium.
#    Tests that need PostgreSQL or Chromium skip with the command that installs them when
#    those are absent (with CI=true they fail instead).
# 2. The Python SDK's pytest suite, in a virtual environment it creates once in
#    python/.venv (pip install -e 'python[test]'), against a lakeshore binary built from
#    this tree.
set -eu
cd "$(dirname "$0")/.."

echo "==> go test ./..."
# A package binary may take minutes on a loaded 2-core machine (the PostgreSQL conformance
# suite runs twice): the default 10-minute bound is too tight for it.
go test -timeout 25m ./...

echo "==> python: pytest python/tests"
venv=python/.venv
if [ ! -x "$venv/bin/pytest" ]; then
  python3 -m venv "$venv" || {
    echo "python3 -m venv failed: install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  }
fi
# (Re)install when the venv is new or python/pyproject.toml changed since the last install.
if [ ! -f "$venv/.installed" ] || [ python/pyproject.toml -nt "$venv/.installed" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check -e 'python[test]'
  touch "$venv/.installed"
fi
go build -o "$venv/lakeshore" ./cmd/lakeshore
rc=0
LAKESHORE_BIN="$PWD/$venv/lakeshore" "$venv/bin/pytest" -q -rs python/tests || rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no test in python/tests" >&2
  exit 1
fi
exit "$rc"
