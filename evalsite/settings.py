"""evalsite settings: everything that differs between machines comes from the environment.

The embedded default (no variables set) is SQLite in a data directory plus django-q2's ORM
broker, so a fresh machine needs no services. A team server sets DATABASE_URL and REDIS_URL.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE, NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value else default


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DATA_DIR = Path(os.environ.get("EVALSITE_DATA_DIR", BASE_DIR / "data")).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated on first start and kept.

    Keeping it in the data directory means sessions survive restarts without anyone having
    to invent a key for the embedded default.
    """
    if key := os.environ.get("SECRET_KEY"):
        return key
    path = DATA_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        key = secrets.token_urlsafe(50)
        # O_EXCL: two processes starting together (web + qcluster) must agree on one key.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_text().strip()
        with os.fdopen(fd, "w") as fh:
            fh.write(key)
        return key


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc as local static files (no CDN)
    "django_htmx",
    # Before django_q: evalsite's `manage.py qcluster` (stops within seconds, watched for hangs)
    # is the one that runs.
    "evaluations",
    "django_q",
    "axes",
    "csp",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # A NUL in a query string is a 400 before a view reads it (PostgreSQL keeps no NUL in text).
    "evaluations.api.errors.NulMiddleware",
    # Pages and API answers gzipped (static files come precompressed from whitenoise, above).
    # BREACH: the CSRF token is masked afresh in every response, a new API token is shown
    # once, and Django adds up to 100 random bytes to each gzipped body (docs/SECURITY.md).
    "django.middleware.gzip.GZipMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A GET or HEAD whose connection dropped mid-request runs once more on a new one.
    "evaluations.web.reconnect.ReconnectMiddleware",
    # Last: turns a locked-out login (evaluations/lockout.py) into its 429 answer.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "evalsite.urls"
WSGI_APPLICATION = "evalsite.wsgi.application"

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
                "evaluations.web.context_processors.current_project",
                "csp.context_processors.nonce",
            ],
            # The template tags live with the pages (evaluations/web/), not in the app's
            # top-level templatetags/ package where Django would look by default.
            "libraries": {"evalsite": "evaluations.web.templatetags.evalsite"},
        },
    },
]

