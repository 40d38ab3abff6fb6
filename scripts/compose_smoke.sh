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
#     the worker container in the middle of a second rental, which must still settle after the restart;
#   - checks /readyz, /metrics (refused without the token), JSON logs from web and worker, no secret in any log;
#   - always ends with `down -v` (trap), also on failure, after printing the containers' logs.
# `docker compose` is the Compose v2 plugin when present, else Debian's docker-compose 1.29.
# Environment: COMPOSE_SMOKE_KEEP=1 keeps the stack up at the end (for a look around).
set -euo pipefail
cd "$(dirname "$0")/.."

STARTED=$SECONDS
log() { echo "compose_smoke: [$((SECONDS - STARTED)) s] $*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

# --- Tools -------------------------------------------------------------------------------------------------
apt_install() {  # apt_install PACKAGE...
    [[ "$(id -u)" == 0 ]] || fail "missing $*, and not root to apt-get install it"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "$@" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "$@" >/dev/null; }
}
command -v dockerd >/dev/null || apt_install docker.io
command -v docker-compose >/dev/null || apt_install docker-compose
command -v mmdebstrap >/dev/null || apt_install mmdebstrap
command -v chromium >/dev/null || apt_install chromium
[[ -x .venv/bin/python ]] || make install >/dev/null

if ! command docker info >/dev/null 2>&1; then
    log "starting dockerd"
    mkdir -p .run
    dockerd >.run/dockerd.log 2>&1 &
    for _ in $(seq 60); do command docker info >/dev/null 2>&1 && break; sleep 1; done
    command docker info >/dev/null 2>&1 || fail "dockerd did not start (see .run/dockerd.log)"
fi

# --- `docker compose` as the README writes it ----------------------------------------------------------------
SMOKE_DIR="$(mktemp -d)"
EMPTY_ENV="$SMOKE_DIR/empty.env"  # hermetic: a developer's .env is never read
: >"$EMPTY_ENV"
if command docker compose version >/dev/null 2>&1; then COMPOSE=(command docker compose); else COMPOSE=(docker-compose); fi
docker() {
    if [[ "${1:-}" != compose ]]; then command docker "$@"; return; fi
    shift
    local -a args=("$@")
    # No terminal in CI: exec and run must not ask for one.
    if [[ "${args[0]}" == exec || "${args[0]}" == run ]] && [[ ! -t 0 ]]; then args=("${args[0]}" -T "${args[@]:1}"); fi
    "${COMPOSE[@]}" --env-file "$EMPTY_ENV" "${args[@]}"
}
step() { echo "+ $1" >&2; eval "$1"; }  # a README step, run as written
by_hand() { echo "+ $1    (by hand in the README; here: $2)" >&2; }

# --- What .env holds for an operator -----------------------------------------------------------------------
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
token() { python3 -c "import secrets; print(secrets.token_hex($1))"; }
export COMPOSE_PROJECT_NAME=liumsmoke COMPOSE_PROFILES=simulator
export DASHBOARD_IMAGE=lium-dashboard:smoke
export SECRET_KEY="$(token 32)" POSTGRES_PASSWORD="$(token 24)" METRICS_TOKEN="$(token 24)"
FIELD_ENCRYPTION_KEYS="$(.venv/bin/python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
export FIELD_ENCRYPTION_KEYS
export WEB_PORT="$(free_port)" SIM_PORT="$(free_port)" DASHBOARD_HOST=127.0.0.1
export ALLOWED_HOSTS="$DASHBOARD_HOST" CSRF_TRUSTED_ORIGINS="http://$DASHBOARD_HOST:$WEB_PORT"
export LIUM_BASE_URL=http://simulator:8100/api LIUM_TIMEOUT_SECONDS=10
export WEB_CONCURRENCY=2 CELERY_WORKER_CONCURRENCY=2
export LIUM_API_KEY=sim-demo-key USER_PASSWORD="smoke-$(token 12)"

