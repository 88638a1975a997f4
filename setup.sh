#!/usr/bin/env bash
# One-command set-up: a virtual environment in .venv with physprobe and its test tools, then the
# main job — build every benchmark from the local upstream mirror into ./data and print a summary.
#   bash setup.sh [--source-dir DIR]      (default: ../shared/data/upstream)
set -euo pipefail
cd "$(dirname "$0")"
source_dir=../shared/data/upstream
[ "${1:-}" = "--source-dir" ] && source_dir=$2

python3.11 -m venv .venv
pip=".venv/bin/python -m pip"
$pip install -q --upgrade pip
$pip install -q -e '.[dev]'
# checklist 0.0.11 is only needed by the parity test of our CheckList-syntax expander. Its sdist
# cannot build under pip's build isolation and it needs notebook<7, IPython<9 and setuptools<81.
if ! .venv/bin/python -c "import checklist.editor" 2>/dev/null; then
  $pip install -q "notebook<7" "ipython<9" "setuptools<81" wheel
  $pip install -q --no-build-isolation checklist==0.0.11
fi

.venv/bin/physprobe build all --out data --source-dir "$source_dir"
