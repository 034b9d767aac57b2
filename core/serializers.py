"""Serializer pieces every app's API shares."""

from rest_framework import serializers

from core.nesting import NestingError, loads_json


def project_slug_field() -> serializers.SlugRelatedField:
    """The project an object belongs to, shown as its slug."""
    return serializers.SlugRelatedField(slug_field="slug", read_only=True)


def project_choice_field() -> serializers.CharField:
    """The project a new object goes into (optional: else that of its inputs, else your one project)."""
    return serializers.CharField(
        required=False,
        allow_null=True,
        max_length=61,
        help_text="Slug of the project it goes into; default: its inputs' project, else the one you belong to.",
    )


def username_field() -> serializers.SlugRelatedField:
    """A user an object names (its creator, reviewer...), shown as their username."""
    return serializers.SlugRelatedField(slug_field="username", read_only=True)


class JSONField(serializers.JSONField):
    """DRF's JSONField, reading the JSON text of a form or multipart field (or a binary field)
    through ``core.nesting.loads_json``: a value nested too deeply is a 400 on the field, as the
    same value in a JSON body is, instead of a ``RecursionError`` (a 500). Writable JSON fields of
    the API are this one (tests/test_request_bodies.py checks)."""

    def to_internal_value(self, data):
        if not (self.binary or getattr(data, "is_json_string", False)):
            return super().to_internal_value(data)  # already data: a JSON body, nesting counted by its parser
        try:
            return loads_json(data, cls=self.decoder)
        except NestingError as exc:
            raise serializers.ValidationError(f"The value is {exc}") from None
        except (TypeError, ValueError):
            self.fail("invalid")


class WaitingSerializer(serializers.Serializer):
    """The backend a job waits for while its tasks retry (``core.waiting.Waiting``)."""

    backend = serializers.CharField(read_only=True, help_text="E.g. \"the LLM backend 'default'\".")
    reason = serializers.CharField(read_only=True, help_text="The last error the backend gave.")
    since = serializers.DateTimeField(read_only=True, help_text="The first failure of this wait.")
    retry = serializers.IntegerField(
        read_only=True, help_text="The retry now scheduled (1-based); 0 while the backend is busy, not down."
    )
    max_retries = serializers.IntegerField(read_only=True, help_text="0 while the backend is busy, not down.")
    next_retry_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the next retry is due; null while the backend is busy."
    )
    busy_with = serializers.CharField(
        read_only=True,
        help_text='The job that holds the busy backend (e.g. "run #7"); "" when none is known or it is down.',
    )


class JobWaitingSerializer(serializers.Serializer):
    """A job's ``waiting`` (null unless the unfinished job waits) and ``waiting_message`` (the
    same as a sentence, e.g. "Waiting for the LLM backend 'default' since 05:09: connection
    refused; retry 3 of 8, next in 40 s"; null likewise). Job serializers inherit it and list both."""

    waiting = WaitingSerializer(source="waiting_state", read_only=True, allow_null=True)
    waiting_message = serializers.CharField(read_only=True, allow_null=True)


JOB_END_FIELDS = ["error", "waiting", "waiting_message", "created_at", "started_at", "finished_at"]
"""The last fields a job serializer lists: its error, its wait and its times."""


def valid_input(serializer_class: type[serializers.Serializer], request) -> dict:
    """The request body checked by ``serializer_class``: its validated data, or DRF's 400 answer
    with the field errors (an API view's first step before it calls the service entry)."""
    data_in = serializer_class(data=request.data)
    data_in.is_valid(raise_exception=True)
    return data_in.validated_data