# --- Database -------------------------------------------------------------------------------
SQLITE_PATH = DATA_DIR / "evalsite.sqlite3"
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{SQLITE_PATH}",
        # Above zero: django-q2's ORM broker closes old connections on every enqueue/dequeue,
        # and CONN_MAX_AGE=0 measured 7x slower on this stack.
        conn_max_age=600,
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        # IMMEDIATE takes the write lock at BEGIN, so queue workers wait for it (timeout)
        # instead of failing the lock upgrade with "database is locked"; WAL lets pages read
        # while a worker writes. Measured: 0 lock failures with 2-4 workers.
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not :memory:, so a qcluster process started by a test sees the test database.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test_evalsite.sqlite3")}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and env_bool(
        "EVALSITE_PG_PREPARED", default=True):
    # Server-side binding lets psycopg prepare a statement the connection has run
    # `prepare_threshold` times: PostgreSQL then skips planning it. Planning was most of the
    # cost of the statements every page view runs (the compare page's fingerprint: 2.3 ms
    # planned each time, 0.6 ms prepared). Behind PgBouncer in transaction mode a prepared
    # statement can land on another server connection: set EVALSITE_PG_PREPARED=0 there.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"server_side_binding": True, "prepare_threshold": 5})

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Task queue -----------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
Q_CLUSTER: dict[str, object] = {
    "name": "evalsite",
    "workers": env_int("EVALSITE_WORKERS", 2),
    # A batch of cases must finish inside `timeout`; `retry` has to exceed
    # timeout x (queue_limit + 2) or a task still queued inside the cluster is handed out
    # twice (django-q2 re-queues on `retry`). Tasks are idempotent anyway, so a duplicate costs time, not data.
    "timeout": env_int("EVALSITE_TASK_TIMEOUT", 600),
    "retry": env_int("EVALSITE_TASK_RETRY", env_int("EVALSITE_TASK_TIMEOUT", 600) * 5),
    "queue_limit": 2,
    # The ORM broker looks for new tasks this often when it found none (django-q2's default is
    # 0.2 s): a run queued on an idle cluster starts within it. A look is one small query.
    "poll": env_float("EVALSITE_QUEUE_POLL", 0.05),
    # A task that raises is re-run forever by default; a failing batch is instead recorded
    # on the run, and the run's own lease (not the broker) decides about resuming work.
    "max_attempts": 2,
    "ack_failures": True,
    "catch_up": False,
    "save_limit": 1000,
    "label": "Task queue",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
if env_bool("EVALSITE_Q_SYNC", False):
    Q_CLUSTER["sync"] = True

# --- Cache and sessions ---------------------------------------------------------------------
# A team server shares one cache between its web processes (a compare page is built once for
# all of them) and reads sessions from it rather than from the database on every request; a
# Redis that is away is worked around (evaluations/cache.py). Without Redis each process
# keeps its own cache and sessions stay in the database only: a per-process cache must not
# hold sessions, or a logout in one process would leave the session alive in another.
CACHE_URL = os.environ.get("EVALSITE_CACHE_URL", REDIS_URL)
if CACHE_URL:
    CACHES = {"default": {"BACKEND": "evaluations.cache.TolerantRedisCache", "LOCATION": CACHE_URL,
                          "KEY_PREFIX": "evalsite", "TIMEOUT": 24 * 3600,
                          "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 2}}}
    SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

# Evaluation engine: cases per queue task, and how long a run may show no progress before
# its pending work is re-enqueued (see evaluations/runs/services.py).
EVALSITE_BATCH_SIZE = env_int("EVALSITE_BATCH_SIZE", 250)
EVALSITE_LEASE_SECONDS = env_int("EVALSITE_LEASE_SECONDS", 180)
# The watchdog (docs/operations.md): how often `up --team` and `manage.py watchdog` look for
# lost work and hung clusters; a cluster that took no task for this long while tasks waited,
# with no worker busy, is hung and restarted; a qcluster not stopped this long after SIGTERM
# is killed (its batches queued again at once).
EVALSITE_WATCHDOG_SECONDS = env_float("EVALSITE_WATCHDOG_SECONDS", 5.0)
EVALSITE_CLUSTER_HUNG_SECONDS = env_float("EVALSITE_CLUSTER_HUNG_SECONDS", 20.0)
EVALSITE_QCLUSTER_STOP_SECONDS = env_float("EVALSITE_QCLUSTER_STOP_SECONDS", 10.0)
# Fair share of the queue (evaluations/runs/queue.py): batches of one run in the broker at a
# time (default: twice a cluster's workers, so each worker has the next batch at hand as it
# ends one; `up --team` counts every cluster), and how long a batch works before it yields
# to another run's waiting batch.
EVALSITE_RUN_WINDOW = env_int("EVALSITE_RUN_WINDOW", 2 * env_int("EVALSITE_WORKERS", 2))
EVALSITE_SLICE_SECONDS = env_float("EVALSITE_SLICE_SECONDS", 1.0)
# A run of at least this many results reads its summary's criteria and medians on connections
# of their own while its completion goes on (evaluations/alongside.py); a smaller one in turn.
EVALSITE_SIDE_BY_SIDE_RESULTS = env_int("EVALSITE_SIDE_BY_SIDE_RESULTS", 2000)
# LLM judge calls in flight at once per batch (docs/runs.md): a chunk's (case, criterion)
# pairs that call a judge are scored on this many threads.
EVALSITE_JUDGE_CONCURRENCY = max(1, env_int("EVALSITE_JUDGE_CONCURRENCY", 8))
# The several-runs page computes a missing comparison with its reference while the request
# waits for runs up to this many cases; larger ones are computed on the task queue.
EVALSITE_NWAY_INLINE_CASES = env_int("EVALSITE_NWAY_INLINE_CASES", 2000)

# The OTLP/HTTP trace receiver, POST /v1/traces (evaluations/ingest, docs/traces.md): the
# largest body as sent and inflated, spans per minute per API token (0: no limit; per process
# without Redis, shared through Redis with it), requests in progress per web process before
# 429, and how long a run of received traces waits for them by default.
EVALSITE_OTLP_MAX_BODY_BYTES = env_int("EVALSITE_OTLP_MAX_BODY_BYTES", 8 * 1024 * 1024)
EVALSITE_OTLP_MAX_DECOMPRESSED_BYTES = env_int("EVALSITE_OTLP_MAX_DECOMPRESSED_BYTES", 32 * 1024 * 1024)
EVALSITE_OTLP_SPANS_PER_MINUTE = env_int("EVALSITE_OTLP_SPANS_PER_MINUTE", 600_000)
EVALSITE_OTLP_MAX_INFLIGHT = env_int("EVALSITE_OTLP_MAX_INFLIGHT", 4)
EVALSITE_TRACES_DEADLINE_SECONDS = env_int("EVALSITE_TRACES_DEADLINE_SECONDS", 3600)
# Monitors (docs/monitors.md): a received trace still waiting for its trace monitors this long
# after it was stored is scored by the sweep (its task was lost, or is that late).
EVALSITE_MONITOR_SWEEP_GRACE_SECONDS = env_int("EVALSITE_MONITOR_SWEEP_GRACE_SECONDS", 30)
# Idempotency-Key (docs/api.md): how long the first answer to a key is kept and replayed.
EVALSITE_IDEMPOTENCY_SECONDS = env_int("EVALSITE_IDEMPOTENCY_SECONDS", 24 * 3600)
# Custom evaluators: dotted paths of Evaluator classes (see evaluations/evaluators/base.py).
EVALSITE_EVALUATORS = env_list("EVALSITE_EVALUATORS", [])
# Who creates projects (the New project page, POST /api/v1/projects/): "superusers", or
# "everyone" signed in (the creator becomes the project's admin). See docs/projects.md.
EVALSITE_PROJECT_CREATORS = os.environ.get("EVALSITE_PROJECT_CREATORS", "superusers")
if EVALSITE_PROJECT_CREATORS not in {"superusers", "everyone"}:
    raise ImproperlyConfigured(f"EVALSITE_PROJECT_CREATORS={EVALSITE_PROJECT_CREATORS!r}: "
                               "use superusers or everyone")

# --- Auth -----------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    # 12: OWASP ASVS 2.1.1 (docs/SECURITY.md); Django's default is 8.
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
AUTHENTICATION_BACKENDS = [
    # First: refuses a username locked out after too many wrong passwords (django-axes).
    "evaluations.lockout.LockoutBackend",
    "evaluations.auth_backends.ModelBackend",  # Django's, with a leaner get_user (see the module)
    # Still listed so that sessions logged in through it stay valid (it authenticates no one:
    # the backend above ends a failed login).
    "django.contrib.auth.backends.ModelBackend",
]
# Brute force (evaluations/lockout.py): after EVALSITE_LOGIN_FAILURE_LIMIT wrong passwords
# for one username from one address, both are locked out for EVALSITE_LOGIN_LOCKOUT_MINUTES.
AXES_ENABLED = env_bool("EVALSITE_LOGIN_LOCKOUT", True)
AXES_FAILURE_LIMIT = env_int("EVALSITE_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("EVALSITE_LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# A try during a lockout does not restart it, so Retry-After (the time left) holds.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_VERBOSE = False  # no banner on every manage.py command; failures and lockouts are still logged
AXES_LOCKOUT_CALLABLE = "evaluations.lockout.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429
# The address counted is REMOTE_ADDR; behind N reverse proxies that each append to
# X-Forwarded-For, set EVALSITE_LOGIN_PROXY_COUNT=N, or every client shares the proxy's.
EVALSITE_LOGIN_PROXY_COUNT = env_int("EVALSITE_LOGIN_PROXY_COUNT", 0)
AXES_CLIENT_IP_CALLABLE = "evaluations.lockout.client_address"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
PASSWORD_RESET_TIMEOUT = env_int("EVALSITE_PASSWORD_RESET_SECONDS", 3 * 24 * 3600)

# --- Email (password reset) -----------------------------------------------------------------
# Printed to the console unless an SMTP server is configured.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
if EMAIL_HOST:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env_int("EMAIL_PORT", 587)
    EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
else:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "evalsite <evalsite@localhost>")

# --- I18N / static --------------------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# The Help pages are the repository's Markdown (evaluations/web/docs.py): read from the
# checkout like the templates, never collected into the static files.
EVALSITE_DOCS_DIR = BASE_DIR / "docs"

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise warns on every start when it is missing
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
]
# `manage.py up` (embedded and team alike) collects the assets into STATIC_ROOT with
# evalsite.staticfiles.StaticFilesStorage (content-hashed names, cached for a year, gzip and
# brotli) and sets EVALSITE_STATICFILES_STORAGE for its web server. Without it (tests,
# runserver) assets are served as they are, from the finders, with Django's plain storage.
PLAIN_STATIC_STORAGE = "django.contrib.staticfiles.storage.StaticFilesStorage"
STATIC_STORAGE = os.environ.get("EVALSITE_STATICFILES_STORAGE", PLAIN_STATIC_STORAGE)
WHITENOISE_USE_FINDERS = STATIC_STORAGE == PLAIN_STATIC_STORAGE


def _immutable_static(path: str, url: str) -> bool:
    """Files whose name changes with their content are cached for a year: the manifest
    storage's hashed names (what `manage.py up` serves), and the plotly.js build named by its
    content hash (static/vendor/plotly-evalsite-<12 hex>.min.js from assets/plotly, served
    compressed from the .br or .gz beside it), from the finders (tests, runserver) too."""
    import re

    return bool(re.match(r"^.+\.[0-9a-f]{12}\..+$", url)
                or re.search(r"/vendor/plotly-evalsite-[0-9a-f]{12}\.min\.js$", url))


WHITENOISE_IMMUTABLE_FILE_TEST = _immutable_static
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": STATIC_STORAGE},
}

# --- Uploads --------------------------------------------------------------------------------
# Largest eval-set upload (one file, or a zip's total unpacked size).
EVALSITE_MAX_UPLOAD_BYTES = env_int("EVALSITE_MAX_UPLOAD_MB", 100) * 1024 * 1024
# What an upload may stand for beyond its own bytes (evaluations/interop/base.py, `Expansion`):
# the members of its zips and Inspect `.eval` logs inflated, all together; and what following
# references adds (attachments put back, YAML aliases, a var repeated in a prompt, defaults and
# tests files copied into every case). 0: the upload limit, whatever it is set to.
EVALSITE_MAX_UNPACKED_BYTES = env_int("EVALSITE_MAX_UNPACKED_MB", 0) * 1024 * 1024
EVALSITE_MAX_EXPANDED_BYTES = env_int("EVALSITE_MAX_EXPANDED_MB", 0) * 1024 * 1024
# Most cases (or outputs) one uploaded file may hold: millions of tiny cases are refused
# (400 too_many_cases) before they fill the database or the memory.
EVALSITE_MAX_CASES = env_int("EVALSITE_MAX_CASES", 100_000)
# Let Django accept the multipart body; evalsite checks each file itself so the error says
# which file was too large instead of a bare 400.
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# An uploaded file above this goes to a temporary file and is read from there once: in memory it
# would be there twice while it is read (the request's buffer and the bytes read from it).
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_NUMBER_FILES = 500

# --- HTTP target egress (SSRF policy, evaluations/runs/targets/egress.py) -----------------------
# Link-local and cloud-metadata addresses are refused unless allowed; loopback and private
# networks are allowed (a team server's agents, the demo agent) unless denied. Entries are
# networks (10.0.0.0/8, 127.0.0.1) or host names (agent.internal, .example.com).
EVALSITE_TARGET_ALLOW = env_list("EVALSITE_TARGET_ALLOW", [])
EVALSITE_TARGET_DENY = env_list("EVALSITE_TARGET_DENY", [])

# --- REST framework -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First, so an anonymous request gets 401 + WWW-Authenticate (not 403).
        "evaluations.api.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
        "evaluations.api.auth.BasicAuthentication",  # DRF's, with django-axes' lockout seen
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "evaluations.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "evaluations.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON only: every answer, errors included, is JSON (Swagger UI at /api/docs/ browses it).
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        # JSON bodies are held to the upload limit too (413 in the error shape).
        "evaluations.api.parsers.JSONParser",
        "evaluations.api.parsers.FormParser",
        "evaluations.api.parsers.MultiPartParser",
    ],
    # Off unless EVALSITE_API_RATE is set (e.g. "600/minute"): per user, or per address
    # for anonymous requests; a throttled request gets 429 in the error shape.
    "DEFAULT_THROTTLE_CLASSES": ["evaluations.api.throttling.ApiRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api": os.environ.get("EVALSITE_API_RATE") or None},
}

