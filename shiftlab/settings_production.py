"""Production settings: the base settings with debug off and every deployment check satisfied.

Requires ``SHIFTLAB_SECRET_KEY`` and ``SHIFTLAB_ALLOWED_HOSTS``; see docs/deployment.md.
"""

import os

os.environ.setdefault("SHIFTLAB_DEBUG", "0")

from shiftlab.settings import *  # noqa: E402,F403
from shiftlab.settings import env_bool, env_str  # noqa: E402

DEBUG = False

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

REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}
