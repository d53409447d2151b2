"""Settings for hermes-web, read from the environment (see .env.example).

Only this module reads os.environ. Defaults are the embedded local setup: SQLite in
WAL mode under ``var/``, a Celery broker on SQLite beside it, the deterministic
summarizer and the offline demo chat model.
"""

import os
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

# litellm fetches its model map from the internet at import unless told otherwise,
# and tiktoken downloads BPE files: both must be pinned before anything imports them.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(BASE_DIR / "compaction" / "tiktoken_cache"))
os.environ.setdefault("CUSTOM_TIKTOKEN_CACHE_DIR", os.environ["TIKTOKEN_CACHE_DIR"])


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw.replace("_", ""))
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_secret(name: str) -> str:
    """The value of NAME, or the contents of the file named by NAME_FILE."""
    if value := os.environ.get(name):
        return value
    if path := os.environ.get(f"{name}_FILE"):
        return Path(path).read_text().strip()
    return ""


def database_from_url(url: str) -> dict:
    """Turn ``sqlite:///path`` or ``postgres://user:pass@host:port/name`` into a DATABASES entry."""
    parsed = urlparse(url)
    options = dict(parse_qsl(parsed.query))
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path)
        # sqlite:///relative/file and sqlite:////absolute/file, as SQLAlchemy spells them
        name = path[1:]
        if not Path(name).is_absolute():
            name = str(BASE_DIR / name)
        return sqlite_database(Path(name))
    if parsed.scheme in ("postgres", "postgresql", "pgsql"):
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "CONN_MAX_AGE": env_int("DB_CONN_MAX_AGE", 60),
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": options,
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {parsed.scheme!r} is not supported (use sqlite or postgres)"
    )


def sqlite_database(path: Path) -> dict:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            # IMMEDIATE takes the write lock at BEGIN, so concurrent writers queue on
            # busy_timeout instead of failing with "database is locked" mid-transaction.
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            # journal_size_limit: after a checkpoint the WAL file is cut back to 64 MB
            # (without it a large import left a 1.7 GB WAL for as long as the server ran).
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                "PRAGMA journal_size_limit=67108864;"
            ),
        },
        # One test database per test process, so two test runs never share (and corrupt) one.
        "TEST": {"NAME": str(path.with_name(f"test_{os.getpid()}_{path.name}"))},
    }


DATA_DIR = Path(env_str("HERMES_DATA_DIR", str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
DATABASE_URL = env_str("DATABASE_URL")

SECRET_KEY = env_secret("SECRET_KEY")
if not SECRET_KEY:
    if DEBUG or not DATABASE_URL or DATABASE_URL.startswith("sqlite"):
        # Local, embedded use: generate once and keep it so sessions survive restarts.
        key_file = DATA_DIR / "secret_key"
        if not key_file.exists():
            key_file.write_text(secrets.token_urlsafe(50))
            key_file.chmod(0o600)
        SECRET_KEY = key_file.read_text().strip()
    else:
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) is required when DEBUG is off")

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "django_celery_results",
    "ninja",
    "hermes_web",
]

MIDDLEWARE = [
    "hermes_web.middleware.RequestSizeLimitMiddleware",  # first: refuses before any body read
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Import uploads refused by size before their body is stored (importers branch).
    "hermes_web.importers.limits.ImportUploadLimitMiddleware",
]

ROOT_URLCONF = "hermes_web.urls"
WSGI_APPLICATION = "hermes_web.wsgi.application"
ASGI_APPLICATION = "hermes_web.asgi.application"

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
                "hermes_web.context_processors.hermes",
            ],
        },
    },
]

