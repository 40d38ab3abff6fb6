# syntax=docker/dockerfile:1
# Production image for the dashboard: one image runs web (gunicorn), worker, beat, migrate and the simulator.
# Build:  docker build -t lium-dashboard .      (no secret is needed, and none is baked in)

ARG PYTHON_IMAGE=python:3.11-slim

# --- builder: the locked dependencies in /opt/venv -----------------------------------------------------
FROM ${PYTHON_IMAGE} AS builder

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_PROJECT_ENVIRONMENT=/opt/venv \
    UV_PYTHON=/usr/local/bin/python3.11 \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1

RUN pip install uv==0.13.8

WORKDIR /app
# Only the lock and the project file: the dependency layer is rebuilt only when they change.
COPY pyproject.toml uv.lock ./
RUN uv sync --frozen --no-dev --no-install-project


# --- runtime --------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    DJANGO_SETTINGS_MODULE=dashboard.settings \
    RUN_DIR=/tmp/dashboard-run

RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app --no-create-home --shell /usr/sbin/nologin app

COPY --from=builder /opt/venv /opt/venv

WORKDIR /app
# The code stays owned by root: the app user can read it but not change it.
COPY . .

# Static files are collected at build time, with the production storage (hashed names + manifest, which
# the running app needs when DASHBOARD_ENV=production). The values below exist only for this one RUN step:
# they are placeholders, not secrets, and are not stored in the image's environment.
RUN DASHBOARD_ENV=production \
    SECRET_KEY=build-only-placeholder-not-a-secret \
    FIELD_ENCRYPTION_KEYS=build-only-placeholder-not-a-secret \
    CELERY_BROKER_URL=memory:// \
    DATABASE_URL=sqlite:////tmp/build-only.sqlite3 \
    python manage.py collectstatic --noinput \
    && rm -rf /tmp/build-only.sqlite3 "$RUN_DIR" \
    && python -m compileall -q .

USER app:app
EXPOSE 8000

CMD ["gunicorn", "--config", "deploy/gunicorn.conf.py", "dashboard.wsgi:application"]
