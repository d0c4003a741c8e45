#!/usr/bin/env bash
# Set up everything chattts-render needs on a fresh Debian machine: ffmpeg (Debian's package) and a
# Python virtualenv in .venv with the project and its test tools.  Idempotent; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v ffmpeg >/dev/null || ! command -v ffprobe >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing ffmpeg (Debian package)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq ffmpeg >/dev/null
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PY" --version)"
  "$PY" -m venv .venv
fi
stamp=.venv/.chattts-render-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing Python packages (torch 2.11.0 is a large download the first time)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".[test]"
  touch "$stamp"
fi
echo "setup: ready ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'), $(ffmpeg -version | head -1 | cut -d' ' -f1-3))"