dump_and_down() {
    local status=$?
    set +e
    if [[ $status != 0 ]]; then
        log "failed: the containers and their last log lines"
        docker compose ps >&2
        docker compose logs --no-color --tail=60 >&2
    fi
    if [[ "${COMPOSE_SMOKE_KEEP:-}" == 1 ]]; then
        log "COMPOSE_SMOKE_KEEP=1: the stack stays up (COMPOSE_PROJECT_NAME=$COMPOSE_PROJECT_NAME)"
    else
        docker compose down -v --remove-orphans >/dev/null 2>&1
    fi
    rm -rf "$SMOKE_DIR"
    log "$([[ $status == 0 ]] && echo passed || echo FAILED) in $((SECONDS - STARTED)) s"
}
trap dump_and_down EXIT

# Every container of the stack healthy (migrate: exited 0); an unhealthy or failed one fails the run.
wait_healthy() {  # wait_healthy SECONDS
    local deadline=$((SECONDS + $1)) waiting
    while :; do
        waiting=""
        for id in $(docker compose ps -q); do
            read -r name state code health restarting < <(command docker inspect --format \
                '{{.Name}} {{.State.Status}} {{.State.ExitCode}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{.State.Restarting}}' "$id")
            case "$state/$health" in
                running/healthy) ;;
                exited/none) [[ "$name" == *migrate* && "$code" == 0 ]] || fail "$name exited with $code" ;;
                */unhealthy) fail "$name is unhealthy" ;;
                *) waiting+=" ${name#/}($state/$health)" ;;
            esac
        done
        [[ -z "$waiting" ]] && return 0
        ((SECONDS < deadline)) || fail "not healthy after $1 s:$waiting"
        sleep 3
    done
}

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

worker="$(docker compose ps -q worker)"
log "browser walk (the worker container $worker is crashed mid-rental)"
.venv/bin/python scripts/compose_walk.py --base-url "$BASE_URL" --simulator-url "http://127.0.0.1:$SIM_PORT" \
    --user alice --operator olga --password-env USER_PASSWORD \
    --crash-worker "sh -c 'kill -KILL \$(docker inspect --format {{.State.Pid}} $worker)'"
restarts="$(command docker inspect --format '{{.RestartCount}}' "$worker")"
((restarts >= 1)) || fail "the worker container was not restarted after the crash"
wait_healthy 120

metrics="$(curl -fsS -H "X-Forwarded-Proto: https" -H "Authorization: Bearer $METRICS_TOKEN" "$BASE_URL/metrics")"
grep -q '^dashboard_rentals{state="terminated"} 2.0$' <<<"$metrics" || fail "metrics do not count 2 terminated rentals"

log "checking the logs"
docker compose logs --no-color web worker beat migrate >"$SMOKE_DIR/logs.txt"
for secret in "$LIUM_API_KEY" "$USER_PASSWORD" "$SECRET_KEY" "$POSTGRES_PASSWORD" "$METRICS_TOKEN"; do
    ! grep -qF -- "$secret" "$SMOKE_DIR/logs.txt" || fail "a secret appears in the containers' logs"
done
python3 - "$SMOKE_DIR/logs.txt" <<'PY' || fail "the web and worker logs are not JSON lines with the rental's id"
import json
import sys

seen = {"web": 0, "worker": 0}
for line in open(sys.argv[1], encoding="utf-8"):
    service, _, body = line.partition("|")
    service = service.strip().rsplit("_", 1)[0].rsplit("-", 1)[0]  # web_1 (v1) or liumsmoke-web-1 (v2)
    if service in seen and body.strip().startswith("{"):
        record = json.loads(body)
        if record.get("rental_id") and record.get("level") and record.get("logger"):
            seen[service] += 1
print(f"compose_smoke: JSON log lines naming a rental: {seen}", file=sys.stderr)
sys.exit(0 if all(seen.values()) else 1)
PY
grep -q "dashboard.W001" "$SMOKE_DIR/logs.txt" && fail "METRICS_TOKEN is set, yet migrate warned about it"
log "the stack served a real rental through its containers"
