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
# llama-cpp-python (the server the openai backend's tests talk to) is compiled for a portable x86-64 CPU (AVX2, FMA,
# F16C), not for this CPU's native flags: a native build on a CPU with AMX segfaults on the first prompt of two tokens
# or more (llama.cpp's AMX matrix kernels). pip's wheel cache does not key on CMAKE_ARGS, so the portable wheel is kept
# in a folder named after its flags and installed from there.
llama_flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
llama_wheels="${XDG_CACHE_HOME:-$HOME/.cache}/physprobe-setup/llama-cpp-python-0.3.36-avx2-noamx"
if ! ls "$llama_wheels"/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then
  CMAKE_ARGS="$llama_flags" $pip wheel -q --no-cache-dir --no-deps -w "$llama_wheels" llama-cpp-python==0.3.36
fi
$pip install -q --find-links "$llama_wheels" -e '.[dev]'
# checklist 0.0.11 is only needed by the parity test of our CheckList-syntax expander. Its sdist
# cannot build under pip's build isolation and it needs notebook<7, IPython<9 and setuptools<81.
if ! .venv/bin/python -c "import checklist.editor" 2>/dev/null; then
  $pip install -q "notebook<7" "ipython<9" "setuptools<81" wheel
  $pip install -q --no-build-isolation checklist==0.0.11
fi

.venv/bin/physprobe build all --out data --source-dir "$source_dir"