SPECTACULAR_SETTINGS = {
    "TITLE": "evalsite API",
    "DESCRIPTION": (
        "Eval sets, runs, results, comparisons, triage and projects of evalsite. "
        "Authenticate with `Authorization: Token <token>` (create one on your account page). "
        "Every error has the same body: `{code, message, problems, problem_count}`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No request leaves the server: the validator badge would call validator.swagger.io.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "persistAuthorization": True, "validatorUrl": None},
    # `<id:pk>` in API paths (evaluations.converters): at most 18 digits.
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}},
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "evaluations.models.Run.Status",
        "ResultStatusEnum": "evaluations.models.CaseResult.Status",
        "TriageStatusEnum": "evaluations.models.Triage.Status",
        "RoleEnum": "evaluations.models.Membership.Role",
        "LevelEnum": "evaluations.models.Score.Level",
        "CaseOutcomeEnum": ["pass", "fail", "error", "mixed", "unscored"],  # a case over its repeats (comparison.py)
        "GradeVerdictEnum": ["pass", "fail"],  # a person's grade (review/grades.py)
    },
}

# --- Security (hardened when DEBUG is off) --------------------------------------------------
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the cookie-free meta tag instead
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if env_bool("EVALSITE_HTTPS", False):
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("EVALSITE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("EVALSITE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    # TLS ends at the proxy, which must set X-Forwarded-Proto (and strip it from clients).
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # Load balancers and `up` probe /healthz over plain HTTP from inside the network.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# Content-Security-Policy (django-csp): scripts and style sheets only from this server (plus
# a per-response nonce, for the one inline <style> of the API docs page); no inline script
# anywhere (chart figures are JSON data blocks drawn by static/js/figures.js). Style
# *attributes* stay allowed: plotly.js and Swagger UI set them on the elements they draw,
# and an attribute cannot run script. No frames, plugins, or forms posting elsewhere.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF, NONCE],
        "style-src": [SELF, NONCE],
        "style-src-attr": [UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

# --- Issue 32: notifications (evaluations/notify, docs/notifications.md) ----------------------
# Links in messages start with EVALSITE_BASE_URL. A send times out after EVALSITE_NOTIFY_TIMEOUT
# seconds; its lease (EVALSITE_NOTIFY_LEASE_SECONDS) must be longer. Retries back off
# EVALSITE_NOTIFY_BACKOFF_SECONDS x 2^(attempt-1), waited out in the worker up to
# EVALSITE_NOTIFY_INLINE_BACKOFF_SECONDS (longer: the minute sweep), up to
# EVALSITE_NOTIFY_MAX_ATTEMPTS; a channel failing EVALSITE_NOTIFY_PAUSE_AFTER times in a row pauses.
EVALSITE_BASE_URL = os.environ.get("EVALSITE_BASE_URL", "http://localhost:8000")
EVALSITE_NOTIFY_TIMEOUT = env_float("EVALSITE_NOTIFY_TIMEOUT", 10.0)
EVALSITE_NOTIFY_LEASE_SECONDS = env_int("EVALSITE_NOTIFY_LEASE_SECONDS", 60)
EVALSITE_NOTIFY_BACKOFF_SECONDS = env_float("EVALSITE_NOTIFY_BACKOFF_SECONDS", 2.0)
EVALSITE_NOTIFY_INLINE_BACKOFF_SECONDS = env_float("EVALSITE_NOTIFY_INLINE_BACKOFF_SECONDS", 10.0)
EVALSITE_NOTIFY_MAX_ATTEMPTS = env_int("EVALSITE_NOTIFY_MAX_ATTEMPTS", 8)
EVALSITE_NOTIFY_PAUSE_AFTER = env_int("EVALSITE_NOTIFY_PAUSE_AFTER", 10)
EVALSITE_NOTIFY_SWEEP_GRACE_SECONDS = env_int("EVALSITE_NOTIFY_SWEEP_GRACE_SECONDS", 30)
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"].update({  # type: ignore[attr-defined]
    "NotifyChannelKindEnum": "evaluations.models.NotifyChannel.Kind",
    "NotifyRuleKindEnum": "evaluations.models.NotifyRule.Kind",
})
# httpx logs every request at INFO: a line per notification sent (and per agent call).
LOGGING["loggers"]["httpx"] = {"level": "WARNING"}  # type: ignore[index]
# --- Issue 34: single sign-on (OIDC) and a second factor (docs/sso.md) ----------------------
# OIDC through django-allauth's openid_connect provider (discovery, PKCE, state; evalsite's
# provider class adds the nonce and always checks the ID token's signature), TOTP and
# recovery codes through django-otp on evalsite's own two-step login form.
INSTALLED_APPS += [
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
]
MIDDLEWARE.insert(MIDDLEWARE.index("django.contrib.auth.middleware.AuthenticationMiddleware") + 1,
                  "allauth.account.middleware.AccountMiddleware")
