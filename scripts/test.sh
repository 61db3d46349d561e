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
# 2. The Python SDK's pytest suite (run beside step 1, its output printed after it), in a
#    virtual environment it creates once in
#    python/.venv (pip install -e 'python[test]', the distribution lakeshore-queue), against a lakeshore binary built from
#    this tree.
# Both use the real dreamlake-lakeshore package (issue 24: server/compat's tests and
# python/tests/test_seed_compat.py, test_wire_seed.py) from a scratch virtual environment,
# $SEED_VENV (default /tmp/lakeshore-seed-venv, the one scripts/seed_vectors.sh makes),
# created here when it is missing. Without it those tests skip, and with CI=true fail.
# The differential suite (python/tests/test_differential.py) also runs the real persisting
# package from $PERSIST_VENV (default /tmp/lakeshore-persist-venv), made here the same way:
# persisting==0.3.0 without its torch dependency (--no-deps), with what its local mode
# imports (pulsing, pylance, pyarrow, numpy).
set -eu
cd "$(dirname "$0")/.."

SEED_VENV="${SEED_VENV:-/tmp/lakeshore-seed-venv}"
export SEED_VENV
if ! "$SEED_VENV/bin/python" -c 'import dreamlake.lakeshore, numpy' 2>/dev/null; then
  echo "==> $SEED_VENV: pip install dreamlake-lakeshore==0.5.0"
  if ! { python3 -m venv "$SEED_VENV" &&
    "$SEED_VENV/bin/pip" install -q --disable-pip-version-check dreamlake-lakeshore==0.5.0 \
      msgpack==1.2.4 numpy==2.4.6 pillow==13.0.0; }; then
    echo "could not make $SEED_VENV with dreamlake-lakeshore==0.5.0 (network access to PyPI?)" >&2
    if [ "${CI:-}" = true ]; then exit 1; fi
  fi
fi

PERSIST_VENV="${PERSIST_VENV:-/tmp/lakeshore-persist-venv}"
export PERSIST_VENV
if ! "$PERSIST_VENV/bin/python" -c 'import persisting, lance' 2>/dev/null; then
  echo "==> $PERSIST_VENV: pip install --no-deps persisting==0.3.0 pulsing pylance pyarrow numpy"
  if ! { python3 -m venv "$PERSIST_VENV" &&
    "$PERSIST_VENV/bin/pip" install -q --disable-pip-version-check --no-deps persisting==0.3.0 \
      pulsing==0.1.2 pylance==14.0.2 pyarrow==26.0.1 numpy==2.4.6; }; then
    echo "could not make $PERSIST_VENV with persisting==0.3.0 (network access to PyPI?)" >&2
    if [ "${CI:-}" = true ]; then exit 1; fi
  fi
fi

venv=python/.venv
if [ ! -x "$venv/bin/pytest" ]; then
  python3 -m venv "$venv" || {
    echo "python3 -m venv failed: install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  }
fi
# (Re)install when the venv is new or python/pyproject.toml changed since the last install.
if [ ! -f "$venv/.installed" ] || [ python/pyproject.toml -nt "$venv/.installed" ]; then
  # The distribution was named lakeshore before issue 29 (now lakeshore-queue: the PyPI name
  # lakeshore is another project's): drop an install under the old name first.
  "$venv/bin/pip" uninstall -q -y --disable-pip-version-check lakeshore >/dev/null 2>&1 || true
  "$venv/bin/pip" install -q --disable-pip-version-check -e 'python[test]'
  touch "$venv/.installed"
fi
go build -o "$venv/lakeshore" ./cmd/lakeshore

# The Python suite runs beside the Go tests, its output kept in a file and printed after
# them. Both spend most of their time waiting (fsyncs, timers, child processes: pytest used
# ~180 s of CPU in ~470 s, plane/pgplane 70 s in 640 s), so on CI's 2 cores one after the
# other left the CPU idle for minutes (docs/benchmarks-cli.md, "CI time").
pylog=$(mktemp "${TMPDIR:-/tmp}/lakeshore-pytest.XXXXXX")
echo "==> python: pytest python/tests (beside the Go tests; its output follows theirs)"
(
  rc=0
  LAKESHORE_BIN="$PWD/$venv/lakeshore" "$venv/bin/pytest" -q -rs python/tests || rc=$?
  exit "$rc"
) >"$pylog" 2>&1 &
pypid=$!

gorc=0
echo "==> go test ./..."
# A package binary may take minutes on a loaded 2-core machine (the PostgreSQL conformance
# suite runs twice): the default 10-minute bound is too tight for it.
go test -timeout 25m ./... || gorc=$?
# The Kubernetes provider is built only with the lakeshore_kubernetes tag (the default
# binary leaves client-go out): its tests, against client-go's fake clientset, and the CLI's
# resolver with it built in.
echo "==> go test -tags lakeshore_kubernetes (the Kubernetes provider)"
go test -tags lakeshore_kubernetes ./provider/kubeprovider || gorc=$?
go test -tags lakeshore_kubernetes -run 'TestProviderSSHResolve' ./cmd/lakeshore || gorc=$?

rc=0
wait "$pypid" || rc=$?
echo "==> python: pytest python/tests (output)"
cat "$pylog"
rm -f "$pylog"
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no test in python/tests" >&2
  exit 1
fi
if [ "$gorc" -ne 0 ]; then
  echo "go test failed (exit $gorc)" >&2
  exit "$gorc"
fi
exit "$rc"
