#!/usr/bin/env bash
# Backup and restore, run: the README's "Backup and restore" steps on the compose stack, end to end.
#
#   1. the stack up (the simulator profile), as compose_smoke.sh brings it up (the images built once and reused:
#      build_bases.sh and docker_build.sh are cached);
#   2. rentals in every state (scripts/drill_rentals.py in the web container's `manage.py shell`): some through
#      the simulator with the workers up (ready, terminated by an operator, one held in the rent call while the
#      rent worker is killed, so the upstream commits while the row says `sending`), the rest inserted with the
#      ORM with the workers stopped (queued, sending, retrying on real nodes; the settled and holding states on
#      made-up ones), a webhook endpoint (a delivery per transition) and a support read (an audit row);
#   3. the backup, as README says (`pg_dump -Fc` through `docker compose exec`), and a count and checksum of
#      every table of the database, taken with only postgres, redis and the simulator running;
#   4. a fresh stack: every container but the simulator (the upstream, which a lost database does not take with
#      it) removed with its volumes; then README's restore: only postgres up, `pg_restore`, `up -d`;
#   5. the counts and checksums again (every rental, attempt, event, webhook delivery and audit row is back, and
#      every other table too), then drill_rentals.py's judge: the rentals in flight at the backup settle on what
#      the simulator's ledger says, nothing rented twice.
# Environment: COMPOSE_SMOKE_KEEP=1 keeps the stack up at the end; DASHBOARD_IMAGE, COMPOSE_PROJECT_NAME.
set -euo pipefail
cd "$(dirname "$0")/.."

export COMPOSE_PROJECT_NAME="${COMPOSE_PROJECT_NAME:-liumdrill}"
# shellcheck source=scripts/compose_lib.sh
. scripts/compose_lib.sh

# The tables the issue names: each must have rows, or the comparison would prove nothing about it.
NAMED_TABLES=(rentals_rental rentals_rentattempt rentals_rentalevent notifications_delivery accounts_supportread)

log "the images (built once: cached bases and layers)"
eval "$(deploy/ci/build_bases.sh | tail -n 1)"
export BASE_IMAGE="$PYTHON_BASE" COMPOSE_FILE=docker-compose.yml:deploy/ci/docker-compose.ci.yml
scripts/docker_build.sh

log "starting the stack"
docker compose up -d
wait_healthy 240
docker compose exec -e LIUM_API_KEY web python manage.py create_customer "Acme Research" --ref acme --credential-secret-env LIUM_API_KEY >/dev/null
docker compose exec -e USER_PASSWORD web python manage.py create_user alice --customer acme --password-env USER_PASSWORD >/dev/null
docker compose exec -e USER_PASSWORD web python manage.py create_user olga --operator --password-env USER_PASSWORD >/dev/null

drill() {  # drill STEP: run scripts/drill_rentals.py's step in the web container; print its JSON line
    # `shell -c`, not stdin: the shell reads stdin only when it is readable at once, which a piped exec is not always.
    docker compose exec -T -e DRILL_STEP="$1" -e LIUM_API_KEY web python manage.py shell -c "$(cat scripts/drill_rentals.py)" \
        >"$SMOKE_DIR/drill-$1.log" 2>&1 || { tail -n 30 "$SMOKE_DIR/drill-$1.log" >&2; return 1; }
    # Its own last line (the shell's JSON log lines start with {"time" too).
    grep '^{' "$SMOKE_DIR/drill-$1.log" | grep -v '^{"time"' | tail -n 1 | grep . \
        || { log "drill step $1 printed no result; its output ends:"; tail -n 30 "$SMOKE_DIR/drill-$1.log" >&2; return 1; }
}

log "rentals through the simulator (workers up)"
drill real >"$SMOKE_DIR/real.json"
log "rent worker killed while the simulator holds drill-held's rent call"
docker compose kill worker-rent >/dev/null
services="$(docker compose config --services | grep -vx -e postgres -e redis -e simulator -e web | tr '\n' ' ')"
# shellcheck disable=SC2086  # one word per service
docker compose stop $services >/dev/null
log "the other states through the ORM (workers stopped)"
drill inserted >"$SMOKE_DIR/inserted.json"
docker compose stop web >/dev/null
python3 - "$SMOKE_DIR/inserted.json" <<'PY' || fail "the seeded rentals do not cover every state"
import json
import sys