EVALSITE_OIDC_ISSUER = os.environ.get("EVALSITE_OIDC_ISSUER", "").strip().rstrip("/")
EVALSITE_OIDC_CLIENT_ID = os.environ.get("EVALSITE_OIDC_CLIENT_ID", "")
EVALSITE_OIDC_CLIENT_SECRET = os.environ.get("EVALSITE_OIDC_CLIENT_SECRET", "")
EVALSITE_OIDC_SCOPES = os.environ.get("EVALSITE_OIDC_SCOPES", "openid profile email").replace(",", " ").split()
EVALSITE_OIDC_NAME = os.environ.get("EVALSITE_OIDC_NAME", "single sign-on")
EVALSITE_OIDC_GROUPS_CLAIM = os.environ.get("EVALSITE_OIDC_GROUPS_CLAIM", "groups")
EVALSITE_OIDC_ROLE_MAP = os.environ.get("EVALSITE_OIDC_ROLE_MAP", "")
EVALSITE_OIDC_TOKEN_AUTH = os.environ.get("EVALSITE_OIDC_TOKEN_AUTH", "")  # client_secret_post/basic
# The ID token's `amr` entries or `acr` values that count as a second factor for an account
# that needs one (docs/sso.md); empty: none does, and evalsite asks for its own TOTP code.
EVALSITE_OIDC_MFA_VALUES = os.environ.get("EVALSITE_OIDC_MFA_VALUES", "").replace(",", " ").split()
EVALSITE_SSO_ONLY = env_bool("EVALSITE_SSO_ONLY", False)
EVALSITE_REQUIRE_2FA_SUPERUSERS = env_bool("EVALSITE_REQUIRE_2FA_SUPERUSERS", False)
if EVALSITE_OIDC_ISSUER and not (EVALSITE_OIDC_CLIENT_ID and EVALSITE_OIDC_CLIENT_SECRET):
    raise ImproperlyConfigured("EVALSITE_OIDC_ISSUER is set: set EVALSITE_OIDC_CLIENT_ID and "
                               "EVALSITE_OIDC_CLIENT_SECRET too")
