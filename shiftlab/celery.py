"""The Celery application. Tasks run eagerly in-process unless CELERY_BROKER_URL is set."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shiftlab.settings")

app = Celery("shiftlab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
