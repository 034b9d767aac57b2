"""Project-level pages that show data of several apps (core must not import the apps above it)."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from annotation.studies.onboarding_services import annotator_argilla_home, annotator_work
from core.projects import scoped
from core.roles import is_researcher
from core.selectors import audit_event_list
from corpora.selectors import dataset_list


@login_required
def home_view(request):
    researcher = is_researcher(request.user)
    context = {
        "datasets": scoped(dataset_list(), request.user)[:10] if researcher else [],
        "events": audit_event_list(user=request.user)[:10] if researcher else [],
        # An annotator's own work only (annotation.studies.onboarding_services.AnnotatorTask).
        "work": [] if researcher else annotator_work(request.user),
        "argilla_url": "" if researcher else annotator_argilla_home(),
    }
    return render(request, "core/home.html", context)