if EVALSITE_SSO_ONLY and not EVALSITE_OIDC_ISSUER:
    raise ImproperlyConfigured("EVALSITE_SSO_ONLY=1 needs EVALSITE_OIDC_ISSUER (else nobody can sign in)")


def oidc_providers(issuer: str, client_id: str, secret: str, scopes: list[str], name: str,
                   token_auth: str = "") -> dict[str, object]:
    """SOCIALACCOUNT_PROVIDERS for one OpenID provider (none without an issuer); tests build
    theirs with it too."""
    app_settings: dict[str, object] = {"server_url": issuer, "oauth_pkce_enabled": True}
    if token_auth:
        app_settings["token_auth_method"] = token_auth
    apps = [{"provider_id": "sso", "name": name, "client_id": client_id, "secret": secret,
             "settings": app_settings}] if issuer else []
    return {"openid_connect": {"APPS": apps, "SCOPE": scopes,
                               "provider_class": "evaluations.accounts.sso.EvalsiteOIDCProvider"}}


SOCIALACCOUNT_PROVIDERS = oidc_providers(EVALSITE_OIDC_ISSUER, EVALSITE_OIDC_CLIENT_ID,
                                         EVALSITE_OIDC_CLIENT_SECRET, EVALSITE_OIDC_SCOPES,
                                         EVALSITE_OIDC_NAME, EVALSITE_OIDC_TOKEN_AUTH)
