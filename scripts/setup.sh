#!/usr/bin/env bash
# Set up everything chattts-render needs on a fresh Debian machine: Debian's ffmpeg and a Python virtualenv in
# .venv with the project and its test tools; `setup.sh test` adds what the tests need from Debian (chromium,
# chromium-driver, epubcheck); `setup.sh image` only what the container image needs (podman, runc, mmdebstrap and
# their configuration: `make image`, `make test-image`).  Idempotent; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = image ]; then
  # The container image (Containerfile, scripts/image.sh): Debian's podman (its Docker-compatible socket for the
  # Prefect Docker worker: `podman system service`), runc and mmdebstrap (the Debian base from the mirror, no
  # registry).  Measured on this project's machines: podman's default runtime crun fails there ("cgroups in hybrid
  # mode not supported"), runc works; RLIMIT_NOFILE / RLIMIT_NPROC cannot be raised, so containers get the
  # limits below (podman's defaults, 1048576 and 4194304, fail to start any container; nproc 32768 is the most
  # measured to work), each at most this shell's hard limit.  A drop-in of podman's configuration says so.
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  need=()
  for tool in podman runc mmdebstrap; do command -v "$tool" >/dev/null || need+=("$tool"); done
  if [ ${#need[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  nofile=$(ulimit -Hn); [ "$nofile" = unlimited ] || [ "$nofile" -gt 20000 ] && nofile=20000
  nproc=$(ulimit -Hu); [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768
  conf=/etc/containers/containers.conf.d/chattts-render.conf
  want=$(cat <<EOF
# scripts/setup.sh image (chattts-render): runc, and limits containers can have here
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
EOF
)
  if [ "$(cat "$conf" 2>/dev/null)" != "$want" ]; then
    echo "setup: writing $conf"
    $SUDO mkdir -p "$(dirname "$conf")"
    printf '%s\n' "$want" | $SUDO tee "$conf" >/dev/null
  fi
  echo "setup: ready for images ($(podman --version), runtime $(podman info --format '{{.Host.OCIRuntime.Name}}'))"
  exit 0
fi

# Debian packages: ffmpeg (encodes) and gcc (engine/kernels.c, the CPU engine's linear kernel, is compiled on
# first use; without a compiler the engine uses oneDNN's, slower); with `setup.sh test` also chromium + chromium-driver (web pages are
# tested in a real headless browser), a Chinese font for its screenshots, epubcheck (every EPUB we write
# is validated) and postgresql (the fleet recipe's Prefect server runs on it; its binaries live in
# /usr/lib/postgresql/<version>/bin, off PATH, where tests/pgserver.py finds them).
need=()
command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null || need+=(ffmpeg)
command -v cc >/dev/null || command -v gcc >/dev/null || need+=(gcc)
if [ "${1:-}" = test ]; then
  command -v chromium >/dev/null || need+=(chromium)
  command -v chromedriver >/dev/null || need+=(chromium-driver)
  [ -f /usr/share/java/epubcheck.jar ] || need+=(epubcheck)
  fc-list :lang=zh 2>/dev/null | grep -q . || need+=(fonts-wqy-microhei)   # Chinese in the pages' screenshots
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
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
  # The venv takes about 7 GB (PyPI's torch 2.11.0 on x86_64 is the CUDA build); pip's wheel cache would double
  # that, so it is off: a CI machine once ran out of disk here.
  free_mb=$(df -Pm . | awk 'NR==2 {print $4}')
  if [ "${free_mb:-0}" -lt 9000 ]; then
    echo "setup: only ${free_mb} MB free on $(df -P . | awk 'NR==2 {print $6}'); the Python packages need about 9000 MB" >&2
  fi
  .venv/bin/python -m pip install -q --no-cache-dir --upgrade pip
  .venv/bin/python -m pip install -q --no-cache-dir -e ".[test]"
  touch "$stamp"
fi
echo "setup: ready ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'), $(ffmpeg -version | head -1 | cut -d' ' -f1-3))"
.venv/bin/python -c 'from engine import kernels; print("setup: CPU kernel engine/kernels.c", "built" if kernels.available() else "not available here (the engine uses oneDNN)")'
