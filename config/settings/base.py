"""Settings shared by every environment. Everything that differs between machines comes from the
environment; the defaults here are the embedded demo (SQLite + django-q2's ORM broker)."""

import os
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer") from exc


SECRET_KEY = os.environ.get("SECRET_KEY", "")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.contrib.sitemaps",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "djmoney",
    "django_q",
    "core",
    "reconciliation",
    "recipients",
    "campaigns",
    "payouts",
    "web",
]

# The client's address behind our proxies first (core.proxy), then the probes and /metrics
# (core.health): before the host check, the https redirect and the session, so a load balancer
# probing by address gets its answer. HTTP metrics (django-prometheus) wrap everything else.
MIDDLEWARE = [
    "core.proxy.TrustedProxyMiddleware",
    "core.health.HealthMiddleware",
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Django's, with the public site's /it/ prefix kept to the site's own pages (web.site.middleware).
    "web.site.middleware.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.i18n",
                "web.demo_views.demo_context",
            ],
        },
    },
]


# Behind PgBouncer in transaction mode (DATABASE_POOLER=pgbouncer, or ?pgbouncer=1 on the URL) each
# transaction may run on another server connection: a named cursor (Django's ``.iterator()``) or a
# prepared statement made on one is missing on the next. Django then reads ``.iterator()`` results
# with client-side cursors (the whole result in memory, handed out in chunks) and psycopg prepares
# nothing. core.checks_production refuses the pooler without both.
POOLERS = ("", "pgbouncer")


