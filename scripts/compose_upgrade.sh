#!/usr/bin/env bash
# The upgrade path, for real: the previous commit's image runs the stack and rents (one rental Ready, one held
# in the upstream call), then this commit's image is built and `docker compose up -d` runs again, as the
# README's "Upgrading" says. Checks: the migrations ran once (none left, none recorded twice), the rental in
# flight settles, every rental, user and credential is still there. Ends with `down -v`, also on failure.
#
#   UPGRADE_FROM=<commit>   the version upgraded from (default HEAD~1). It is built with THIS commit's Dockerfile
#                           and scripts/docker_build.sh (an older commit may predate them): what is tested is the
#                           code and migrations upgrade, on the image recipe of today.
set -euo pipefail
cd "$(dirname "$0")/.."
export COMPOSE_PROJECT_NAME=liumupgrade
# shellcheck source=scripts/compose_lib.sh
. scripts/compose_lib.sh

FROM="${UPGRADE_FROM:-HEAD~1}"
FROM_SHA="$(git rev-parse --short "$FROM")"
PREVIOUS_IMAGE=lium-dashboard:upgrade-from
CURRENT_IMAGE="$DASHBOARD_IMAGE"

eval "$(deploy/ci/build_bases.sh | tail -n 1)"
export BASE_IMAGE="$PYTHON_BASE" COMPOSE_FILE=docker-compose.yml:deploy/ci/docker-compose.ci.yml

log "building $FROM ($FROM_SHA) as $PREVIOUS_IMAGE"
previous="$SMOKE_DIR/previous"
mkdir -p "$previous/scripts"
git archive "$FROM" | tar -x -C "$previous"
cp Dockerfile .dockerignore "$previous/"
cp scripts/docker_build.sh "$previous/scripts/"
ln -s "$PWD/.venv" "$previous/.venv"
[[ -d .wheelhouse ]] && cp -a .wheelhouse "$previous/"  # reused when the previous lock is the same
DASHBOARD_IMAGE="$PREVIOUS_IMAGE" "$previous/scripts/docker_build.sh"

psql() { docker compose exec postgres psql -U lium -d lium -Atc "$1"; }
count_rows() {  # what must survive the upgrade
    psql "select (select count(*) from rentals_rental) || ' rentals, ' || (select count(*) from auth_user)
          || ' users, ' || (select count(*) from accounts_upstreamcredential) || ' credentials, '
          || (select count(*) from rentals_rentattempt) || ' attempts'"
}

log "starting the stack on $FROM_SHA"
export DASHBOARD_IMAGE="$PREVIOUS_IMAGE"
docker compose up -d
wait_healthy 240 migrate web worker-rent worker-tracking worker-housekeeping simulator  # beat's first healthcheck comes after a minute: not needed yet
# The previous version may not have the create_* commands yet: its models' own API does the same.
docker compose exec -e LIUM_API_KEY -e USER_PASSWORD web python manage.py shell <<'PY'
import os

from django.contrib.auth.models import User

from accounts.models import Customer, Membership, UpstreamCredential

credential = UpstreamCredential(name="Upgrade key")
credential.set_secret(os.environ["LIUM_API_KEY"])
credential.save()
customer = Customer.objects.create(name="Acme Research", customer_ref="acme", default_credential=credential)
alice = User.objects.create_user("alice", password=os.environ["USER_PASSWORD"])
Membership.objects.create(user=alice, customer=customer)
PY

walk() { .venv/bin/python scripts/compose_walk.py --base-url "http://$DASHBOARD_HOST:$WEB_PORT" \
    --simulator-url "http://127.0.0.1:$SIM_PORT" --user alice --password-env USER_PASSWORD "$@"; }
walk --rent upgrade-settled --wait-ready >/dev/null
# The next rent call is held 25 s inside the simulator: the upgrade happens while it is in flight.
curl -fsS -X POST -H "Content-Type: application/json" \
    -d '{"seed": 1, "rules": [{"fault": "slow_commit", "next": 1, "seconds": 25}]}' \
    "http://127.0.0.1:$SIM_PORT/_sim/faults" >/dev/null
walk --rent upgrade-in-flight >/dev/null
before="$(count_rows)"
log "on $FROM_SHA: $before; in flight: $(psql "select status from rentals_rental where pod_name = 'upgrade-in-flight'")"

log "upgrading to this commit ($CURRENT_IMAGE)"
DASHBOARD_IMAGE="$CURRENT_IMAGE" scripts/docker_build.sh
export DASHBOARD_IMAGE="$CURRENT_IMAGE"
# The app's services only: the simulator (the upstream, which an upgrade of ours never restarts) keeps its state.
docker compose up -d --remove-orphans postgres redis migrate web worker-rent worker-tracking worker-housekeeping beat
wait_healthy 240

docker compose exec web python manage.py migrate --check --noinput >/dev/null \
    || fail "migrations are left unapplied after the upgrade"
twice="$(psql "select count(*) - count(distinct (app, name)) from django_migrations")"
[[ "$twice" == 0 ]] || fail "$twice migrations are recorded twice"
for _ in $(seq 60); do
    status="$(psql "select status from rentals_rental where pod_name = 'upgrade-in-flight'")"
    [[ "$status" == ready ]] && break
    sleep 3
done
[[ "$status" == ready ]] || fail "the rental in flight during the upgrade is '$status', not ready"
[[ "$(psql "select status from rentals_rental where pod_name = 'upgrade-settled'")" == ready ]] \
    || fail "the rental that was ready before the upgrade is not ready any more"
committed="$(curl -fsS "http://127.0.0.1:$SIM_PORT/_sim/ledger" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))')"
[[ "$committed" == 2 ]] || fail "the upstream committed $committed rents for our 2 rentals"
after="$(count_rows)"
# The in-flight rental gains the attempts it finishes with; everything else is counted as it was.
[[ "${after%, * attempts}" == "${before%, * attempts}" ]] || fail "rows were lost: before $before; after $after"
log "after the upgrade: $after; the rental in flight is ready; the upstream committed each rent once"
log "upgrade from $FROM_SHA passed"
# The simulator still runs on the previous image: take the stack down first, then drop that image.
docker compose down -v --remove-orphans >/dev/null 2>&1
command docker rmi "$PREVIOUS_IMAGE" >/dev/null 2>&1 || true
