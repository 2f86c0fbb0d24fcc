#!/usr/bin/env bash
# Runs a reference script in its own venv (torch + transformers, about 6 GB, made once): run.sh SCRIPT.py [ARGS...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${TENSORFOLD_REF_VENV:-$HOME/.cache/tensorfold/refvenv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r "$here/requirements.txt"
fi
script="$1"
shift
cd "$here"
exec "$venv/bin/python" "$script" "$@"
