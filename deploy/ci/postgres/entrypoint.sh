#!/bin/sh
# First start: create the cluster, the POSTGRES_USER superuser (password auth over the network) and
# POSTGRES_DB; then run PostgreSQL listening on every interface of the container.
set -eu
user="${POSTGRES_USER:-postgres}"
db="${POSTGRES_DB:-$user}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
    pwfile="$(mktemp)"
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" --encoding=UTF8 --locale=C.UTF-8 \
        --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    # The temporary server listens on a private socket only, so pg_isready (the healthcheck) stays
    # negative until the real server runs.
    pg_ctl --pgdata="$PGDATA" --wait --silent -o "-c listen_addresses='' -k /tmp" start
    if [ "$db" != "postgres" ]; then
        createdb --host=/tmp --username="$user" "$db"
    fi
    pg_ctl --pgdata="$PGDATA" --wait --silent stop
    echo "postgres-entrypoint: initialised $PGDATA (user $user, database $db)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
