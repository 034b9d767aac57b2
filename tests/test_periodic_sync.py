"""The periodic sync (Celery beat): every published validation study gets a sync queued, drafts
and locked studies none; the schedule follows SHIFTLAB_SYNC_EVERY_SECONDS."""

import pytest
from django.conf import settings

from annotation import tasks
from annotation.models import Study
from tests.support import published_keyword_study

pytestmark = pytest.mark.django_db


def test_every_published_study_gets_a_sync_queued_and_nothing_else(researcher, monkeypatch):
    study = published_keyword_study(researcher=researcher, name="swept", limit=5, items=4, batch_size=2)
    queued = []
    monkeypatch.setattr(tasks.sync_study, "delay", queued.append)
    assert tasks.sync_published_studies() == 1
    assert queued == [study.pk]
    Study.objects.filter(pk=study.pk).update(status=Study.Status.LOCKED, published_at=None)
    assert tasks.sync_published_studies() == 0 and queued == [study.pk]


def test_beat_schedules_the_sweep_every_five_minutes_by_default():
    entry = settings.CELERY_BEAT_SCHEDULE["sync-published-studies"]
    assert entry["task"] == tasks.sync_published_studies.name == "annotation.sync_published_studies"
    assert entry["schedule"] == float(settings.SHIFTLAB_SYNC_EVERY_SECONDS) == 300.0
