"""Shiftlab settings, read from environment variables.

The defaults are the single-machine embedded setup: SQLite under ``SHIFTLAB_DATA_DIR``, Celery
running tasks eagerly in-process, an LLM server on 127.0.0.1:8081 and Argilla on 127.0.0.1:6900.
Production overrides live in ``shiftlab.settings_production``. Every variable is listed in
``docs/configuration.md``.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from shiftlab.env import env_bool, env_list, env_str, extra_aliases

BASE_DIR = Path(__file__).resolve().parent.parent


DATA_DIR = Path(env_str("SHIFTLAB_DATA_DIR", str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

# Public values: the development fallbacks below (and the local Argilla owner's password of
# `manage.py argilla_server`), and the placeholders of .env.example. Production refuses them all
# (shiftlab/settings_production.py); tests keep the lists in step with their sources.
DEV_SECRET_KEY = "insecure-development-key-set-SHIFTLAB_SECRET_KEY-in-production"
DEV_ARGILLA_API_KEY = "shiftlab-local-argilla-owner-key"
DEV_CONFIG_SIGNING_KEY = "public-development-config-signing-key-set-SHIFTLAB_CONFIG_SIGNING_KEY-in-production"
DEVELOPMENT_SECRETS = (DEV_SECRET_KEY, DEV_ARGILLA_API_KEY, DEV_CONFIG_SIGNING_KEY, "shiftlab-local-owner")
PLACEHOLDER_SECRETS = (
    "change-me-generate-with-openssl-rand-hex-50",
    "change-me-config-signing-key",
    "change-me-postgres-password",
    "change-me-flower-password",
    "change-me-llm-api-key",
    "change-me-argilla-api-key",
    "change-me-argilla-password",
    "change-me-argilla-auth-secret",
)
# The variables of .env.example that hold secrets (Django's own and those of the other containers).
SECRET_VARIABLES = (
    "SHIFTLAB_SECRET_KEY",
    "SHIFTLAB_CONFIG_SIGNING_KEY",
    "DATABASE_URL",
    "POSTGRES_PASSWORD",
    "FLOWER_BASIC_AUTH",
    "SHIFTLAB_LLM_API_KEY",
    "ARGILLA_API_KEY",
    "ARGILLA_OWNER_PASSWORD",
    "ARGILLA_AUTH_SECRET_KEY",
)

# Debug mode is the developers' switch (SHIFTLAB_DEBUG=1), off by default: its error pages show
# settings, file paths and tracebacks to whoever can reach the server, the demo's included.
DEBUG = env_bool("SHIFTLAB_DEBUG", False)
# These settings are the development and single-machine demo settings: a secret left unset takes its
# public development value above, whatever SHIFTLAB_DEBUG says, so that the demo and the tests start
# with nothing set. shiftlab.settings_production, the settings of a server, turns this off.
DEVELOPMENT_SECRETS_ALLOWED = True
SECRET_KEY = env_str("SHIFTLAB_SECRET_KEY") or DEV_SECRET_KEY
# Signs exported benchmark configs (HMAC-SHA256, annotation/configs/config_export.py): a run accepts a config
# this deployment exported or one signed with this key, so deployments that share it share configs.
CONFIG_SIGNING_KEY = env_str("SHIFTLAB_CONFIG_SIGNING_KEY") or DEV_CONFIG_SIGNING_KEY

ALLOWED_HOSTS = env_list("SHIFTLAB_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("SHIFTLAB_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_results",
    "core",
    "corpora",
    "transforms",
    "annotation",
    "evaluation",
]

# Start-up wiring between the apps, all of it (docs/architecture.md, "Layers"): an app imports only
# the apps upstream of it (the import-linter contracts in .importlinter). Where an upstream page or
# report shows something a downstream app owns, the upstream app offers an extension point and this
# project package, above every app, names the provider by dotted path; the upstream app resolves it
# when it builds the page or report (django.utils.module_loading.import_string). No app's
# ready() plugs anything into another app.
# Sections of the project page beyond its members and invitations (core.project_sections).
PROJECT_PAGE_SECTIONS = ["corpora.project_sections.control_sources"]
# Benchmark Δ per transformation run, for the prompt-sensitivity report (transforms.sensitivity_services);
# without a source the report has no Δ column.
TRANSFORMS_BENCHMARK_DELTA_SOURCES = ["evaluation.sensitivity_selectors.benchmark_deltas_by_transform_run"]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "core.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After the session's user is known, before anything reads a body (the CSRF check's process_view).
    "core.middleware.RequestBodyLimitMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "core.middleware.NotFoundPageMiddleware",
]

# Content-Security-Policy of every response (core.middleware). Pages keep scripts and styles in
# static files; only the paths below, third-party pages built on inline code, go without.
SHIFTLAB_CSP = env_str(
    "SHIFTLAB_CSP",
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "frame-ancestors 'none'; base-uri 'self'; form-action 'self'",
)
SHIFTLAB_CSP_EXEMPT_PATHS = env_list("SHIFTLAB_CSP_EXEMPT_PATHS", ["/api/redoc/"])

ROOT_URLCONF = "shiftlab.urls"

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
                "core.context_processors.roles",
            ],
        },
    },
]

WSGI_APPLICATION = "shiftlab.wsgi.application"
ASGI_APPLICATION = "shiftlab.asgi.application"

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'shiftlab.sqlite3'}"),
        conn_max_age=int(env_str("SHIFTLAB_DB_CONN_MAX_AGE", "0")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file-backed test database lets a separate Celery worker process see test data.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-shiftlab.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
    }

# Log-in failures, lockouts and API throttles are counted in this cache: with several web processes
# (gunicorn workers) it must be one they share, e.g. SHIFTLAB_CACHE_URL=redis://redis:6379/2.
CACHE_URL = env_str("SHIFTLAB_CACHE_URL")
if CACHE_URL and not CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(
        f"SHIFTLAB_CACHE_URL={CACHE_URL!r}: use a Redis URL (redis://host:6379/2) or leave it empty."
    )
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
    if CACHE_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_ROOT = DATA_DIR / "media"
MEDIA_URL = "media/"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Uploaded benchmark files can be large; stream them to disk rather than memory.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# Request bodies (core/request_body.py): refused (413) by their Content-Length before anything reads
# them. A caller who is not logged in (and anyone on the log-in routes) may send this many KB; a
# logged-in user this many MB, or SHIFTLAB_MAX_UPLOAD_MB + 1 on the dataset upload routes. Files are
# kept only on the routes that take them, from logged-in users.
SHIFTLAB_MAX_ANONYMOUS_REQUEST_KB = int(env_str("SHIFTLAB_MAX_ANONYMOUS_REQUEST_KB", "1024"))
SHIFTLAB_MAX_REQUEST_MB = int(env_str("SHIFTLAB_MAX_REQUEST_MB", "32"))

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
# Messages wait for the next page in the server-side session (database-backed), never in a cookie:
# none should carry a secret (no page shows an Argilla password any more), but a cookie is the
# client's to keep and replay.
SESSION_ENGINE = "django.contrib.sessions.backends.db"
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

# Log-in protection (core/login_guard.py), for the log-in pages and the API token endpoint alike: a
# username with this many failed log-ins within the window, or an address with the per-IP number,
# is refused for the lockout time. The counters live in CACHES["default"].
AUTHENTICATION_BACKENDS = ["core.login_guard.LockoutModelBackend"]
SHIFTLAB_LOGIN_MAX_FAILURES = int(env_str("SHIFTLAB_LOGIN_MAX_FAILURES", "5"))
SHIFTLAB_LOGIN_MAX_FAILURES_PER_IP = int(env_str("SHIFTLAB_LOGIN_MAX_FAILURES_PER_IP", "20"))
SHIFTLAB_LOGIN_FAILURE_WINDOW_SECONDS = int(env_str("SHIFTLAB_LOGIN_FAILURE_WINDOW_SECONDS", "900"))
SHIFTLAB_LOGIN_LOCKOUT_SECONDS = int(env_str("SHIFTLAB_LOGIN_LOCKOUT_SECONDS", "900"))
# Requests to POST /api/auth/token/ per client address and per username (DRF rates: n/sec|min|hour|day).
SHIFTLAB_AUTH_THROTTLE_RATES = {
    "auth_ip": env_str("SHIFTLAB_AUTH_RATE_PER_IP", "30/min"),
    "auth_username": env_str("SHIFTLAB_AUTH_RATE_PER_USERNAME", "10/min"),
}
# API tokens expire this many hours after they were issued (core/authentication.py).
SHIFTLAB_TOKEN_TTL_HOURS = int(env_str("SHIFTLAB_TOKEN_TTL_HOURS", str(24 * 7)))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: unauthenticated API calls then get 401 with a WWW-Authenticate header.
        "core.authentication.ExpiringTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's JSON parser with the nesting counted first (core.nesting); forms and uploads as DRF's.
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # One error boundary: a ShiftlabError raised below any API view is answered here.
    "EXCEPTION_HANDLER": "core.api_errors.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    # Proxies in front of the web server whose X-Forwarded-For is trusted: the client address of
    # throttles and log-in lockouts. 0: the address of the connection itself.
    "NUM_PROXIES": int(env_str("SHIFTLAB_NUM_PROXIES", "0")),
}

# /api/docs/, /api/redoc/ and /api/schema/ for anyone: these settings are the demo's. Production
# (settings_production) turns it off: the docs then need a log-in (the schema: a session or a token).
SHIFTLAB_PUBLIC_API_DOCS = env_bool("SHIFTLAB_PUBLIC_API_DOCS", True)

SPECTACULAR_SETTINGS = {
    "TITLE": "Shiftlab API",
    "DESCRIPTION": "Human-validated, dynamic robustness benchmarks for text embedding models.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["core.api_docs.ApiDocsAccess"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Serve Swagger UI / ReDoc assets locally: the docs work on machines without internet.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "TaskTypeEnum": "corpora.task_types.TaskType",
        "DatasetItemKindEnum": "corpora.models.ITEM_KIND_CHOICES",
        "JudgeReportKindEnum": "transforms.models.JudgeReportKind",
        "TransformationEnum": "transforms.models.TRANSFORMATION_CHOICES",
        "JobStatusEnum": "core.models.TrackedJob.Status",
        "StudyStatusEnum": "annotation.models.Study.Status",
        "StudyAnnotatorStatusEnum": "annotation.models.Annotator.Status",
        "StudyFlagStatusEnum": "annotation.models.Flag.Status",
        "FlagReviewDecisionEnum": "annotation.serializers.FLAG_REVIEW_CHOICES",
        "ApprovalDecisionEnum": "annotation.models.Approval.Decision",
        "ConfigFormatEnum": ["json", "yaml"],
    },
}

# Celery: eager (in-process) when no broker is configured, Redis otherwise. Task results and
# progress are kept in the database, never only in the result backend.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
if CELERY_TASK_ALWAYS_EAGER:
    # In-process tasks cannot wait and retry later: a transient error (an LLM server that is down)
    # reaches the caller at once as itself, with its message, instead of as a Celery Retry.
    CELERY_TASK_ANNOTATIONS = {"*": {"max_retries": 0}}
CELERY_RESULT_BACKEND = "django-db"
CELERY_RESULT_EXTENDED = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# --- Resource queues (docs/deployment.md, "Worker pools") ---
# Tasks go to the queue of what they need: "llm" (an LLM server: transformation chunks, judge
# reports, study validations), "encode" (an embedding model: benchmark units, baseline model
# scores) and "default" (the database and Argilla: imports, syncs, publishes, fan-out,
# finalisation, reports). docker-compose.yml starts one worker pool per queue; one worker can
# consume them all (`-Q default,llm,encode`, scripts/demo.sh).
# SHIFTLAB_CELERY_QUEUE sends every task to that one queue instead (tests give each worker its own).
SHIFTLAB_CELERY_QUEUE = env_str("SHIFTLAB_CELERY_QUEUE")
CELERY_TASK_DEFAULT_QUEUE = SHIFTLAB_CELERY_QUEUE or "default"
SHIFTLAB_QUEUE_TASKS = {
    "llm": (
        "transforms.execute_chunk",
        "transforms.execute_judge_report",
        "annotation.baseline_llm_answer",
        "annotation.judge_population",
        "annotation.study_validate",
    ),
    "encode": ("evaluation.execute_benchmark_unit", "evaluation.baseline_score_models"),
}
CELERY_TASK_ROUTES = (
    {}
    if SHIFTLAB_CELERY_QUEUE
    else {name: {"queue": queue} for queue, names in SHIFTLAB_QUEUE_TASKS.items() for name in names}
)
# A bare `celery worker` (no -Q) consumes every queue here.
CELERY_TASK_QUEUES = dict.fromkeys([CELERY_TASK_DEFAULT_QUEUE, *(r["queue"] for r in CELERY_TASK_ROUTES.values())], {})
# --- end resource queues ---
CELERY_TASK_TIME_LIMIT = int(env_str("SHIFTLAB_TASK_TIME_LIMIT", str(6 * 3600)))
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 60
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# The fallback for Argilla webhooks: `celery -A shiftlab beat` queues a sync of every published
# validation study this often (it also releases annotators' next batches); 0 turns it off.
SHIFTLAB_SYNC_EVERY_SECONDS = int(env_str("SHIFTLAB_SYNC_EVERY_SECONDS", "300"))
if SHIFTLAB_SYNC_EVERY_SECONDS < 0:
    raise ImproperlyConfigured("SHIFTLAB_SYNC_EVERY_SECONDS must be 0 (off) or a number of seconds.")
CELERY_BEAT_SCHEDULE = (
    {
        "sync-published-studies": {
            "task": "annotation.sync_published_studies",
            "schedule": float(SHIFTLAB_SYNC_EVERY_SECONDS),
        }
    }
    if SHIFTLAB_SYNC_EVERY_SECONDS
    else {}
)
# --- Lost tasks and stuck jobs (docs/deployment.md, "When a worker dies") ---
# A task whose worker died unacknowledged is handed out again after this many seconds. Live
# workers refresh the tasks they hold every SHIFTLAB_BROKER_HEARTBEAT_SECONDS (core/broker.py), so
# a long task is never taken from a live worker; the transport looks for lost tasks every
# "unacked_restore_interval" seconds.
SHIFTLAB_BROKER_VISIBILITY_TIMEOUT = int(env_str("SHIFTLAB_BROKER_VISIBILITY_TIMEOUT", "300"))
SHIFTLAB_BROKER_HEARTBEAT_SECONDS = max(1, SHIFTLAB_BROKER_VISIBILITY_TIMEOUT // 5)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": SHIFTLAB_BROKER_VISIBILITY_TIMEOUT,
    "unacked_restore_interval": min(10, SHIFTLAB_BROKER_HEARTBEAT_SECONDS),
    "unacked_restore_throttle": 1,
}
# Celery beat's sweeper resumes (or, after repeated resumes, fails) jobs pending or running for
# longer than SHIFTLAB_STUCK_JOB_MINUTES with no task queued or held by a worker; 0 turns it off.
SHIFTLAB_STUCK_JOB_MINUTES = float(env_str("SHIFTLAB_STUCK_JOB_MINUTES", "30"))
SHIFTLAB_SWEEP_EVERY_SECONDS = int(env_str("SHIFTLAB_SWEEP_EVERY_SECONDS", "300"))
if SHIFTLAB_SWEEP_EVERY_SECONDS < 0 or SHIFTLAB_STUCK_JOB_MINUTES * 60 <= SHIFTLAB_BROKER_VISIBILITY_TIMEOUT:
    raise ImproperlyConfigured(
        "SHIFTLAB_SWEEP_EVERY_SECONDS must be 0 (off) or a number of seconds, and SHIFTLAB_STUCK_JOB_MINUTES "
        "longer than SHIFTLAB_BROKER_VISIBILITY_TIMEOUT (a lost task is handed out again before its job is swept)."
    )
if SHIFTLAB_SWEEP_EVERY_SECONDS:
    CELERY_BEAT_SCHEDULE["sweep-stuck-jobs"] = {
        "task": "core.sweep_stuck_jobs",
        "schedule": float(SHIFTLAB_SWEEP_EVERY_SECONDS),
    }
# --- end of lost tasks and stuck jobs ---

# LLM backends, chosen Django-backend style (dotted path + options). The default alias is the
# embedded llama.cpp OpenAI-compatible server, or a vLLM server in production.
TRANSFORM_BACKENDS = {
    "default": {
        "BACKEND": "transforms.backends.openai_compat.OpenAICompatBackend",
        "OPTIONS": {
            "base_url": env_str("SHIFTLAB_LLM_BASE_URL", "http://127.0.0.1:8081/v1"),
            "model": env_str("SHIFTLAB_LLM_MODEL", "qwen2.5-coder-1.5b-instruct"),
            "api_key": env_str("SHIFTLAB_LLM_API_KEY", "not-needed"),
        },
    }
}


# More aliases (e.g. candidate generators and judges): {"alias": {"base_url": ..., "model": ...}} for
# OpenAI-compatible servers, or {"alias": {"BACKEND": "dotted.path", "OPTIONS": {...}}}.
TRANSFORM_BACKENDS.update(
    extra_aliases(
        env_str("SHIFTLAB_LLM_BACKENDS"),
        variable="SHIFTLAB_LLM_BACKENDS",
        backend="transforms.backends.openai_compat.OpenAICompatBackend",
        options={"api_key": "not-needed"},
        example='{"small": {"base_url": "http://127.0.0.1:8082/v1", "model": "smollm2-135m-instruct"}}',
    )
)

# Parallel slots of the embedded LLM when served by llama.cpp's llama-server (`manage.py llm_server`):
# requests decoded together. 0: chosen for the machine (transforms.cpu_features.default_slots).
EMBEDDED_LLM_PARALLEL = int(env_str("SHIFTLAB_LLM_PARALLEL", "0"))
# CPU threads of the embedded LLM server. 0: all cores but one, which stays with the web server and
# worker: with every core taken, llama.cpp's decoding collapsed under other load (docs/performance.md).
EMBEDDED_LLM_THREADS = int(env_str("SHIFTLAB_LLM_THREADS", "0"))
# torch threads of each encoder model process. 0: the cores an LLM server on this machine leaves
# (all but the LLM's SHIFTLAB_LLM_THREADS, at least one) when one answers at the default LLM backend's
# loopback address, as in the demo, else torch's default of one per core: torch's spinning threads beside
# llama.cpp's cut encoding to a sixth or less (evaluation/encoder_threads.py, docs/performance.md).
ENCODER_THREADS = int(env_str("SHIFTLAB_ENCODER_THREADS", "0"))
if ENCODER_THREADS < 0:
    raise ImproperlyConfigured(
        f"SHIFTLAB_ENCODER_THREADS={ENCODER_THREADS}: give a number of torch threads, or 0 for the cores "
        "the embedded LLM server leaves."
    )

# Items per Celery chunk task of a transformation run (each item has one or two texts).
TRANSFORM_CHUNK_SIZE = int(env_str("SHIFTLAB_TRANSFORM_CHUNK_SIZE", "16"))

# --- Evaluation: embedding encoders (evaluation/encoders.py) ---------------------------------
# Chosen Django-backend style like TRANSFORM_BACKENDS. `manage.py evaluate --model X` takes an alias
# below, or a model name/path encoded with the "default" alias's backend and options. An empty
# device means "cuda when available, else cpu".
EVALUATION_ENCODERS = {
    "default": {
        "BACKEND": "evaluation.encoders.SentenceTransformerEncoder",
        "OPTIONS": {
            "model": env_str("SHIFTLAB_ENCODER_MODEL", "all-MiniLM-L6-v2"),
            "device": env_str("SHIFTLAB_ENCODER_DEVICE"),
            "dtype": env_str("SHIFTLAB_ENCODER_DTYPE", "float32"),
            "batch_size": int(env_str("SHIFTLAB_ENCODER_BATCH_SIZE", "32")),
        },
    }
}


def _extra_encoders(raw: str) -> dict:
    """More encoder aliases, as JSON: ``{"alias": {"model": ..., "dtype": ...}}`` for a
    sentence-transformers model (the default alias's options fill the rest), or
    ``{"alias": {"BACKEND": "dotted.path", "OPTIONS": {...}}}`` for any encoder class, e.g. the
    augmented encoder ``evaluation.augmented_encoder.AugmentedEncoder``."""
    return extra_aliases(
        raw,
        variable="SHIFTLAB_ENCODERS",
        backend="evaluation.encoders.SentenceTransformerEncoder",
        options=EVALUATION_ENCODERS["default"]["OPTIONS"],
        example='{"minilm-para": {"BACKEND": "evaluation.augmented_encoder.AugmentedEncoder", "OPTIONS": {"base": '
        '"all-MiniLM-L6-v2"}}}',
        options_apart=True,
    )


EVALUATION_ENCODERS.update(_extra_encoders(env_str("SHIFTLAB_ENCODERS")))
# Embeddings cached per (model + revision, text hash), as numpy shards (evaluation/embedding_cache.py).
EMBEDDING_CACHE_DIR = Path(env_str("SHIFTLAB_EMBEDDING_CACHE_DIR", str(DATA_DIR / "embeddings"))).resolve()
# --- shared embedding cache (docs/deployment.md, "One embedding cache for all hosts") ---
# Where every host keeps the cache: empty uses EMBEDDING_CACHE_DIR; a local or shared filesystem path
# (NFS, CephFS) or an fsspec URL (s3://bucket/prefix, with s3fs installed) makes hosts share it.
EMBEDDING_CACHE_URL = env_str("SHIFTLAB_EMBEDDING_CACHE_URL")
# A host encoding texts claims them for this long (renewed as it goes); others wait for its vectors
# instead of encoding them too, and take the texts over when a claim expires (its host died).
EMBEDDING_CLAIM_SECONDS = float(env_str("SHIFTLAB_EMBEDDING_CLAIM_SECONDS", "600"))
# --- end shared embedding cache ---
# --- end evaluation -------------------------------------------------------------------------

ARGILLA_API_URL = env_str("ARGILLA_API_URL", "http://127.0.0.1:6900")
# Unset: the public owner key `manage.py argilla_server` gives the local server it starts.
ARGILLA_API_KEY = env_str("ARGILLA_API_KEY") or DEV_ARGILLA_API_KEY
# H8a (issue 20): where annotators' browsers reach Argilla's web UI, for the annotation links of
# a study page (default: ARGILLA_API_URL, right when Shiftlab and annotators reach it alike).
ARGILLA_UI_URL = env_str("ARGILLA_UI_URL", ARGILLA_API_URL)
# Where Argilla's worker reaches this deployment (scheme, host, optional port and prefix), e.g.
# https://shiftlab.example.org. Publishing a study then registers an Argilla webhook to
# <it>/annotation/argilla/webhook/, and responses are synced as they come. Empty: no webhook;
# responses arrive with each sync (annotation/studies/webhook_services.py).
SHIFTLAB_PUBLIC_URL = env_str("SHIFTLAB_PUBLIC_URL").strip().rstrip("/")
if SHIFTLAB_PUBLIC_URL and not SHIFTLAB_PUBLIC_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(
        f"SHIFTLAB_PUBLIC_URL={SHIFTLAB_PUBLIC_URL!r}: give the URL Argilla reaches Shiftlab at, with its "
        "scheme (https://shiftlab.example.org), or leave it empty."
    )

# Seconds a health probe waits for each external service.
HEALTH_CHECK_TIMEOUT = float(env_str("SHIFTLAB_HEALTH_TIMEOUT", "2"))
# How long /health/ remembers the one-token generation it asks an LLM server without a local supervisor.
LLM_HEALTH_GENERATION_TTL = float(env_str("SHIFTLAB_LLM_HEALTH_TTL", "30"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("SHIFTLAB_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "httpx": {"level": "WARNING"}},
}
if CELERY_TASK_ALWAYS_EAGER:
    # In-process tasks: a line per task and kombu's "no broker hostname" would drown command output.
    LOGGING["loggers"] |= {"celery.app.trace": {"level": "WARNING"}, "kombu.connection": {"level": "ERROR"}}

# --- Uploads and import limits ---
# Largest upload (all files of one upload together) the Datasets page and POST /api/dataset-imports/
# accept; a larger one is refused before it is stored. `manage.py corpora import` (files already on the
# server) is not bound by it.
DATASET_MAX_UPLOAD_MB = int(env_str("SHIFTLAB_MAX_UPLOAD_MB", "500"))
# Largest size the files of one import may decode to together (a Parquet file's is checked from its
# metadata and again while decoding).
DATASET_MAX_UNCOMPRESSED_MB = int(env_str("SHIFTLAB_MAX_UNCOMPRESSED_MB", "2048"))
# Largest decoded size of one value (cell) and of one row, and the most rows one import may hold: all
# checked while reading, before the data become Python objects (corpora/limits.py).
DATASET_MAX_CELL_KB = int(env_str("SHIFTLAB_MAX_CELL_KB", "1024"))
DATASET_MAX_ROW_KB = int(env_str("SHIFTLAB_MAX_ROW_KB", "4096"))
DATASET_MAX_ROWS = int(env_str("SHIFTLAB_MAX_ROWS", "5000000"))
# Memory an import job's reading and checking may use: it runs in a child process capped at this much
# (corpora/bounded_import.py; Linux). 0 reads in the worker itself, with no ceiling.
DATASET_IMPORT_MEMORY_MB = int(env_str("SHIFTLAB_IMPORT_MEMORY_MB", "4096"))
# Processor seconds that child may use (0: no cap); a child out of memory can spin instead of failing.
DATASET_IMPORT_CPU_S = int(env_str("SHIFTLAB_IMPORT_CPU_S", "1800"))

# --- MTEB tasks by name (corpora/mteb_tasks.py; added for issue 17) ---
# Folder of local copies of MTEB tasks' hub datasets, one subfolder per task name (or per hub path,
# e.g. mteb/stsbenchmark-sts): `corpora import --mteb NAME` reads from there before trying the hub.
MTEB_DATA_DIR = env_str("SHIFTLAB_MTEB_DATA_DIR")
# --- end MTEB tasks ---

# --- Invitations (core/invitations.py; issue 42) ---
# Days an annotator invitation link works (1 to 30; the project page may choose another per link).
INVITATION_DAYS = int(env_str("SHIFTLAB_INVITATION_DAYS", "7"))
# Mail server for invitations: unset (the demo), nobody is mailed and the page shows the inviter the
# link to pass on; set, a link made with an address is also mailed there.
EMAIL_HOST = env_str("SHIFTLAB_EMAIL_HOST")
EMAIL_PORT = int(env_str("SHIFTLAB_EMAIL_PORT", "25"))
EMAIL_HOST_USER = env_str("SHIFTLAB_EMAIL_USER")
EMAIL_HOST_PASSWORD = env_str("SHIFTLAB_EMAIL_PASSWORD")
EMAIL_USE_TLS = env_bool("SHIFTLAB_EMAIL_TLS", False)
DEFAULT_FROM_EMAIL = env_str("SHIFTLAB_EMAIL_FROM", "shiftlab@localhost")
INVITATIONS_BY_MAIL = bool(EMAIL_HOST)