DATABASES = {
    "default": database_from_url(DATABASE_URL)
    if DATABASE_URL
    else sqlite_database(DATA_DIR / "hermes.sqlite3")
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
# The user of each request comes from the cache (dropped on every save of that user); the
# plain backend stays listed so sessions signed in before keep working.
AUTHENTICATION_BACKENDS = [
    "hermes_web.auth.CachedUserBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"

# Uploads: imports are streamed to a temp file, never held in memory whole.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
HERMES_MAX_UPLOAD_BYTES = env_int("HERMES_MAX_UPLOAD_BYTES", 200 * 1024 * 1024)
# How long one import may take (importers.budget): an upload is cut well before the web
# server's own timeout (gunicorn --timeout 120, Procfile) and leaves nothing stored; the
# command line (manage.py import_sessions) may take longer.
HERMES_IMPORT_UPLOAD_SECONDS = env_int("HERMES_IMPORT_UPLOAD_SECONDS", 90)
HERMES_IMPORT_CLI_SECONDS = env_int("HERMES_IMPORT_CLI_SECONDS", 3600)
# An import's small sessions share a transaction (each in its own savepoint, so one that
# fails rolls back alone; importers/groups.py): it commits every this many sessions, or once
# it has held SQLite's writer lock this many milliseconds, whichever comes first.
HERMES_IMPORT_GROUP_SESSIONS = env_int("HERMES_IMPORT_GROUP_SESSIONS", 500)
HERMES_IMPORT_GROUP_MS = env_int("HERMES_IMPORT_GROUP_MS", 250)
# One imported message larger than this (characters of its content) fails its session:
# it could never be sent to a model, and would only bloat every page that shows it.
HERMES_MAX_MESSAGE_BYTES = env_int("HERMES_MAX_MESSAGE_BYTES", 10 * 1024 * 1024)
# Every stored field counts: content, tool calls, reasoning and metadata (a Hermes database's
# extra columns). A session storing more than this in all (messages and its own metadata) fails.
HERMES_MAX_SESSION_BYTES = env_int("HERMES_MAX_SESSION_BYTES", HERMES_MAX_UPLOAD_BYTES)
# One import (a file, a session folder, an archive, all its sessions together) stores at most
# this many times the bytes it read, or the floor when that is more (importers/budget.py): a
# 23 KB zip whose 30 stubs all named one 9 MiB file stored 3 GB. Stored bytes are the
# characters of every stored field (content, calls, reasoning, metadata).
HERMES_IMPORT_AMPLIFICATION = env_int("HERMES_IMPORT_AMPLIFICATION", 4)
HERMES_IMPORT_AMPLIFICATION_FLOOR = env_int("HERMES_IMPORT_AMPLIFICATION_FLOOR", 16 * 1024 * 1024)
# A compaction of a session over this many active messages loads only its head, the middle's
# two ends and the rows the tail can reach (services/bounded_compaction.py): bounded memory.
HERMES_BOUNDED_COMPACTION_ABOVE = env_int("HERMES_BOUNDED_COMPACTION_ABOVE", 100_000)

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"LiteLLM": {"level": "WARNING"}, "httpx": {"level": "WARNING"}},
}

# --- Cache (rendered panels of finished compactions, message chunks, list rows) ------------
# Per process by default; with Redis as the broker, one Redis database shared by every web
# process (the same host's database 1 unless HERMES_CACHE_URL says otherwise).
HERMES_CACHE_URL = env_str("HERMES_CACHE_URL")
if not HERMES_CACHE_URL and env_str("CELERY_BROKER_URL").startswith("redis://"):
    HERMES_CACHE_URL = urlparse(env_str("CELERY_BROKER_URL"))._replace(path="/1").geturl()
CACHES: dict[str, dict[str, Any]] = {
    "default": (
        {
            "BACKEND": "hermes_web.caching.ForgivingRedisCache",
            "LOCATION": HERMES_CACHE_URL,
            "KEY_PREFIX": "hermes",
        }
        if HERMES_CACHE_URL
        else {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "OPTIONS": {"MAX_ENTRIES": 300},
        }
    )
}

# Counters that must hold across processes (sign-ups per address): Redis when configured, else
# the database (`manage.py createcachetable`, run after every migrate by a post_migrate hook),
# never the per-process memory cache, which let every web process count on its own.
HERMES_LIMITS_CACHE_TABLE = "hermes_limits_cache"
CACHES["limits"] = (
    {
        "BACKEND": "hermes_web.caching.ForgivingRedisCache",
        "LOCATION": HERMES_CACHE_URL,
        "KEY_PREFIX": "hermes-limits",
    }
    if HERMES_CACHE_URL
    else {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": HERMES_LIMITS_CACHE_TABLE,
        "OPTIONS": {"MAX_ENTRIES": 100_000},
    }
)

# Sessions are read on every request: from the cache first (shared Redis at scale), from the
# database when the cache misses or is down.
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

