#!/usr/bin/env bash
# Run the whole suite on the embedded default (SQLite + file-system broker), then again on PostgreSQL
# and Redis when they are reachable. Under CI (CI=true) a missing PostgreSQL or Redis is an error.
set -euo pipefail
cd "$(dirname "$0")/.."

export RUN_DIR="${RUN_DIR:-$PWD/.run/test}"
mkdir -p "$RUN_DIR"
PG_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
REDIS_URL="${TEST_REDIS_URL:-redis://127.0.0.1:6379/15}"
# The shared cache (sessions, poll state, offer listing, rate limits) on its own database: tests flush it.
CACHE_REDIS_URL="${TEST_CACHE_URL:-${REDIS_URL%/*}/13}"

echo "== Test suite on the embedded default (SQLite, file-system broker) =="
env -u DATABASE_URL -u CELERY_BROKER_URL -u CACHE_URL python -m pytest "$@"

pg_ok=0; redis_ok=0
python - "$PG_URL" <<'PY' && pg_ok=1 || true
import sys, psycopg
psycopg.connect(sys.argv[1].replace("postgres://", "postgresql://", 1), connect_timeout=3).close()
PY
python - "$REDIS_URL" <<'PY' && redis_ok=1 || true
import sys, redis
redis.Redis.from_url(sys.argv[1], socket_connect_timeout=3).ping()
PY

if [ "$pg_ok$redis_ok" = "11" ]; then
  echo "== Test suite on PostgreSQL ($PG_URL), a Redis broker ($REDIS_URL) and a Redis cache ($CACHE_REDIS_URL) =="
  # The axe run (every page, every persona, light and dark: minutes) judges rendered HTML and CSS, which the
  # database does not change: it runs in the first pass only.
  RUN_DIR="$RUN_DIR/pg" DATABASE_URL="$PG_URL" CELERY_BROKER_URL="$REDIS_URL" CACHE_URL="$CACHE_REDIS_URL" \
    python -m pytest --deselect tests/browser/test_browser_a11y.py "$@"
else
  reason="PostgreSQL reachable: $pg_ok, Redis reachable: $redis_ok"
  if [ "${CI:-}" = "true" ]; then
    echo "CI needs PostgreSQL and Redis for the second run ($reason)." >&2
    exit 1
  fi
  echo "== Skipped the PostgreSQL + Redis run: $reason (set TEST_DATABASE_URL / TEST_REDIS_URL) =="
fi
