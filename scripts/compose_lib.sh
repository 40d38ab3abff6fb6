#!/usr/bin/env bash
# Shared by scripts/compose_smoke.sh and scripts/compose_upgrade.sh (sourced, from the repository root):
# the tools (dockerd, docker-compose, mmdebstrap, chromium), `docker compose` as the README writes it,
# generated stand-ins for .env's secrets, `down -v` on exit (also on failure), and wait_healthy.
# shellcheck disable=SC2034  # variables used by the scripts that source this file

STARTED=$SECONDS
log() { echo "$(basename "$0" .sh): [$((SECONDS - STARTED)) s] $*" >&2; }
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
    # No terminal in CI: exec and run must not ask for one. Never twice: docker-compose 1.29 given `-T -T` runs
    # nothing and exits 0 (README's `exec -T postgres pg_dump` would write an empty dump).
    if [[ "${args[0]}" == exec || "${args[0]}" == run ]] && [[ ! -t 0 && " ${args[*]} " != *" -T "* ]]; then
        args=("${args[0]}" -T "${args[@]:1}")
    fi
    "${COMPOSE[@]}" --env-file "$EMPTY_ENV" "${args[@]}"
}
step() { echo "+ $1" >&2; eval "$1"; }  # a README step, run as written
by_hand() { echo "+ $1    (by hand in the README; here: $2)" >&2; }

# --- What .env holds for an operator -----------------------------------------------------------------------
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
token() { python3 -c "import secrets; print(secrets.token_hex($1))"; }
export COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-liumsmoke}" COMPOSE_PROFILES=simulator
export DASHBOARD_IMAGE="${DASHBOARD_IMAGE:-lium-dashboard:smoke}"
export SECRET_KEY="$(token 32)" POSTGRES_PASSWORD="$(token 24)" METRICS_TOKEN="$(token 24)"
FIELD_ENCRYPTION_KEYS="$(.venv/bin/python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())')"
export FIELD_ENCRYPTION_KEYS
export WEB_PORT="$(free_port)" SIM_PORT="$(free_port)" DASHBOARD_HOST=127.0.0.1
export ALLOWED_HOSTS="$DASHBOARD_HOST" CSRF_TRUSTED_ORIGINS="http://$DASHBOARD_HOST:$WEB_PORT"
export LIUM_BASE_URL=http://simulator:8100/api LIUM_TIMEOUT_SECONDS=10
export WEB_CONCURRENCY=2 RENT_WORKER_CONCURRENCY=16 TRACKING_WORKER_CONCURRENCY=2 HOUSEKEEPING_WORKER_CONCURRENCY=2
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

# Every container of the stack (or of the services named) healthy, migrate exited 0; an unhealthy or failed
# one fails the run.
wait_healthy() {  # wait_healthy SECONDS [SERVICE...]
    local deadline=$((SECONDS + $1)) waiting
    shift
    while :; do
        waiting=""
        for id in $(docker compose ps -q "$@"); do
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

