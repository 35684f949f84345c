# The application image: web nodes, worker clusters and the one-shot migrate all run it
# (deploy/entrypoint.sh picks the role). README "Production" says how to run it.

# --- build: the dependencies in a virtualenv, static files collected (the .mo files are committed) ---
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /venv
COPY requirements.txt /tmp/requirements.txt
RUN /venv/bin/pip install -r /tmp/requirements.txt
WORKDIR /app
COPY . .
# bench stays: the demo bank (payouts.demo_bank) writes its statements with bench.camt_gen.
RUN rm -rf .git .venv tests test-artifacts media db.sqlite3* sandbox-bank.sqlite3*
# Production settings refuse to load without a secret; this one only ever collects static files.
RUN DJANGO_SETTINGS_MODULE=config.settings.production SECRET_KEY=collectstatic-only-build-secret-not-used-at-runtime \
    /venv/bin/python manage.py collectstatic --noinput

# --- run: the virtualenv and the app, as a user that owns nothing it runs ---
FROM python:3.11-slim
ENV PATH=/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=config.settings.production \
    PROMETHEUS_MULTIPROC_DIR=/tmp/prometheus \
    LOG_FORMAT=json
RUN useradd --system --uid 10001 --no-create-home --home-dir /app --shell /usr/sbin/nologin joyback
COPY --from=build /venv /venv
COPY --from=build /app /app
WORKDIR /app
USER 10001
EXPOSE 8000
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
CMD ["web"]