# --- Celery -------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", f"sqla+sqlite:///{DATA_DIR / 'broker.sqlite3'}")
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "django-db")
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_IGNORE_RESULT = True
# Long LLM calls: a task is acknowledged only once done, and goes back to the queue if
# its worker dies, so a killed worker never loses a compaction.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("HERMES_TASK_SOFT_TIME_LIMIT", 600)
CELERY_TASK_TIME_LIMIT = env_int("HERMES_TASK_TIME_LIMIT", 660)
# Redis redelivers unacknowledged tasks after the visibility timeout: keep it above the hard limit
# (a lower value re-runs jobs that are still running; the lease lock makes that harmless but wasteful).
HERMES_BROKER_VISIBILITY_TIMEOUT = env_int(
    "HERMES_BROKER_VISIBILITY_TIMEOUT", CELERY_TASK_TIME_LIMIT + 300
)
# Workers sweep for jobs whose worker died (un-acked past the visibility timeout) every this many
# seconds; kombu's own default sweeps only every 100 s.
HERMES_BROKER_RESTORE_INTERVAL = env_int("HERMES_BROKER_RESTORE_INTERVAL", 10)
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "visibility_timeout": HERMES_BROKER_VISIBILITY_TIMEOUT,
        "unacked_restore_interval": max(1, HERMES_BROKER_RESTORE_INTERVAL),
        "unacked_restore_throttle": 1,
    }
    if CELERY_BROKER_URL.startswith("redis")
    else {}
)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_DEFAULT_QUEUE = "default"
# Chat turns and compactions get their own queues so a burst of compactions never starves chat.
CELERY_TASK_ROUTES = {
    "hermes_web.tasks.compact_session": {"queue": "compaction"},
    "hermes_web.tasks.run_agent_turn": {"queue": "chat"},
}
# Every minute, re-send compactions whose task was lost (killed worker, broker outage).
# Temporary upload and import folders of killed processes are removed (hermes_web/tempdirs.py)
# at start and every HERMES_TEMP_SWEEP_SECONDS; a live process's entries once older than
# HERMES_TEMP_MAX_AGE_SECONDS (past every import deadline: 120 s per request, 600 s a folder).
HERMES_TEMP_SWEEP_SECONDS = env_int("HERMES_TEMP_SWEEP_SECONDS", 600)
HERMES_TEMP_MAX_AGE_SECONDS = env_int("HERMES_TEMP_MAX_AGE_SECONDS", 3600)
# Sessions a killed import left marked pending (past HERMES_IMPORT_CLI_SECONDS and a margin)
# are deleted at a worker's start and this often; SQLite's WAL is checkpointed this often.
HERMES_ABANDONED_IMPORT_SWEEP_SECONDS = env_int("HERMES_ABANDONED_IMPORT_SWEEP_SECONDS", 600)
HERMES_WAL_CHECKPOINT_SECONDS = env_int("HERMES_WAL_CHECKPOINT_SECONDS", 300)
# Followed folders (Settings › Follow folders) are scanned by size and mtime this often; the
# server reads them for whoever adds them, so they must be under one of HERMES_FOLLOW_ROOTS
# (comma-separated; the server user's home by default, "none" turns the page's adding off).
HERMES_FOLLOW_SCAN_SECONDS = env_int("HERMES_FOLLOW_SCAN_SECONDS", 5)
HERMES_FOLLOW_ROOTS = [
    root for root in env_list("HERMES_FOLLOW_ROOTS", [str(Path.home())]) if root != "none"
]
CELERY_BEAT_SCHEDULE = {
    "recover-stranded-runs": {"task": "hermes_web.tasks.recover_stranded_runs", "schedule": 60.0},
    "sweep-temp-dirs": {
        "task": "hermes_web.tasks.sweep_temp_dirs",
        "schedule": float(HERMES_TEMP_SWEEP_SECONDS),
    },
    "discard-abandoned-imports": {
        "task": "hermes_web.tasks.discard_abandoned_imports",
        "schedule": float(HERMES_ABANDONED_IMPORT_SWEEP_SECONDS),
    },
    "checkpoint-wal": {
        "task": "hermes_web.tasks.checkpoint_wal",
        "schedule": float(HERMES_WAL_CHECKPOINT_SECONDS),
    },
    "follow-folders": {
        "task": "hermes_web.tasks.follow_folders",
        "schedule": float(HERMES_FOLLOW_SCAN_SECONDS),
    },
}
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
HERMES_BROKER_POLL_SECONDS = float(env_str("HERMES_BROKER_POLL_SECONDS", "0.1"))

