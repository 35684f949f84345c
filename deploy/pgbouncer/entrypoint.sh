#!/bin/sh
# The one user PgBouncer lets in, from the environment (never baked into the image).
set -eu
: "${DB_USER:?set DB_USER}" "${DB_PASSWORD:?set DB_PASSWORD}"
umask 077
printf '"%s" "%s"\n' "$DB_USER" "$DB_PASSWORD" > /tmp/pgbouncer-users.txt
exec pgbouncer /etc/pgbouncer/pgbouncer.ini
