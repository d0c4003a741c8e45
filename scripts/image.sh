#!/usr/bin/env bash
# Build the renderer's container image with podman (Containerfile; README "Containers").  `make image` runs it.
#   scripts/image.sh          the CPU image: localhost/chattts-render:<version> and :latest
#   scripts/image.sh cuda     the CUDA variant on NVIDIA's base (not yet run by us): :<version>-cuda and :cuda
#   scripts/image.sh --digest the digest of the code an image of this checkout holds (its label SOURCE_LABEL)
# No registry is needed for the CPU image: without BASE, its Debian base is built from the Debian mirror
# (mmdebstrap + podman import, once: localhost/chattts-render-base:bookworm).  BASE=IMAGE uses a registry base
# instead (docker.io/library/debian:bookworm-slim is the same system); EXTRAS (default s3) and TORCH_INDEX (an
# index of CPU-only torch wheels) are passed to the Containerfile.  scripts/setup.sh image installs podman,
# runc and mmdebstrap and configures them first.
set -euo pipefail
cd "$(dirname "$0")/.."

SOURCE_LABEL=org.chattts-render.source

# What the image's package is built from (the Containerfile's COPY lines), as one sha256: tests/podman.py refuses an
# image whose label differs (built from other code).
source_digest() {
  find pyproject.toml flows tasks engine manifests -type f ! -path '*/__pycache__/*' -print0 \
    | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}
if [ "${1:-}" = --digest ]; then source_digest; exit 0; fi

VARIANT=${1:-cpu}
NAME=${IMAGE_NAME:-localhost/chattts-render}
LOCAL_BASE=localhost/chattts-render-base:bookworm
CUDA_BASE=docker.io/nvidia/cuda:13.0.2-base-ubuntu24.04      # NVIDIA's base: CUDA 13.0, as PyPI's torch 2.11
DEBIAN_SUITES=(bookworm bookworm-updates)
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY=${DEBIAN_SECURITY:-http://deb.debian.org/debian-security}
HOST_CA=/usr/local/share/ca-certificates        # extra CA certificates of this machine (a TLS-inspecting proxy)

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)
case "$VARIANT" in
  cpu)  base=${BASE:-$LOCAL_BASE}; tags=("$NAME:$version" "$NAME:latest") ;;
  cuda) base=${BASE:-$CUDA_BASE}; tags=("$NAME:$version-cuda" "$NAME:cuda") ;;
  *)    echo "image: unknown variant '$VARIANT' (cpu or cuda)" >&2; exit 2 ;;
esac

if [ "$base" = "$LOCAL_BASE" ] && ! podman image exists "$LOCAL_BASE"; then
  echo "image: building $LOCAL_BASE from $DEBIAN_MIRROR (mmdebstrap)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  sources=()
  for suite in "${DEBIAN_SUITES[@]}"; do sources+=("deb $DEBIAN_MIRROR $suite main"); done
  sources+=("deb $DEBIAN_SECURITY bookworm-security main")
  mmdebstrap --quiet --variant=apt bookworm "$tmp/rootfs.tar" "${sources[@]}"
  podman import --change 'CMD ["/bin/bash"]' "$tmp/rootfs.tar" "$LOCAL_BASE" >/dev/null
fi

mounts=()
if compgen -G "$HOST_CA/*.crt" >/dev/null; then
  mounts+=(--volume "$HOST_CA:/run/host-ca:ro")      # the build stage trusts them; the image does not keep them
fi
tag_args=()
for t in "${tags[@]}"; do tag_args+=(--tag "$t"); done
echo "image: building ${tags[*]} on $base"
start=$(date +%s)
podman build --network=host --file Containerfile --build-arg "BASE=$base" --build-arg "EXTRAS=${EXTRAS:-s3}" \
  --build-arg "TORCH_INDEX=${TORCH_INDEX:-}" --label "$SOURCE_LABEL=$(source_digest)" "${mounts[@]}" "${tag_args[@]}" .
size=$(podman image inspect --format '{{.Size}}' "${tags[0]}")
echo "image: ${tags[0]} built in $(( $(date +%s) - start )) s, $(( size / 1000000 )) MB"
