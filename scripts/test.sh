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
go test ./...

echo "==> python: pytest python/tests"
venv=python/.venv
if [ ! -x "$venv/bin/pytest" ]; then
  python3 -m venv "$venv" || {
    echo "python3 -m venv failed: install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  }
  "$venv/bin/pip" install -q --disable-pip-version-check -e 'python[test]'
fi
go build -o "$venv/lakeshore" ./cmd/lakeshore
rc=0
LAKESHORE_BIN="$PWD/$venv/lakeshore" "$venv/bin/pytest" -q -rs python/tests || rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no test in python/tests" >&2
  exit 1
fi
exit "$rc"
