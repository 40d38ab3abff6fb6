# Production image for the dashboard: one image runs web (gunicorn), worker, beat, migrate and the simulator.
#
# Build it with `scripts/docker_build.sh` (the README's "Deploying with Docker Compose"): the script exports
# the locked dependencies from uv.lock (with their hashes) and downloads their wheels into .wheelhouse/ on the
# host, so this build installs exactly the locked set and needs no network. No secret is needed or baked in.
#
# BASE_IMAGE is any image with Python 3.11 (python3 -m venv, groupadd/useradd). The default is the official
# one; where Docker Hub is out of reach, deploy/ci/build_bases.sh makes one from Debian bookworm's packages.
# Works with the classic builder and BuildKit alike.

ARG BASE_IMAGE=python:3.11-slim

# --- builder: the locked dependencies in /opt/venv, the code with its static files in /src --------------------
FROM ${BASE_IMAGE} AS builder

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RUN_DIR=/tmp/dashboard-run

# Only the wheelhouse first: this layer is rebuilt only when the locked set changes.
COPY .wheelhouse/ /tmp/wheelhouse/
RUN test -s /tmp/wheelhouse/requirements.txt \
        || { echo "No .wheelhouse/requirements.txt: build with scripts/docker_build.sh" >&2; exit 1; } \
    && python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --quiet --no-index --find-links /tmp/wheelhouse --require-hashes --no-deps \
        -r /tmp/wheelhouse/requirements.txt \
    && /opt/venv/bin/pip check \
    && rm -rf /tmp/wheelhouse

WORKDIR /src
COPY . .
# Static files are collected here, with the production storage (hashed names + manifest, which the running
# app needs when DASHBOARD_ENV=production). The values below exist only for this one RUN step: placeholders,
# not secrets, and not stored in the image's environment.
RUN rm -rf .wheelhouse \
    && DASHBOARD_ENV=production \
       SECRET_KEY=build-only-placeholder-not-a-secret \
       FIELD_ENCRYPTION_KEYS=build-only-placeholder-not-a-secret \
       CELERY_BROKER_URL=memory:// \
       DATABASE_URL=sqlite:////tmp/build-only.sqlite3 \
       /opt/venv/bin/python manage.py collectstatic --noinput --verbosity 0 \
    && rm -rf /tmp/build-only.sqlite3 "$RUN_DIR" \
    && /opt/venv/bin/python -m compileall -q /src /opt/venv


# --- runtime: the base, the venv and the code; no compiler, no pip download, no dev dependency ----------------
FROM ${BASE_IMAGE} AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DJANGO_SETTINGS_MODULE=dashboard.settings \
    RUN_DIR=/tmp/dashboard-run

RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app --no-create-home --shell /usr/sbin/nologin app

# Code and venv stay owned by root: the app user can read them but not change them.
COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /src /app
WORKDIR /app

USER app:app
EXPOSE 8000

CMD ["gunicorn", "--config", "deploy/gunicorn.conf.py", "dashboard.wsgi:application"]
