#!/bin/sh
# Regenerate wire/testdata/seed: golden vectors written by the real dreamlake-lakeshore codec
# (docs/wire.md, "Seed vectors"). Makes a scratch virtual environment (SEED_VENV, default
# /tmp/lakeshore-seed-venv) with the package and the numpy and Pillow versions the committed
# bytes were made with, and runs scripts/seed_vectors.py in it. Needs network access to PyPI.
#
#   sh scripts/seed_vectors.sh
set -eu
cd "$(dirname "$0")/.."
venv="${SEED_VENV:-/tmp/lakeshore-seed-venv}"
if [ ! -x "$venv/bin/python" ]; then
	python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q dreamlake-lakeshore==0.5.0 msgpack==1.2.4 numpy==2.4.6 pillow==13.0.0
"$venv/bin/python" scripts/seed_vectors.py wire/testdata/seed
