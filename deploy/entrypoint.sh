#!/bin/sh
# The image's entry point: one image, one command per role.
#   web      gunicorn (deploy/gunicorn.conf.py)
#   worker   a django-q2 cluster; Q_CLUSTER_NAME picks its class (joyback, ticks, notices, webhooks)
#   migrate  apply migrations, then exit (compose's one-shot service; run it before new code serves)
#   anything else is run as given (manage.py commands: `python manage.py ledger_verify`)
# MIGRATE_ON_START=true makes web and worker migrate first: for a single node only. With several
# nodes, run `migrate` once per release instead, so nodes never race to apply the same migration.
set -eu
cd "$(dirname "$0")/.."

role="${1:-web}"
if [ $# -gt 0 ]; then shift; fi

if [ "${MIGRATE_ON_START:-false}" = "true" ] && { [ "$role" = "web" ] || [ "$role" = "worker" ]; }; then
  python manage.py migrate --noinput
fi

case "$role" in
  web)
    exec gunicorn --config deploy/gunicorn.conf.py "$@" config.wsgi
    ;;
  worker)
    exec python manage.py qcluster
    ;;
  migrate)
    exec python manage.py migrate --noinput
    ;;
  *)
    exec "$role" "$@"
    ;;
esac
