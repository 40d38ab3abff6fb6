#!/usr/bin/env bash
# Build the dashboard image from the locked dependencies only.
#
#   scripts/docker_build.sh                   # lium-dashboard:latest on the official python:3.11-slim
#   BASE_IMAGE=lium-ci/python-base:<tag> scripts/docker_build.sh   # on a base made by deploy/ci/build_bases.sh
#
# 1. exports uv.lock's runtime set (no dev group) to .wheelhouse/requirements.txt, with hashes;
# 2. downloads those wheels into .wheelhouse/ (Linux x86_64, CPython 3.11), skipped when the set is unchanged;
# 3. `docker build`s the Dockerfile, which installs them with --no-index --require-hashes (no network);
# 4. prints the image's size.
# Environment: BASE_IMAGE (python:3.11-slim), DASHBOARD_IMAGE (lium-dashboard:latest), WHEEL_PLATFORMS.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${DASHBOARD_IMAGE:-lium-dashboard:latest}"
BASE_IMAGE="${BASE_IMAGE:-python:3.11-slim}"
# manylinux tags a glibc 2.36 system (Debian bookworm) runs; pip does not widen an explicit platform itself.
# pip reads a requirement's marker with the host's Python, not the target's: the download list drops the
# markers, so a wheel needed only by some 3.11 releases (async-timeout before 3.11.3; Debian's is 3.11.2) is there.
WHEEL_PLATFORMS="${WHEEL_PLATFORMS:-manylinux_2_36_x86_64 manylinux_2_34_x86_64 manylinux_2_28_x86_64 manylinux2014_x86_64}"
HOUSE=.wheelhouse

log() { echo "docker_build: $*" >&2; }

[[ -x .venv/bin/uv && -x .venv/bin/pip ]] || make install >/dev/null

mkdir -p "$HOUSE"
.venv/bin/uv export --frozen --no-dev --no-emit-project --format requirements-txt --quiet \
    -o "$HOUSE/requirements.new"
if cmp -s "$HOUSE/requirements.new" "$HOUSE/requirements.txt" && [[ -f "$HOUSE/.complete" ]]; then
    rm "$HOUSE/requirements.new"
    log "wheelhouse up to date ($(find "$HOUSE" -name '*.whl' | wc -l) wheels)"
else
    log "downloading the locked wheels into $HOUSE/"
    rm -f "$HOUSE"/*.whl "$HOUSE/.complete"
    mv "$HOUSE/requirements.new" "$HOUSE/requirements.txt"
    platform_args=()
    for platform in $WHEEL_PLATFORMS; do platform_args+=(--platform "$platform"); done
    sed -E 's/ ; [^\\]*/ /' "$HOUSE/requirements.txt" >"$HOUSE/download.txt"
    .venv/bin/pip download --quiet --disable-pip-version-check --require-hashes --no-deps --only-binary=:all: \
        --python-version 3.11 --implementation cp "${platform_args[@]}" \
        -r "$HOUSE/download.txt" -d "$HOUSE" 2> >(grep -v "is ignored: it is neither" >&2)
    touch "$HOUSE/.complete"
fi

log "building $IMAGE on $BASE_IMAGE"
started=$SECONDS
docker build --force-rm --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$IMAGE" . 2>&1 | grep -v -e "legacy builder is deprecated" -e "buildx" >&2
size="$(docker image inspect --format '{{.Size}}' "$IMAGE")"
log "built $IMAGE in $((SECONDS - started)) s: $((size / 1000000)) MB"