# --- Models and compaction ---------------------------------------------------------------
HERMES_CHAT_MODEL = env_str("HERMES_CHAT_MODEL")  # empty: the built-in offline demo model
HERMES_CHAT_API_BASE = env_str("HERMES_CHAT_API_BASE")
HERMES_CHAT_API_KEY = env_secret("HERMES_CHAT_API_KEY")
HERMES_SUMMARY_MODEL = env_str("HERMES_SUMMARY_MODEL")  # empty: chat model, then deterministic
HERMES_SUMMARY_API_BASE = env_str("HERMES_SUMMARY_API_BASE")
HERMES_SUMMARY_API_KEY = env_secret("HERMES_SUMMARY_API_KEY")
HERMES_LLM_TIMEOUT = env_int("HERMES_LLM_TIMEOUT", 120)
# Recall tests: a litellm model that judges the answers a normalized match did not accept
# (empty: normalized match only). Called with HERMES_CHAT_API_BASE / HERMES_CHAT_API_KEY.
HERMES_RECALL_JUDGE_MODEL = env_str("HERMES_RECALL_JUDGE_MODEL")
# Retries of a failed chat model call inside one turn (0 in tests: failures show at once).
HERMES_LLM_MAX_RETRIES = env_int("HERMES_LLM_MAX_RETRIES", 1)
HERMES_CONTEXT_LENGTH = env_int("HERMES_CONTEXT_LENGTH", 0)  # 0: from litellm's model map
HERMES_COMPACTION_MODE = env_str("HERMES_COMPACTION_MODE", "rotation")
if HERMES_COMPACTION_MODE not in ("rotation", "in_place"):
    raise ImproperlyConfigured("HERMES_COMPACTION_MODE must be rotation or in_place")
# A run's lease is short and renewed by a heartbeat while it works: a dead worker's run is
# taken over by the recovery sweep (every HERMES_RECOVERY_SWEEP_SECONDS in every worker)
# within lease + sweep seconds of its last heartbeat.
HERMES_LOCK_LEASE_SECONDS = env_int("HERMES_LOCK_LEASE_SECONDS", 15)
HERMES_LEASE_HEARTBEAT_SECONDS = float(env_str("HERMES_LEASE_HEARTBEAT_SECONDS") or "5")
HERMES_RECOVERY_SWEEP_SECONDS = float(env_str("HERMES_RECOVERY_SWEEP_SECONDS") or "5")
# Enforced by the heartbeat, since the threads pool of `make run` ignores Celery's time limits.
HERMES_RUN_DEADLINE_SECONDS = env_int("HERMES_RUN_DEADLINE_SECONDS", CELERY_TASK_SOFT_TIME_LIMIT)
# Transient database errors (a restart, SQLite busy) are retried in place this long.
HERMES_DB_RETRY_SECONDS = env_int("HERMES_DB_RETRY_SECONDS", 60)
HERMES_WORKSPACE = Path(env_str("HERMES_WORKSPACE", str(BASE_DIR / "demo_workspace")))
HERMES_ENABLE_TERMINAL = env_bool("HERMES_ENABLE_TERMINAL", False)
HERMES_DEMO_DATA = env_bool("HERMES_DEMO_DATA", True)
# Import litellm in gunicorn's --preload master (hermes_web.warmup): no /v1 request waits for
# the import (issue #39: the first /v1 request of each worker took 3.9-5.5 s), and the workers
# share the master's copy (RSS counts ~150 MB more per process, but a worker that imported it
# itself held 254-260 MB PSS of its own against 84-90 MB shared). Off (0): for web processes
# that serve pages only; the first /v1 request of each process then imports it.
HERMES_WEB_PRELOAD_LITELLM = env_bool("HERMES_WEB_PRELOAD_LITELLM", True)
# A web worker whose resident memory is over this after a request finishes that request and
# is replaced by a fresh one forked from the preloaded master (gunicorn_hooks.post_request):
# a worker's memory is then bounded whatever a request once needed (CPython keeps freed
# memory; the probe of issue #39 saw an import leave a worker at 759-956 MB idle). Idle
# workers take ~350 MB RSS with litellm preloaded (most of it shared with the master).
# 0 turns it off.
HERMES_WEB_MAX_RSS_MB = env_int("HERMES_WEB_MAX_RSS_MB", 768)

