"""The endpoint Argilla's webhook calls, ``/annotation/argilla/webhook/``. It has no session and no
CSRF token: the Standard Webhooks signature made with the stored secret is its authentication
(``annotation.studies.webhook_services.argilla_webhook_receive``)."""

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from annotation.studies.webhook_services import argilla_webhook_receive


@csrf_exempt
@require_POST
def argilla_webhook_view(request: HttpRequest) -> JsonResponse:
    receipt = argilla_webhook_receive(body=request.body, headers=request.headers)
    return JsonResponse({"detail": receipt.detail}, status=receipt.status)
