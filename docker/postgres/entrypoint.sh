#!/bin/sh
# First start: a cluster in PGDATA whose superuser is POSTGRES_USER (password POSTGRES_PASSWORD,
# scram-sha-256 over the network, trust on the local socket as in the official image), and the
# database POSTGRES_DB. Every start: the server in the foreground as the postgres user.
set -eu
: "${POSTGRES_USER:=postgres}" "${POSTGRES_DB:=$POSTGRES_USER}"
: "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
as_postgres="setpriv --reuid=postgres --regid=postgres --init-groups"
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s' "$POSTGRES_PASSWORD" > "$pwfile"
    chown postgres "$pwfile"
    $as_postgres initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 > /dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    if [ "$POSTGRES_DB" != postgres ]; then
        $as_postgres pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start > /dev/null
        $as_postgres createdb -U "$POSTGRES_USER" "$POSTGRES_DB"
        $as_postgres pg_ctl -D "$PGDATA" -m fast -w stop > /dev/null
    fi
    echo "postgres-entrypoint: created $POSTGRES_DB for $POSTGRES_USER in $PGDATA"
fi
exec $as_postgres postgres -D "$PGDATA" -c listen_addresses='*'
