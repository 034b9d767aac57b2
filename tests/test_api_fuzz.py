"""Property-based fuzzing of the API from its own OpenAPI schema (schemathesis) against a live
server on loopback, as a researcher with a token: no answer is a server error, and every answer
has the documented content type and, where its status is documented, a body that conforms to the
schema. Bounded: five derandomized examples per operation (about 30 s)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
)

pytestmark = pytest.mark.django_db(transaction=True)
FUZZ = hypothesis_settings(
    max_examples=5, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
# Status codes the schema does not list (the 400s and 404s of DRF) are not checked: drf-spectacular
# documents only each operation's success answer.
CHECKS = [not_a_server_error, content_type_conformance, response_schema_conformance]


def test_no_server_error_and_answers_conform_to_the_schema(live_server, researcher):
    token = Token.objects.create(user=researcher)
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/?format=json")
    headers = {"Authorization": f"Token {token.key}"}
    failures: dict[str, str] = {}
    n_operations = 0
    # schemathesis's pytest plugin does not run under this pytest: drive its strategies directly.
    for result in schema.get_all_operations():
        operation = result.ok()
        n_operations += 1

        @given(case=operation.as_strategy())
        @FUZZ
        def exercise(case):
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            exercise()
        except (Exception, BaseExceptionGroup) as exc:  # one operation's failure must not hide the others'
            failures[operation.label] = str(exc)[:1500]
    assert n_operations > 20
    assert not failures, "\n\n".join(f"{label}:\n{error}" for label, error in failures.items())
