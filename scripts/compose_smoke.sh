#!/usr/bin/env bash
# Smoke test of the production stack for real: build the images, run docker-compose.yml (with the simulator
# profile), and rent a cluster through the containers in a browser.
#
# The steps printed with `+` are the README's "Deploying with Docker Compose", line for line
# (tests/site/test_deploy_readme.py keeps the two equal). Around them the script:
#   - starts dockerd when none answers, and installs docker.io, docker-compose and mmdebstrap when missing (root);
#   - stands in for `.env` with generated secrets in its own environment (no .env file is read or written);
#   - waits for every healthcheck; fails on any unhealthy, restarting or failed container;
#   - drives Chromium through login -> rent 2 nodes -> ready -> terminate (scripts/compose_walk.py), crashing
#     the worker container in the middle of a second rental, which must still settle after the restart, and
#     restarting the postgres and redis containers in the middle of a third, which must settle truthfully (the
#     simulator's ledger agrees; the pages answer 503 meanwhile, never a 500);
#   - checks /readyz, /metrics (refused without the token), JSON logs from web and worker, no secret in any log;
#   - always ends with `down -v` (trap), also on failure, after printing the containers' logs.
# `docker compose` is the Compose v2 plugin when present, else Debian's docker-compose 1.29.
# Environment: COMPOSE_SMOKE_KEEP=1 keeps the stack up at the end (for a look around).
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/compose_lib.sh
. scripts/compose_lib.sh

# --- The README's steps --------------------------------------------------------------------------------------
log "building the base images and the app image"
step 'eval "$(deploy/ci/build_bases.sh | tail -n 1)"'
step 'export BASE_IMAGE="$PYTHON_BASE" COMPOSE_FILE=docker-compose.yml:deploy/ci/docker-compose.ci.yml'
old_image="$(command docker image inspect --format '{{.Id}}' "$DASHBOARD_IMAGE" 2>/dev/null || true)"
step 'scripts/docker_build.sh'
new_image="$(command docker image inspect --format '{{.Id}}' "$DASHBOARD_IMAGE")"
if [[ -n "$old_image" && "$old_image" != "$new_image" ]]; then command docker rmi "$old_image" >/dev/null 2>&1 || true; fi

by_hand 'cp deploy/env.example .env' "the variables are exported by this script"
by_hand 'set -a && . ./.env && set +a' "the same"
log "starting the stack"
step 'docker compose up -d'
wait_healthy 240
step 'docker compose ps'
step 'docker compose exec -e LIUM_API_KEY web python manage.py create_customer "Acme Research" --ref acme --credential-secret-env LIUM_API_KEY'
step 'docker compose exec -e USER_PASSWORD web python manage.py create_user alice --customer acme --password-env USER_PASSWORD'
step 'docker compose exec -e USER_PASSWORD web python manage.py create_user olga --operator --password-env USER_PASSWORD'
step 'curl -fsS -H "Host: $DASHBOARD_HOST" "http://127.0.0.1:${WEB_PORT:-8000}/readyz"'
echo >&2
step 'curl -fsS -H "Host: $DASHBOARD_HOST" -H "X-Forwarded-Proto: https" -H "Authorization: Bearer $METRICS_TOKEN" "http://127.0.0.1:${WEB_PORT:-8000}/metrics" | grep dashboard_rentals'

# --- Beyond the README: probes, the browser, a crashed worker, the logs ------------------------------------------
BASE_URL="http://$DASHBOARD_HOST:$WEB_PORT"
metrics_status="$(curl -s -o /dev/null -w '%{http_code}' -H "X-Forwarded-Proto: https" "$BASE_URL/metrics")"
[[ "$metrics_status" == 401 ]] || fail "/metrics without the token answered $metrics_status, not 401"
[[ "$(curl -fsS "$BASE_URL/readyz")" == '{"status": "ok"}' ]] || fail "/readyz is not ok"

worker="$(docker compose ps -q worker-rent)"
postgres_started="$(command docker inspect --format '{{.State.StartedAt}}' "$(docker compose ps -q postgres)")"
log "browser walk (the rent worker container $worker is crashed mid-rental; postgres and redis restarted mid-rental)"
.venv/bin/python scripts/compose_walk.py --base-url "$BASE_URL" --simulator-url "http://127.0.0.1:$SIM_PORT" \
    --user alice --operator olga --password-env USER_PASSWORD \
    --crash-worker "sh -c 'kill -KILL \$(docker inspect --format {{.State.Pid}} $worker)'" \
    --restart-services "sh -c '${COMPOSE[*]} --env-file $EMPTY_ENV restart postgres redis'"
restarts="$(command docker inspect --format '{{.RestartCount}}' "$worker")"
((restarts >= 1)) || fail "the worker container was not restarted after the crash"
[[ "$(command docker inspect --format '{{.State.StartedAt}}' "$(docker compose ps -q postgres)")" != "$postgres_started" ]] \
    || fail "the postgres container was not restarted"
wait_healthy 120

metrics="$(curl -fsS -H "X-Forwarded-Proto: https" -H "Authorization: Bearer $METRICS_TOKEN" "$BASE_URL/metrics")"
# The first two, and the third (held while postgres and redis restarted) when it settled Ready.
grep -qE '^dashboard_rentals\{state="terminated"\} [23]\.0$' <<<"$metrics" || fail "metrics do not count the terminated rentals"

log "checking the logs"
docker compose logs --no-color web worker-rent worker-tracking worker-housekeeping beat migrate >"$SMOKE_DIR/logs.txt"
for secret in "$LIUM_API_KEY" "$USER_PASSWORD" "$SECRET_KEY" "$POSTGRES_PASSWORD" "$METRICS_TOKEN"; do
    ! grep -qF -- "$secret" "$SMOKE_DIR/logs.txt" || fail "a secret appears in the containers' logs"
done
python3 - "$SMOKE_DIR/logs.txt" <<'PY' || fail "the web and worker logs are not JSON lines with the rental's id"
import json
import sys

import re

seen = {"web": 0, "worker-rent": 0}
for line in open(sys.argv[1], encoding="utf-8"):
    service, _, body = line.partition("|")
    service = re.sub(r"[-_]\d+$", "", service.strip())  # worker-rent_1 (v1) or worker-rent-1 (v2)
    service = service.removeprefix("liumsmoke-").removeprefix("liumsmoke_")
    if service in seen and body.strip().startswith("{"):
        record = json.loads(body)
        if record.get("rental_id") and record.get("level") and record.get("logger"):
            seen[service] += 1
print(f"compose_smoke: JSON log lines naming a rental: {seen}", file=sys.stderr)
sys.exit(0 if all(seen.values()) else 1)
PY
grep -q "dashboard.W001" "$SMOKE_DIR/logs.txt" && fail "METRICS_TOKEN is set, yet migrate warned about it"
log "the stack served a real rental through its containers"
