"""Production settings: the base settings with debug off and every deployment check satisfied.

Requires ``SHIFTLAB_SECRET_KEY`` and ``SHIFTLAB_ALLOWED_HOSTS``; see docs/deployment.md. Never
falls back to a development secret, whatever ``SHIFTLAB_DEBUG`` says, and refuses to start while
any variable holds a public value: a development default or a placeholder of ``.env.example``.
"""

from django.core.exceptions import ImproperlyConfigured

from shiftlab.settings import *  # noqa: F403
from shiftlab.settings import (
    DEVELOPMENT_SECRETS,
    PLACEHOLDER_SECRETS,
    SECRET_VARIABLES,
    env_bool,
    env_str,
)

DEBUG = False
# The base settings fall back to public development values for the secrets below; production takes
# them from the environment only.
DEVELOPMENT_SECRETS_ALLOWED = False
SECRET_KEY = env_str("SHIFTLAB_SECRET_KEY")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "Set SHIFTLAB_SECRET_KEY (a long random string, e.g. from `openssl rand -hex 50`): production "
        "never uses the development key, whatever SHIFTLAB_DEBUG says."
    )
CONFIG_SIGNING_KEY = env_str("SHIFTLAB_CONFIG_SIGNING_KEY")
if not CONFIG_SIGNING_KEY:
    raise ImproperlyConfigured(
        "Set SHIFTLAB_CONFIG_SIGNING_KEY (a long random string, e.g. from `openssl rand -hex 32`; the same on "
        "deployments that exchange benchmark configs): production never uses the development key."
    )
ARGILLA_API_KEY = env_str("ARGILLA_API_KEY")


def _refuse_public_secrets() -> None:
    # Not only the variables Django reads: the containers share one .env, so the web process also
    # stops a deployment whose database, Flower or Argilla secrets are still placeholders.
    for name in SECRET_VARIABLES:
        value = env_str(name)
        placeholder = next((p for p in PLACEHOLDER_SECRETS if p in value), None)
        if placeholder:
            raise ImproperlyConfigured(
                f"{name} still holds the placeholder {placeholder!r} of .env.example: replace it with a "
                "random secret of your own (e.g. `openssl rand -hex 32`) in .env."
            )
        if value in DEVELOPMENT_SECRETS:
            raise ImproperlyConfigured(
                f"{name} is one of Shiftlab's public development defaults: set a random secret of your own "
                "(e.g. `openssl rand -hex 32`)."
            )


_refuse_public_secrets()

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SHIFTLAB_SECURE_SSL_REDIRECT", True)
# The health endpoint is probed over plain HTTP inside the container network.
SECURE_REDIRECT_EXEMPT = [r"^health/$"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = int(env_str("SHIFTLAB_HSTS_SECONDS", str(60 * 60 * 24 * 365)))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = env_bool("SHIFTLAB_HSTS_PRELOAD", True)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# The API docs and schema need a log-in here (the base settings, the demo's, show them to anyone).
SHIFTLAB_PUBLIC_API_DOCS = env_bool("SHIFTLAB_PUBLIC_API_DOCS", False)

REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}