def url_pooler(url: str) -> tuple[str, str]:
    """``url`` without a ``pgbouncer`` query flag (not a driver option), and the pooler it names."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(key, value) for key, value in query if key != "pgbouncer"]
    if len(kept) == len(query):
        return url, ""
    return urlunsplit(parts._replace(query=urlencode(kept))), "pgbouncer"


def database_from_url(url: str, *, conn_max_age: int = 0, pooler: str = "") -> dict:
    """The default database from a URL, with each engine's options. ``pgbouncer=1`` in the URL's
    query is the same as ``pooler="pgbouncer"``. A kept connection (``conn_max_age`` > 0) is
    checked before each request or task reuses it (``CONN_HEALTH_CHECKS``): one the database
    closed (a restart, a failover, an idle timeout) is replaced instead of failing that work."""
    url, flagged = url_pooler(url)
    pooler = pooler or flagged
    database = dj_database_url.parse(url, conn_max_age=conn_max_age, conn_health_checks=conn_max_age > 0)
    if database["ENGINE"] == "django.db.backends.sqlite3":
        # WAL + a busy timeout let the web process and the qcluster worker share the demo database
        # without "database is locked" errors; IMMEDIATE makes writers queue at BEGIN instead of
        # failing at their first write.
        database["OPTIONS"] = {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    elif database["ENGINE"] == "django.db.backends.postgresql" and pooler == "pgbouncer":
        database["DISABLE_SERVER_SIDE_CURSORS"] = True
        database.setdefault("OPTIONS", {})["prepare_threshold"] = None
    elif database["ENGINE"] == "django.db.backends.postgresql" and env_bool("DB_PREPARED_STATEMENTS", True):
        # Django turns psycopg's prepared statements off (prepare_threshold=None), and psycopg
        # then ignores even an explicit ``execute(..., prepare=True)``: the hot paths' pipelined
        # statements (``core.bulk``) were parsed and planned on every event. A threshold no
        # query reaches keeps Django's own queries unprepared (its client-side cursors interpolate
        # literals anyway) and lets the statements that ask for it be prepared once per
        # connection. Behind PgBouncer in transaction mode, DATABASE_POOLER=pgbouncer turns this
        # off (or DB_PREPARED_STATEMENTS=false).
        database.setdefault("OPTIONS", {})["prepare_threshold"] = 2**31 - 1
    if database["ENGINE"] == "django.db.backends.postgresql":
        # TCP keepalives on a kept connection: one a firewall or NAT dropped while idle is found
        # dead within a minute, instead of the health check waiting on it with no timeout.
        for option, value in _KEEPALIVES.items():
            database.setdefault("OPTIONS", {}).setdefault(option, value)
    return database


_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 30, "keepalives_interval": 10, "keepalives_count": 3}


_database_url = os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
# Every process reuses its database connection for DB_CONN_MAX_AGE seconds (0: a new one per request
# and per task). django-q2 closes a connection CONN_MAX_AGE allows no longer before every task
# and every poll of its ORM broker (five a second per cluster), so with 0 the worker clusters
# forked a PostgreSQL backend about 90 times a second under a viral campaign's load (bench-viral).
DB_CONN_MAX_AGE = env_int("DB_CONN_MAX_AGE", 60)
DATABASE_POOLER = os.environ.get("DATABASE_POOLER", "").strip().lower() or url_pooler(_database_url)[1]
if DATABASE_POOLER not in POOLERS:
    raise ImproperlyConfigured(f"DATABASE_POOLER must be one of {', '.join(repr(p) for p in POOLERS)}")
DATABASES = {"default": database_from_url(_database_url, conn_max_age=DB_CONN_MAX_AGE, pooler=DATABASE_POOLER)}
# An opt-in streaming standby for the reads marked lag-tolerant (core.replica): without
# DATABASE_REPLICA_URL there is no second alias and nothing changes. Parsed like DATABASE_URL; the
# pooler of DATABASE_POOLER (or the replica URL's own ?pgbouncer=1) applies to it too. In tests it
# mirrors the default database, so no second test database is ever made.
DATABASE_REPLICA_URL = os.environ.get("DATABASE_REPLICA_URL", "").strip()
DATABASE_REPLICA_PIN_SECONDS = env_int("DATABASE_REPLICA_PIN_SECONDS", 15)
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = database_from_url(DATABASE_REPLICA_URL, conn_max_age=DB_CONN_MAX_AGE, pooler=DATABASE_POOLER)
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
    _after = MIDDLEWARE.index("django.middleware.common.CommonMiddleware") + 1
    MIDDLEWARE.insert(_after, "core.replica.ReadAfterWriteMiddleware")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("it", "Italiano")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "Europe/Amsterdam"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").exists() else []
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", BASE_DIR / "media"))

# Money: the ledger keeps integer minor units; django-money is used at the edges.
CURRENCIES = tuple(env_list("CURRENCIES", "EUR,GBP,USD,CHF,PLN,SEK,DKK,NOK,CZK,HUF,RON"))
DEFAULT_CURRENCY = "EUR"

# django-q2 with the ORM broker on the default database: a task enqueued inside a transaction
# is a row written in that transaction, so it exists only if the transaction commits (an outbox).
# retry must exceed timeout, or a slow task is handed to a second worker while the first still runs.
# timeout is a last resort, never a schedule: the guard terminate()s a worker past it, which can
# leave a multiprocessing queue's lock held by the dead process — results stop reaching the
# monitor (nothing is acked, the broker hands every task out again after retry) and on SIGTERM
# the cluster waits forever for workers stuck on that lock. So every task bounds its own work far
# below it (campaigns.webhooks: COLLECT_BUDGET_SECONDS, SEND_BUDGET_SECONDS, then a follow-up task).
# queue_limit: how many tasks the pusher takes from the broker ahead of the workers (default
# workers²). On SIGTERM the workers run all of those before they stop, so a short prefetch is what
# makes a busy cluster stop within seconds (tests/api/test_webhook_load.py: under 30 s).
_q_workers = env_int("Q_WORKERS", 2)
# Background work runs in one cluster per class, each reading a queue of its own (django-q2's
# ALT_CLUSTERS; a process picks its class with the Q_CLUSTER_NAME environment variable), so a
# backlog of one class never delays another: money (the default cluster: payouts executed and
# settled, rewards matured, statements matched), ticks (every schedule, stale-claim recovery
# among them, on time whatever the other queues hold), notices (e-mail and WhatsApp) and webhooks
# (deliveries to partners). Q_ROUTES sends each task to its class; what it does not name is money.
# "name" is fixed: it is also the key every cluster signs and reads the queue's payloads with.
Q_CLASSES = ("ticks", "notices", "webhooks")
Q_CLUSTER = {
    "name": "joyback",
    "orm": "default",
    "workers": _q_workers,
    "queue_limit": env_int("Q_QUEUE_LIMIT", _q_workers),
    "timeout": env_int("Q_TIMEOUT", 60),
    "retry": env_int("Q_RETRY", 90),
    "max_attempts": env_int("Q_MAX_ATTEMPTS", 5),
    "ack_failures": True,
    "catch_up": False,
    "poll": float(os.environ.get("Q_POLL", "0.2")),
    # 0: every result is kept, pruned by age (core.retention, RETENTION_TASK_RESULT_DAYS). A limit
    # above 0 makes django-q2 lock every stored success row each time it saves one (SELECT ... FOR
    # UPDATE on the whole table): under a hot campaign that lock was most of the database's waits
    # (bench-viral: 6,726 of ~9,700 waiting samples) and it serialised every cluster's results.
    "save_limit": env_int("Q_SAVE_LIMIT", 0),
    "sync": env_bool("Q_SYNC", False),
    "label": "Background tasks",
    "ALT_CLUSTERS": {
        name: {"workers": workers, "queue_limit": workers}
        for name, workers in (
            ("ticks", env_int("Q_WORKERS_TICKS", 1)),
            ("notices", env_int("Q_WORKERS_NOTICES", 1)),
            ("webhooks", env_int("Q_WORKERS_WEBHOOKS", 2)),
        )
    },
}
# Task path (or the prefix of one) → the class whose cluster runs it.
Q_ROUTES = {
    "recipients.tasks.": "notices",
    "campaigns.webhook_tasks.": "webhooks",
}

# One line of text per record, or one JSON object per line (LOG_FORMAT=json) for a log shipper.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "plain").strip().lower()
if LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured("LOG_FORMAT must be plain or json")
# Log lines carry no personal data (core.logging): every handler masks e-mails, phone numbers,
# IBANs and IPs, so erasure never has a log to rewrite. Django's own loggers are routed here too,
# or its default handlers (runserver's request lines, mail to ADMINS) would write unmasked.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "core.logging.JsonFormatter"},
    },
    "filters": {
        "no_traceback_below_500": {"()": "core.logging.NoTracebackBelow500"},
        "redact_personal_data": {"()": "core.logging.RedactPersonalData"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["redact_personal_data"],
        },
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.server": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "security": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.request": {"handlers": ["console"], "filters": ["no_traceback_below_500"], "propagate": False},
    },
}

# Bank statement files: the largest file an import accepts (uploads, command and API alike).
STATEMENT_MAX_BYTES = env_int("STATEMENT_MAX_BYTES", 256 * 1024 * 1024)
# How long a bank line may stay new, or a match task queued, before ledger_verify fails.
STATEMENT_MATCH_STUCK_AFTER_SECONDS = env_int("STATEMENT_MATCH_STUCK_AFTER_SECONDS", 900)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 10 * 1024 * 1024)
FILE_UPLOAD_MAX_MEMORY_SIZE = env_int("FILE_UPLOAD_MAX_MEMORY_SIZE", 5 * 1024 * 1024)

# People's IBANs are encrypted at rest (Fernet, key derived by HKDF from the first of these
# comma-separated keys; the others still decrypt during a rotation) and looked up by a keyed
# fingerprint whose key must never change. Outside production both fall back to SECRET_KEY.
FIELD_ENCRYPTION_KEY = os.environ.get("FIELD_ENCRYPTION_KEY", "")
FIELD_FINGERPRINT_KEY = os.environ.get("FIELD_FINGERPRINT_KEY", "")
PHONE_DEFAULT_REGION = os.environ.get("PHONE_DEFAULT_REGION", "IT")

# Payout rails (payouts/rails/). The sandbox is the default: it settles at once and fails on
# purpose for the IBANs below, so every payout path can be shown without a bank.
PAYOUT_DEFAULT_RAIL = os.environ.get("PAYOUT_DEFAULT_RAIL", "sandbox")
SANDBOX_STORE_PATH = os.environ.get("SANDBOX_STORE_PATH", "")
SANDBOX_FAILING_IBANS = {
    "NL11INGB0000000404": "closed_account",
    "NL10INGB0000000422": "rejected:AG01",
    "NL97INGB0000000408": "timeout:2",
    "NL06INGB0000000300": "return:MS03",
    "NL28INGB0000000777": "vop_close_match:J. Doe",
}
PAYOUT_RAILS = {
    "sepa_file": {
        "BACKEND": "payouts.rails.sepa_file.SepaFileRail",
        "OPTIONS": {
            "debtor_name": os.environ.get("SEPA_DEBTOR_NAME", "JoyBack Payouts B.V."),
            "debtor_iban": os.environ.get("SEPA_DEBTOR_IBAN", "NL91ABNA0417164300"),
            "debtor_bic": os.environ.get("SEPA_DEBTOR_BIC", "ABNANL2A"),
        },
    },
}
# The package a new brand starts on (campaigns.models.plans; ops edit the packages in the admin).
PLAN_DEFAULT_SLUG = os.environ.get("PLAN_DEFAULT_SLUG", "all-in-one")
# Payout execution; ``payouts.conf`` says what each one does.
PAYOUT_APPROVAL_THRESHOLD_MINOR = env_int("PAYOUT_APPROVAL_THRESHOLD_MINOR", 100_000)
# Budget alerts e-mailed to a brand's team: thresholds of spent budget at or above this (50, 80, 100).
BRAND_BUDGET_ALERT_MIN_PCT = env_int("BRAND_BUDGET_ALERT_MIN_PCT", 80)
# A brand's withdrawal to its own bank account at or above this waits for ops (four-eyes).
WITHDRAWAL_APPROVAL_THRESHOLD_MINOR = env_int("WITHDRAWAL_APPROVAL_THRESHOLD_MINOR", 100_000)
PAYOUT_BATCH_APPROVAL_THRESHOLD_MINOR = env_int("PAYOUT_BATCH_APPROVAL_THRESHOLD_MINOR", 1_000_000)
# A pain.001 file nobody downloaded within this many days expires (payouts.tasks, daily): never
# sent, so its payouts fail back to payable and go out in a new file; the stale file is refused.
PAYOUT_BATCH_EXPIRE_DAYS = env_int("PAYOUT_BATCH_EXPIRE_DAYS", 7)
PAYOUT_MAX_ATTEMPTS = env_int("PAYOUT_MAX_ATTEMPTS", 6)
PAYOUT_BACKOFF_BASE_SECONDS = env_int("PAYOUT_BACKOFF_BASE_SECONDS", 30)
PAYOUT_BACKOFF_MAX_SECONDS = env_int("PAYOUT_BACKOFF_MAX_SECONDS", 3600)
PAYOUT_STALE_CLAIM_SECONDS = env_int("PAYOUT_STALE_CLAIM_SECONDS", 120)
PAYOUT_REQUEUE_AFTER_SECONDS = env_int("PAYOUT_REQUEUE_AFTER_SECONDS", 900)
PAYOUT_FAILED_RETRY_MINUTES = env_int("PAYOUT_FAILED_RETRY_MINUTES", 60)
PAYOUT_FAILED_RETRY_MAX_HOURS = env_int("PAYOUT_FAILED_RETRY_MAX_HOURS", 24)
if "PAYOUT_ENQUEUE_ON_PAYABLE" in os.environ:  # unset: on, unless tasks run inline (payouts.conf)
    PAYOUT_ENQUEUE_ON_PAYABLE = env_bool("PAYOUT_ENQUEUE_ON_PAYABLE", True)
# How long the PSP's account requirements (the fields a local bank account needs per currency,
# recipients.accounts) are kept in the cache before they are asked again.
ACCOUNT_REQUIREMENTS_CACHE_SECONDS = env_int("ACCOUNT_REQUIREMENTS_CACHE_SECONDS", 86_400)
if os.environ.get("WISE_BASE_URL"):
    PAYOUT_RAILS["psp_api"] = {
        "BACKEND": "payouts.rails.psp_api.WiseRail",
        "OPTIONS": {
            "base_url": os.environ["WISE_BASE_URL"],
            "api_token": os.environ.get("WISE_API_TOKEN", ""),
            "profile_id": os.environ.get("WISE_PROFILE_ID", ""),
            "webhook_public_key_pem": os.environ.get("WISE_WEBHOOK_PUBLIC_KEY", ""),
        },
    }

# The instant rail: SCT Inst through Adyen's Transfers API (payouts.rails.adyen), falling back to
# a standard SCT where the receiving bank takes no instant payments (ADYEN_INSTANT_ONLY: refuse
# instead, and let the route's fallback rail carry the payout).
if os.environ.get("ADYEN_BASE_URL"):
    PAYOUT_RAILS["psp_instant"] = {
        "BACKEND": "payouts.rails.adyen.AdyenTransfersRail",
        "OPTIONS": {
            "base_url": os.environ["ADYEN_BASE_URL"],
            "api_key": os.environ.get("ADYEN_API_KEY", ""),
            "balance_account_id": os.environ.get("ADYEN_BALANCE_ACCOUNT_ID", ""),
            "fallback": not env_bool("ADYEN_INSTANT_ONLY", False),
        },
    }
# PayPal Payouts (payouts.rails.paypal): people who choose a PayPal e-mail on a campaign that
# allows it are paid from the platform's PayPal balance.
if os.environ.get("PAYPAL_BASE_URL"):
    PAYOUT_RAILS["paypal"] = {
        "BACKEND": "payouts.rails.paypal.PayPalPayoutsRail",
        "OPTIONS": {
            "base_url": os.environ["PAYPAL_BASE_URL"],
            "client_id": os.environ.get("PAYPAL_CLIENT_ID", ""),
            "client_secret": os.environ.get("PAYPAL_CLIENT_SECRET", ""),
            "webhook_id": os.environ.get("PAYPAL_WEBHOOK_ID", ""),
            "unclaimed_cancel_after_hours": env_int("PAYPAL_UNCLAIMED_CANCEL_HOURS", 24),
        },
    }
# Verification of Payee for rails without their own check (payouts.rails.vop): an EPC VOP API.
PAYOUT_VOP = {}
if os.environ.get("VOP_BASE_URL"):
    PAYOUT_VOP = {
        "BACKEND": "payouts.rails.vop.EpcVopClient",
        "OPTIONS": {
            "base_url": os.environ["VOP_BASE_URL"],
            "requester_bic": os.environ.get("VOP_REQUESTER_BIC", ""),
            "api_token": os.environ.get("VOP_API_TOKEN", ""),
        },
    }
# Debtor accounts whose bank executes pain.001 files marked instant (LclInstrm INST).
SEPA_INSTANT_FILE_IBANS = [i.strip() for i in os.environ.get("SEPA_INSTANT_FILE_IBANS", "").split(",") if i.strip()]

# --- Brand portal, claim pages and allauth (helper G) ------------------------------------------
# Brand users sign in with django-allauth (email + verified address, optional TOTP); people being
# rewarded never get an account: the TikTok provider is used only to prove who they are on the
# claim pages (campaigns.platforms.allauth_adapter turns the login into a claim and no user).
INSTALLED_APPS += [
    "allauth",
    "allauth.account",
    "allauth.mfa",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.tiktok",
]
MIDDLEWARE += ["allauth.account.middleware.AccountMiddleware"]
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "/portal/"
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
ACCOUNT_EMAIL_CONFIRMATION_AUTHENTICATED_REDIRECT_URL = "/portal/"
ACCOUNT_UNIQUE_EMAIL = True
ACCOUNT_USER_MODEL_USERNAME_FIELD = "username"
ACCOUNT_LOGOUT_REDIRECT_URL = "/accounts/login/"
ACCOUNT_ADAPTER = "web.portal.accounts.PortalAccountAdapter"
# How e-mails name the platform; the domain defaults to the host of CLAIM_BASE_URL.
SITE_NAME = os.environ.get("SITE_NAME", "JoyBack")
SITE_DOMAIN = os.environ.get("SITE_DOMAIN", "")
ACCOUNT_EMAIL_SUBJECT_PREFIX = f"[{SITE_NAME}] "
ACCOUNT_RATE_LIMITS = {"login_failed": "10/m/ip,5/5m/key"}
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "JoyBack <no-reply@joyback.example>")
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
MFA_TOTP_ISSUER = os.environ.get("MFA_TOTP_ISSUER", "JoyBack")
SOCIALACCOUNT_ADAPTER = "campaigns.platforms.allauth_adapter.ClaimSocialAccountAdapter"
SOCIALACCOUNT_STORE_TOKENS = False
SOCIALACCOUNT_PROVIDERS = {
    "tiktok": {
        "APPS": [
            {
                "client_id": os.environ.get("TIKTOK_CLIENT_KEY", "demo-client-key"),
                "secret": os.environ.get("TIKTOK_CLIENT_SECRET", "demo-client-secret"),
                "key": "",
            }
        ],
        "SCOPE": ["user.info.basic"],
    }
}
# Where TikTok lives: the login page people are sent to, and the API our server calls. Tests and
# the demo point both at a local fake (campaigns.platforms.tiktok_fake); FAKE_TIKTOK_ENABLED
# mounts that fake under /fake/tiktok/ (never in production).
TIKTOK_AUTH_BASE_URL = os.environ.get("TIKTOK_AUTH_BASE_URL", "https://www.tiktok.com")
TIKTOK_API_BASE_URL = os.environ.get("TIKTOK_API_BASE_URL", "https://open.tiktokapis.com")
TIKTOK_TIMEOUT_SECONDS = float(os.environ.get("TIKTOK_TIMEOUT_SECONDS", "5"))
FAKE_TIKTOK_ENABLED = env_bool("FAKE_TIKTOK_ENABLED", False)
# Demo only: a button on the WhatsApp waiting page plays the inbound message (no real WhatsApp).
FAKE_WHATSAPP_ENABLED = env_bool("FAKE_WHATSAPP_ENABLED", False)
# The business number people message to opt in on WhatsApp (click-to-chat, wa.me/<number>).
WHATSAPP_BUSINESS_NUMBER = os.environ.get("WHATSAPP_BUSINESS_NUMBER", "393331234567")
# Funding instructions shown to brands: the platform account their transfers go to.
PLATFORM_FUNDING_IBAN = os.environ.get("PLATFORM_FUNDING_IBAN", "NL91ABNA0417164300")
PLATFORM_FUNDING_BIC = os.environ.get("PLATFORM_FUNDING_BIC", "ABNANL2A")
PLATFORM_FUNDING_NAME = os.environ.get("PLATFORM_FUNDING_NAME", "JoyBack Payouts B.V.")
# Claim pages: the terms version recorded with each consent, abuse limits (Django cache), and
# how long a signed status or claim link stays valid.
CLAIM_TERMS_VERSION = os.environ.get("CLAIM_TERMS_VERSION", "2026-01")
CLAIM_RATE_LIMIT_PER_IP = env_int("CLAIM_RATE_LIMIT_PER_IP", 30)  # form posts per IP per 10 minutes
CLAIM_RATE_LIMIT_PER_CAMPAIGN = env_int("CLAIM_RATE_LIMIT_PER_CAMPAIGN", 600)  # per campaign per minute
CLAIM_LINK_MAX_AGE_DAYS = env_int("CLAIM_LINK_MAX_AGE_DAYS", 90)
# Requests to pages that take a secret (a link's token, a code), per IP per 10 minutes: GETs too,
# and a waiting page polls every 2 seconds.
CLAIM_RATE_LIMIT_SECRET_PER_IP = env_int("CLAIM_RATE_LIMIT_SECRET_PER_IP", 600)
# A payout-form link sent to a person works once, for the reward it names, for this long.
CLAIM_PAYOUT_LINK_DAYS = env_int("CLAIM_PAYOUT_LINK_DAYS", 7)
# A new account for a person who has one waits for the code sent to their oldest contact: the
# code lives this long and allows this many tries; once confirmed, new payouts to the account
# wait the cooling-off.
ACCOUNT_CHANGE_CODE_MINUTES = env_int("ACCOUNT_CHANGE_CODE_MINUTES", 30)
ACCOUNT_CHANGE_CODE_ATTEMPTS = env_int("ACCOUNT_CHANGE_CODE_ATTEMPTS", 5)
ACCOUNT_CHANGE_COOLING_OFF_HOURS = env_int("ACCOUNT_CHANGE_COOLING_OFF_HOURS", 24)
# The marketing-consent withdrawal link in every message works this long (signed, naming one
# consent; it withdraws that consent once: a replay changes nothing).
CONSENT_WITHDRAW_LINK_DAYS = env_int("CONSENT_WITHDRAW_LINK_DAYS", 365)
# A marketing consent given with an e-mail typed on a claim page waits this long for the person to
# follow the confirmation link e-mailed there (double opt-in; signed, naming one consent, it
# confirms that consent once); unconfirmed by then, it never becomes active.
CONSENT_CONFIRM_LINK_DAYS = env_int("CONSENT_CONFIRM_LINK_DAYS", 7)
# The public address of the claim pages, for links sent by email/WhatsApp from background jobs.
CLAIM_BASE_URL = os.environ.get("CLAIM_BASE_URL", "http://127.0.0.1:8000")
TEMPLATES[0]["OPTIONS"]["libraries"] = {"money": "core.templatetags_money"}
# --- end of the portal / claim block ------------------------------------------------------------


# Partner API (Django REST framework). Authentication, errors, pagination and throttling are the
# project's own classes in core/api/ (see there); schema by drf-spectacular.
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["core.api.fields.DepthLimitedJSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "JoyBack & Cashback partner API",
    "DESCRIPTION": "Send trigger events, register people, read rewards, payouts and balances, receive signed webhooks.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Shared cache ----------------------------------------------------------------------------------
# Rate limits (API keys, claim pages) count in Django's cache. The default, LocMem, counts per
# process: with several gunicorn workers or web nodes, set CACHE_URL (redis://host:6379/0) so they
# count together. Nothing else relies on the cache: losing it only resets the counting windows.
CACHE_URL = os.environ.get("CACHE_URL", "")
if CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": CACHE_URL,
            "KEY_PREFIX": os.environ.get("CACHE_KEY_PREFIX", "joyback"),
        }
    }

# --- Health and metrics (core.health, core.metrics) ------------------------------------------------
# /metrics answers a request carrying "Authorization: Bearer <METRICS_TOKEN>", or one from an
# address in METRICS_ALLOWED_IPS (addresses or networks; scrape each node directly). Production
# refuses to start with neither (core.E141). /readyz turns red when the oldest task waiting in a
# class's queue has waited longer than READY_QUEUE_MAX_AGE_SECONDS (0: queues are not part of
# readiness).
METRICS_TOKEN = os.environ.get("METRICS_TOKEN", "")
METRICS_ALLOWED_IPS = env_list("METRICS_ALLOWED_IPS", "127.0.0.1,::1")
READY_QUEUE_MAX_AGE_SECONDS = env_int("READY_QUEUE_MAX_AGE_SECONDS", 300)
# Our own load balancers' addresses or networks: only a request from one of them has its
# X-Forwarded-For read for the client's address (core.proxy; per-IP rate limits). Empty: none.
TRUSTED_PROXY_IPS = env_list("TRUSTED_PROXY_IPS", "")

# --- Partner API and webhooks (helper F, issue 6) -------------------------------------------------
# Per-key rate limit (fixed one-minute window in the Django cache, see CACHE_URL above), largest
# API body, how long Idempotency-Keys are kept, and when an in-flight
# key left by a crashed worker may be taken over.
API_RATE_LIMIT_PER_MINUTE = env_int("API_RATE_LIMIT_PER_MINUTE", 6000)
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 4 * 1024 * 1024)
IDEMPOTENCY_TTL_HOURS = env_int("IDEMPOTENCY_TTL_HOURS", 24)
IDEMPOTENCY_IN_FLIGHT_TIMEOUT_SECONDS = env_int("IDEMPOTENCY_IN_FLIGHT_TIMEOUT_SECONDS", 300)
# Outgoing webhooks: retries for 72 h with exponential backoff; an endpoint failing for 72 h is
# disabled and the brand e-mailed; a rotated secret keeps signing for 24 h; http:// endpoints only
# when explicitly allowed (local development). Private, loopback, link-local and other non-public
# addresses are refused at registration and at delivery (campaigns.webhook_targets); only test.py
# and local.py allow them, for fake receivers on 127.0.0.1. Not read from the environment, so no
# production deployment can switch the guard off by accident.
WEBHOOK_RETRY_HOURS = env_int("WEBHOOK_RETRY_HOURS", 72)
WEBHOOK_DISABLE_AFTER_HOURS = env_int("WEBHOOK_DISABLE_AFTER_HOURS", 72)
WEBHOOK_ROTATION_OVERLAP_HOURS = env_int("WEBHOOK_ROTATION_OVERLAP_HOURS", 24)
WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("WEBHOOK_TIMEOUT_SECONDS", "10"))
# Deadline of a webhook host's DNS lookup, at registration and at each delivery.
WEBHOOK_DNS_TIMEOUT_SECONDS = float(os.environ.get("WEBHOOK_DNS_TIMEOUT_SECONDS", "5"))
WEBHOOK_ALLOW_HTTP = env_bool("WEBHOOK_ALLOW_HTTP", False)
WEBHOOK_ALLOW_PRIVATE_TARGETS = False
# Enqueue a webhook collection right after a commit that wrote reward, campaign or payout audit
# rows (campaigns.webhook_kick), besides the every-minute tick. Off in tests (tasks run inline).
WEBHOOK_COLLECT_ON_COMMIT = env_bool("WEBHOOK_COLLECT_ON_COMMIT", True)
# Inbound webhooks: WhatsApp Cloud API app secret (X-Hub-Signature-256) and the verify token of
# the subscription check; TikTok's client key/secret (TikTok-Signature) and the accepted clock
# skew; the largest inbound body. An empty secret refuses every delivery of that provider.
WHATSAPP_APP_SECRET = os.environ.get("WHATSAPP_APP_SECRET", "")
WHATSAPP_VERIFY_TOKEN = os.environ.get("WHATSAPP_VERIFY_TOKEN", "")
# Outbound WhatsApp (recipients.whatsapp_cloud): template messages through the Cloud API once a
# phone number id is set; the in-memory fake otherwise (tests, the demo; production refuses it).
WHATSAPP_API_BASE_URL = os.environ.get("WHATSAPP_API_BASE_URL", "https://graph.facebook.com")
WHATSAPP_API_VERSION = os.environ.get("WHATSAPP_API_VERSION", "v23.0")
WHATSAPP_PHONE_NUMBER_ID = os.environ.get("WHATSAPP_PHONE_NUMBER_ID", "")
WHATSAPP_ACCESS_TOKEN = os.environ.get("WHATSAPP_ACCESS_TOKEN", "")
WHATSAPP_TIMEOUT_SECONDS = float(os.environ.get("WHATSAPP_TIMEOUT_SECONDS", "10"))
PAYOUT_WHATSAPP_SENDER = os.environ.get(
    "PAYOUT_WHATSAPP_SENDER",
    "recipients.whatsapp_cloud.CloudApiSender"
    if WHATSAPP_PHONE_NUMBER_ID
    else "recipients.whatsapp_cloud.FakeWhatsAppSender",
)
# Notices to people (recipients.services.notices): a transient send error is retried with
# backoff (base doubling, at most max) until this many attempts, then the channel has failed.
NOTICE_MAX_ATTEMPTS = env_int("NOTICE_MAX_ATTEMPTS", 8)
NOTICE_BACKOFF_BASE_SECONDS = env_int("NOTICE_BACKOFF_BASE_SECONDS", 60)
NOTICE_BACKOFF_MAX_SECONDS = env_int("NOTICE_BACKOFF_MAX_SECONDS", 6 * 3600)
TIKTOK_CLIENT_KEY = os.environ.get("TIKTOK_CLIENT_KEY", "")
TIKTOK_CLIENT_SECRET = os.environ.get("TIKTOK_CLIENT_SECRET", "")
TIKTOK_SIGNATURE_TOLERANCE_SECONDS = env_int("TIKTOK_SIGNATURE_TOLERANCE_SECONDS", 300)
WEBHOOK_IN_MAX_BYTES = env_int("WEBHOOK_IN_MAX_BYTES", 1024 * 1024)
SPECTACULAR_SETTINGS["SCHEMA_PATH_PREFIX"] = r"/api/v1"
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {
    "CampaignStatusEnum": "campaigns.models.CampaignStatus",
    "RewardStatusEnum": "campaigns.models.RewardStatus",
    "PayoutStatusEnum": "payouts.models.PayoutStatus",
    "DeliveryStatusEnum": "campaigns.models.DeliveryStatus",
    "TriggerEnum": "campaigns.models.Trigger",
    "EventOutcomeEnum": "campaigns.models.EventOutcome",
    "VopActionEnum": "campaigns.models.VopAction",
    "VopActionWithoutAskEnum": "campaigns.models.campaigns.VOP_ACTIONS_WITHOUT_ASK",
}
SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] = [
    "drf_spectacular.hooks.postprocess_schema_enums",
    "core.api.schema.describe_api",
]
# --- end of the partner API block -----------------------------------------------------------------

# --- Retention (issue 18) -------------------------------------------------------------------------
# How long each kind of personal data is kept before core.retention (daily) pseudonymises or
# deletes it. Trigger events keep their identifiers and evidence past the longest hold (a year),
# so a matured reward's disputes and fraud signals still have them. Payout creditor names of
# erased people: erasure keeps those younger than PRIVACY_PAYOUT_NAME_KEEP_DAYS (bookkeeping law),
# the purge blanks them once older; 0 blanks them at erasure.
RETENTION_TRIGGER_EVENT_DAYS = env_int("RETENTION_TRIGGER_EVENT_DAYS", 400)
RETENTION_INBOUND_WEBHOOK_DAYS = env_int("RETENTION_INBOUND_WEBHOOK_DAYS", 30)
RETENTION_TASK_RESULT_DAYS = env_int("RETENTION_TASK_RESULT_DAYS", 30)
RETENTION_IDEMPOTENCY_DAYS = env_int("RETENTION_IDEMPOTENCY_DAYS", 7)
PRIVACY_PAYOUT_NAME_KEEP_DAYS = env_int("PRIVACY_PAYOUT_NAME_KEEP_DAYS", 0)
# A withdrawn marketing consent keeps its proof (IP fingerprint, user agent) this long after the
# withdrawal, to answer a complaint about a message sent while it was active; then it is blanked.
RETENTION_CONSENT_PROOF_DAYS = env_int("RETENTION_CONSENT_PROOF_DAYS", 1095)
# Rows that are not the books but grow with every event (issue 30), deleted by the same purge:
# outbound webhook deliveries and events once final (30 days: what a partner may page back through
# in the API and the portal; a receiver that was down longer got them retried for
# WEBHOOK_RETRY_HOURS), notices to people and their deliveries once done (half a year: support
# can answer "were they told?" for any payout of the period; notices of open rewards and payouts
# on their way are never deleted). The purge deletes RETENTION_BATCH_SIZE rows per transaction and
# starts no batch after RETENTION_MAX_SECONDS (below Q_TIMEOUT); a follow-up run does the rest.
RETENTION_WEBHOOK_DELIVERIES_DAYS = env_int("RETENTION_WEBHOOK_DELIVERIES_DAYS", 30)
RETENTION_WEBHOOK_EVENTS_DAYS = env_int("RETENTION_WEBHOOK_EVENTS_DAYS", 30)
RETENTION_NOTICES_DAYS = env_int("RETENTION_NOTICES_DAYS", 180)
RETENTION_BATCH_SIZE = env_int("RETENTION_BATCH_SIZE", 2000)
RETENTION_MAX_SECONDS = env_int("RETENTION_MAX_SECONDS", 40)