# --- Hardening (issue #16) ----------------------------------------------------------------
# Every user's agent works in a folder of its own (a chat in its own when asked), copied from
# the HERMES_WORKSPACE template on first use; writes are capped by one quota per workspace.
HERMES_WORKSPACES_DIR = Path(env_str("HERMES_WORKSPACES_DIR") or str(DATA_DIR / "workspaces"))
HERMES_WORKSPACE_QUOTA_BYTES = env_int("HERMES_WORKSPACE_QUOTA_BYTES", 20 * 1024 * 1024)

# Login throttling (django-axes): after HERMES_LOGIN_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair gets 429 until the cool-off ends. A success resets only
# its own pair: signing in to one's own account never clears the failures against another's
# (with an address-only lockout it did, so wrong passwords interleaved with own logins were
# never throttled).
INSTALLED_APPS += ["csp", "axes"]
MIDDLEWARE += ["csp.middleware.CSPMiddleware", "axes.middleware.AxesMiddleware"]
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", *AUTHENTICATION_BACKENDS]
AXES_FAILURE_LIMIT = env_int("HERMES_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = env_int("HERMES_LOGIN_COOLOFF_MINUTES", 15) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "hermes_web.limits.client_ip"
AXES_VERBOSE = False
# And failed log-ins from one address across every username (hermes_web/limits.py): someone
# trying many usernames never reaches one pair's limit. Several people behind one address
# share it, hence a higher count than the pair's.
HERMES_LOGIN_ADDRESS_FAILURE_LIMIT = env_int("HERMES_LOGIN_ADDRESS_FAILURE_LIMIT", 30)
# Sign-ups: at most this many attempts per address and hour, counted in the "limits" cache
# (shared by every process: see CACHES).
HERMES_SIGNUP_PER_HOUR = env_int("HERMES_SIGNUP_PER_HOUR", 20)
AUTH_PASSWORD_VALIDATORS += [
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Content Security Policy (django-csp): no inline script anywhere, no third-party origin.
# Inline style *attributes* stay allowed (token bars carry their widths); <style> elements do not.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "style-src-attr": ["'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Production behind HTTPS: HERMES_HTTPS=1 turns on HSTS, secure cookies and the HTTPS redirect
# (`manage.py check --deploy` passes with DEBUG off); HERMES_BEHIND_PROXY=1 trusts the one
# reverse proxy in front for X-Forwarded-Proto / X-Forwarded-For. Off by default: `make run`
# serves plain HTTP on 127.0.0.1.
HERMES_HTTPS = env_bool("HERMES_HTTPS", False)
HERMES_BEHIND_PROXY = env_bool("HERMES_BEHIND_PROXY", False)
if HERMES_HTTPS:
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # plain-HTTP health probes from the proxy
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("HERMES_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("HERMES_HSTS_INCLUDE_SUBDOMAINS", True)
    # The directive alone lists nothing: submitting the domain to the preload list is a
    # separate, deliberate step. HERMES_HSTS_PRELOAD=0 leaves it out.
    SECURE_HSTS_PRELOAD = env_bool("HERMES_HSTS_PRELOAD", True)
if HERMES_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Pages render stored data that may predate the input checks: the template backend replaces
# lone surrogates in its output instead of failing the page (hermes_web.template_backend).
TEMPLATES[0]["BACKEND"] = "hermes_web.template_backend.ScrubbingDjangoTemplates"
TEMPLATES[0]["NAME"] = "django"  # the alias django-template-partials wraps
MIDDLEWARE += ["hermes_web.middleware.RefuseNulMiddleware"]
# Last, so its process_exception sees a view's "database is locked" first: a 503 with
# Retry-After in the door's shape instead of an HTML 500.
MIDDLEWARE += ["hermes_web.middleware.DatabaseBusyMiddleware"]
LOGGING["loggers"]["axes"] = {"level": "WARNING"}  # one INFO line per log-in otherwise
# --- OpenAI-compatible endpoint (/v1/chat/completions) --------------------------------------
# litellm model names a client may ask for besides HERMES_CHAT_MODEL and the demo model
# (comma-separated); they are called with HERMES_CHAT_API_BASE / HERMES_CHAT_API_KEY when set.
HERMES_API_MODELS = env_list("HERMES_API_MODELS", [])
