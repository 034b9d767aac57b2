"""Token authentication of the API: a token is valid for ``SHIFTLAB_TOKEN_TTL_HOURS`` after it was
issued (``POST /api/auth/token/``, core/apis.py). No import of DRF's views here: DRF imports this
class while its views module loads."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from core.services import api_token_expires_at

TOKEN_URL = "/api/auth/token/"


class ExpiringTokenAuthentication(TokenAuthentication):
    """DRF's token authentication, refusing a token ``SHIFTLAB_TOKEN_TTL_HOURS`` after it was issued."""

    def authenticate_credentials(self, key):
        user, token = super().authenticate_credentials(key)
        expires_at = api_token_expires_at(token)
        if expires_at <= timezone.now():
            raise exceptions.AuthenticationFailed(
                f"Token expired at {expires_at:%Y-%m-%d %H:%M} UTC: get a new one with POST {TOKEN_URL} "
                "(username and password)."
            )
        return user, token