SOCIALACCOUNT_ADAPTER = "evaluations.accounts.sso.SocialAdapter"
ACCOUNT_ADAPTER = "evaluations.accounts.sso.AccountAdapter"
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False  # linking by verified e-mail is evalsite's (sso.py)
SOCIALACCOUNT_STORE_TOKENS = False
SOCIALACCOUNT_LOGIN_ON_GET = False  # the button is a POST form (CSRF-protected)
SOCIALACCOUNT_QUERY_EMAIL = False
SOCIALACCOUNT_REQUESTS_TIMEOUT = 10
ACCOUNT_EMAIL_VERIFICATION = "none"  # the IdP's email_verified claim is what counts
ACCOUNT_UNIQUE_EMAIL = False
ACCOUNT_LOGIN_METHODS = {"username"}
ACCOUNT_SIGNUP_FIELDS = ["username*", "email", "password1*"]
# The browser is sent on to the provider after a POST to evalsite: form-action must allow it.
if EVALSITE_OIDC_ISSUER:
    from urllib.parse import urlsplit as _urlsplit

    _idp = _urlsplit(EVALSITE_OIDC_ISSUER)
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["form-action"] = [
        SELF, f"{_idp.scheme}://{_idp.netloc}",
        *env_list("EVALSITE_OIDC_FORM_ACTION", [])]
# django-otp: a wrong code makes the next try wait 1, 2, 4, ... seconds.
OTP_TOTP_ISSUER = os.environ.get("EVALSITE_TOTP_ISSUER", "evalsite")
OTP_TOTP_THROTTLE_FACTOR = 1
