#!/usr/bin/env bash
# Build the base images the CI stack uses where Docker Hub is out of reach, from Debian bookworm packages:
#
#   lium-ci/python-base:<hash>    python3.11 + venv: the Dockerfile's BASE_IMAGE
#   lium-ci/postgres:15           PostgreSQL 15, the official image's env contract (POSTGRES_USER/DB/PASSWORD)
#   lium-ci/redis:7               Redis 7
#
# Each Debian base is `mmdebstrap --variant=minbase bookworm | docker import`, tagged with a hash of its inputs
# (suite, packages, dpkg options, recipe number), and skipped when an image with that tag already exists: a rerun costs seconds.
# The postgres/redis images add a small entrypoint on top (deploy/ci/postgres, deploy/ci/redis).
# Prints `PYTHON_BASE=<tag>` last, for `eval`. Needs root (mmdebstrap's root mode) and a Docker engine.
set -euo pipefail
cd "$(dirname "$0")"

SUITE=bookworm
# Bump when the way a base is made changes (the hook, the import changes): every base is then rebuilt.
RECIPE=1
# Documentation, man pages and translations are never read in a container.
DPKG_OPTS=(
    --dpkgopt='path-exclude=/usr/share/doc/*'
    --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/info/*'
    --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-include=/usr/share/locale/locale.alias'
)

log() { echo "build_bases: $*" >&2; }

# debian_base NAME [--dpkgopt=...]... PACKAGES... -> prints the tag of a minbase image with those packages.
debian_base() {
    local name="$1"; shift
    local -a extra=()
    while [[ "${1:-}" == --dpkgopt=* ]]; do extra+=("$1"); shift; done
    local packages; packages="$(IFS=,; echo "$*")"
    local tag="lium-ci/$name-base:$(echo "$SUITE $packages ${DPKG_OPTS[*]} ${extra[*]} $RECIPE" | sha256sum | cut -c1-12)"
    if docker image inspect "$tag" >/dev/null 2>&1; then
        log "$tag exists (cached)"
    else
        log "building $tag from Debian $SUITE: $packages"
        local started=$SECONDS
        mmdebstrap --quiet --variant=minbase --include="$packages" "${DPKG_OPTS[@]}" "${extra[@]}" \
            --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
            "$SUITE" - </dev/null \
            | docker import \
                --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
                --change 'ENV LANG=C.UTF-8' \
                --change 'CMD ["bash"]' \
                - "$tag" >/dev/null
        log "$tag built in $((SECONDS - started)) s"
    fi
    echo "$tag"
}

PYTHON_BASE="$(debian_base python python3 python3-venv ca-certificates tzdata)"
# Without the JIT (LLVM, bitcode: 150 MB): PostgreSQL runs without JIT when its provider library is absent.
POSTGRES_BASE="$(debian_base postgres \
    --dpkgopt='path-exclude=/usr/lib/postgresql/15/lib/llvmjit*' \
    --dpkgopt='path-exclude=/usr/lib/postgresql/15/lib/bitcode/*' \
    --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/libLLVM*' \
    --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/libz3*' \
    postgresql-15)"
REDIS_BASE="$(debian_base redis redis-server)"

# The service images: a thin layer each, rebuilt from the layer cache in a second.
docker build -q --build-arg BASE_IMAGE="$POSTGRES_BASE" -t lium-ci/postgres:15 postgres >/dev/null
docker build -q --build-arg BASE_IMAGE="$REDIS_BASE" -t lium-ci/redis:7 redis >/dev/null
for image in "$PYTHON_BASE" lium-ci/postgres:15 lium-ci/redis:7; do
    log "$image: $(docker image inspect --format '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1 / 1e6}')"
done
echo "PYTHON_BASE=$PYTHON_BASE"