distinct = set(json.load(open(sys.argv[1]))["distinct"])
every = {"queued", "sending", "retrying", "rented", "verifying", "check_failed", "ready", "degraded", "refused",
         "failed", "unknown", "not_rented", "cancelled", "terminating", "terminated", "scheduled"}
print(f"backup_restore_drill: rentals in {len(distinct)} states: {', '.join(sorted(distinct))}", file=sys.stderr)
sys.exit(0 if every <= distinct else 1)
PY

# One line per table of the database: name, rows, md5 of its rows' text in order.
table_sums() {
    local tables sql=""
    tables="$(docker compose exec -T postgres psql -U lium -d lium -At -c \
        "select tablename from pg_tables where schemaname = 'public' order by 1")"
    for table in $tables; do
        sql+="${sql:+ union all }select '$table', count(*), md5(coalesce(string_agg(t::text, E'\\n' order by t::text), '')) from \"$table\" t"
    done
    docker compose exec -T postgres psql -U lium -d lium -At -F ' ' -c "$sql order by 1"
}

log "backup, as README says"
by_hand 'docker compose exec -T postgres pg_dump -U lium -Fc lium > lium.dump' "the dump in $SMOKE_DIR"
docker compose exec -T postgres pg_dump -U lium -Fc lium >"$SMOKE_DIR/lium.dump"
table_sums >"$SMOKE_DIR/before.txt"
for table in "${NAMED_TABLES[@]}"; do
    rows="$(awk -v t="$table" '$1 == t {print $2}' "$SMOKE_DIR/before.txt")"
    ((${rows:-0} > 0)) || fail "$table is empty before the backup: the comparison would prove nothing"
done
log "backup: $(du -h "$SMOKE_DIR/lium.dump" | cut -f1), $(wc -l <"$SMOKE_DIR/before.txt") tables"

log "a fresh stack: every container but the simulator removed, with the database's and the broker's volumes"
# shellcheck disable=SC2086
docker compose rm -sfv postgres redis web $services >/dev/null
command docker volume rm "${COMPOSE_PROJECT_NAME}_pgdata" "${COMPOSE_PROJECT_NAME}_redisdata" >/dev/null

log "restore, as README says"
by_hand 'docker compose up -d postgres' "the same"
docker compose up -d postgres
wait_healthy 120 postgres
by_hand 'docker compose exec -T postgres pg_restore -U lium -d lium --clean --if-exists < lium.dump' "the dump in $SMOKE_DIR"
docker compose exec -T postgres pg_restore -U lium -d lium --clean --if-exists <"$SMOKE_DIR/lium.dump"
table_sums >"$SMOKE_DIR/after.txt"
if ! diff "$SMOKE_DIR/before.txt" "$SMOKE_DIR/after.txt" >&2; then
    fail "the restored database differs from the backed-up one (above: table, rows, checksum)"
fi
while read -r table rows _sum; do
    [[ " ${NAMED_TABLES[*]} " == *" $table "* ]] && log "  $table: $rows rows, checksum equal"
done <"$SMOKE_DIR/after.txt"
log "every table came back: $(wc -l <"$SMOKE_DIR/after.txt") tables, $(awk '{n += $2} END {print n}' "$SMOKE_DIR/after.txt") rows, checksums equal"
by_hand 'docker compose up -d' "the same"
docker compose up -d
wait_healthy 240

log "the rentals in flight at the backup carry on (up to 5 minutes)"
drill judge >"$SMOKE_DIR/judge.json" || { cat "$SMOKE_DIR/judge.json" >&2; fail "a rental in flight at the backup did not settle truthfully"; }
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("backup_restore_drill: after the restore:", r["now"], file=sys.stderr)' "$SMOKE_DIR/judge.json"
log "the backup came back whole and the stack carried on"
