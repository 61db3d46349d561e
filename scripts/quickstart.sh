#!/bin/sh
# quickstart.sh: build the lakeshore command and run the main job on real input — `lakeshore
# map` over every .go file of the Go distribution on this machine ($(go env GOROOT)),
# computing each file's SHA-256 digest and line count with standard tools, on the embedded
# plane. Prints progress and a summary (jobs, succeeded, failed, wall time, jobs/s) on
# stderr and exits 0 when every file succeeded.
#
#   scripts/quickstart.sh            # a fresh $LAKESHORE_HOME under a temporary directory
#   LAKESHORE_HOME=~/lk scripts/quickstart.sh   # reuse a home: a re-run re-executes nothing
#
# The results (one JSON line per file) are written to $LAKESHORE_HOME/goroot-digests.jsonl.
# Set LAKESHORE_QUICKSTART_LIMIT=N to map only the first N files (tests), and
# LAKESHORE_QUICKSTART_WORKERS=N to choose the number of workers.
set -eu

# shell_word prints $1 as one shell word: as it is when it holds only characters the shell
# takes literally, else in single quotes (a quote inside written '\'').
shell_word() {
	case "$1" in
	*[!A-Za-z0-9_./:@%+,=-]*) printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")" ;;
	*) printf '%s' "$1" ;;
	esac
}

cd "$(dirname "$0")/.."
if [ -z "${LAKESHORE_HOME:-}" ]; then
	LAKESHORE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/lakeshore-quickstart.XXXXXX")
fi
export LAKESHORE_HOME
unset LAKESHORE_URL # the embedded default plane: $LAKESHORE_HOME/lakeshore.db

bin="$LAKESHORE_HOME/bin/lakeshore"
mkdir -p "$LAKESHORE_HOME/bin"
echo "quickstart: building lakeshore into $bin (a first build compiles about 700 packages: minutes on two cores; later builds reuse the Go build cache)" >&2
go build -o "$bin" ./cmd/lakeshore

goroot=$(go env GOROOT)
inputs="$LAKESHORE_HOME/goroot-files.txt"
find "$goroot" -type f -name '*.go' | LC_ALL=C sort | head -n "${LAKESHORE_QUICKSTART_LIMIT:-100000000}" >"$inputs"
echo "quickstart: $(wc -l <"$inputs") .go files under $goroot; plane $LAKESHORE_HOME/lakeshore.db" >&2

# The digest tool: sha256sum (GNU coreutils), else shasum -a 256 (macOS, BSD).
if command -v sha256sum >/dev/null 2>&1; then
	digest='sha256sum'
else
	digest='shasum -a 256'
fi

out="$LAKESHORE_HOME/goroot-digests.jsonl"
# Each job: `sh -c TEMPLATE _ FILE` prints the digest, then the line count.
status=0
# Ctrl-C reaches map (it drains, then stops) and this script, which then says how to finish:
# the same home, so that nothing that succeeded runs again.
trap ':' INT TERM
"$bin" map --input "$inputs" --out "$out" --workers "${LAKESHORE_QUICKSTART_WORKERS:-$(($(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2) * 2))}" -- \
	sh -c "$digest"' "$1" | cut -d" " -f1; wc -l < "$1"' _ {} || status=$?
if [ "$status" -eq 0 ]; then
	echo "quickstart: results in $out" >&2
elif [ "$status" -eq 130 ] || [ "$status" -gt 128 ]; then
	# The same command: the user's limit and workers kept (the resumed run maps the same
	# files), each value quoted for the shell when it needs it.
	again=""
	for name in LAKESHORE_QUICKSTART_LIMIT LAKESHORE_QUICKSTART_WORKERS LAKESHORE_HOME; do
		eval "value=\${$name:-}"
		if [ -n "$value" ]; then
			again="$again$name=$(shell_word "$value") "
		fi
	done
	echo "quickstart: interrupted; to finish (nothing that succeeded runs again), run:" >&2
	echo "  ${again}scripts/quickstart.sh" >&2
fi
exit "$status"
