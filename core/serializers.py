"""Serializer pieces every app's API shares."""

from rest_framework import serializers


class WaitingSerializer(serializers.Serializer):
    """The backend a job waits for while its tasks retry (``core.waiting.Waiting``)."""

    backend = serializers.CharField(read_only=True, help_text="E.g. \"the LLM backend 'default'\".")
    reason = serializers.CharField(read_only=True, help_text="The last error the backend gave.")
    since = serializers.DateTimeField(read_only=True, help_text="The first failure of this wait.")
    retry = serializers.IntegerField(read_only=True, help_text="The retry now scheduled (1-based).")
    max_retries = serializers.IntegerField(read_only=True)
    next_retry_at = serializers.DateTimeField(read_only=True)


class JobWaitingSerializer(serializers.Serializer):
    """A job's ``waiting`` (null unless the unfinished job waits) and ``waiting_message`` (the
    same as a sentence, e.g. "Waiting for the LLM backend 'default' since 05:09: connection
    refused; retry 3 of 8, next in 40 s"; null likewise). Job serializers inherit it and list both."""

    waiting = WaitingSerializer(source="waiting_state", read_only=True, allow_null=True)
    waiting_message = serializers.CharField(read_only=True, allow_null=True)
