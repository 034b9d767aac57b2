"""Standard Webhooks signatures as Argilla sends them: the published test vector, signatures made by
an independent implementation (hmac and base64 here), and every refusal."""

import base64
import hashlib
import hmac
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.studies.webhooks import Refusal, secret_key, webhook_event, webhook_sign, webhook_verify

# The specification's test vector, as its reference library checks it
# (standard-webhooks/standard-webhooks, libraries/python/tests/test_webhooks.py, test_sign_function).
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def _headers(message_id=VECTOR_ID, timestamp=VECTOR_TIMESTAMP, signature=VECTOR_SIGNATURE) -> dict[str, str]:
    return {"webhook-id": message_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature}


def _independent_signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def test_the_published_vector_is_reproduced_and_accepted_with_or_without_the_prefix():
    assert webhook_sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE
    for secret in (VECTOR_SECRET, VECTOR_SECRET.removeprefix("whsec_")):
        check = webhook_verify(VECTOR_BODY, _headers(), secrets=[secret], now=VECTOR_TIMESTAMP)
        assert check.ok and check.message_id == VECTOR_ID


def test_header_names_in_any_case_and_one_valid_signature_among_others_are_accepted():
    headers = {
        "Webhook-Id": VECTOR_ID,
        "WEBHOOK-TIMESTAMP": str(VECTOR_TIMESTAMP),
        # A wrong v1, another scheme's entry, an undecodable one, then the valid one.
        "webhook-signature": f"v1,bm9wZQ== v2,{VECTOR_SIGNATURE[3:]} v1,!!! {VECTOR_SIGNATURE}",
    }
    assert webhook_verify(VECTOR_BODY, headers, secrets=[VECTOR_SECRET], now=VECTOR_TIMESTAMP).ok


def test_any_of_the_known_secrets_may_have_signed():
    other = base64.b64encode(b"another secret of this receiver").decode()
    assert webhook_verify(VECTOR_BODY, _headers(), secrets=[other, VECTOR_SECRET], now=VECTOR_TIMESTAMP).ok


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_refused(missing):
    headers = {k: v for k, v in _headers().items() if k != missing}
    check = webhook_verify(VECTOR_BODY, headers, secrets=[VECTOR_SECRET], now=VECTOR_TIMESTAMP)
    assert check.refusal is Refusal.MISSING and missing in check.reason


@pytest.mark.parametrize("timestamp", ["hello", "1614265330.5", "-1614265330", "١٦١٤٢٦٥٣٣٠"])
def test_a_timestamp_that_is_not_whole_seconds_is_refused(timestamp):
    check = webhook_verify(VECTOR_BODY, _headers(timestamp=timestamp), secrets=[VECTOR_SECRET], now=VECTOR_TIMESTAMP)
    assert check.refusal is Refusal.MALFORMED


def test_timestamps_more_than_five_minutes_away_are_refused_and_the_bounds_accepted():
    def check(now):
        return webhook_verify(VECTOR_BODY, _headers(), secrets=[VECTOR_SECRET], now=now)

    assert check(VECTOR_TIMESTAMP + 300).ok and check(VECTOR_TIMESTAMP - 300).ok
    old, ahead = check(VECTOR_TIMESTAMP + 301), check(VECTOR_TIMESTAMP - 301)
    assert old.refusal is Refusal.STALE and "old" in old.reason
    assert ahead.refusal is Refusal.STALE and "ahead" in ahead.reason


@pytest.mark.parametrize(
    ("body", "secret", "headers"),
    [
        (b'{"test": 2432232315}', VECTOR_SECRET, _headers()),  # body changed
        (VECTOR_BODY, base64.b64encode(b"not the secret").decode(), _headers()),  # other secret
        (VECTOR_BODY, VECTOR_SECRET, _headers(message_id="msg_other")),  # id changed
        (VECTOR_BODY, VECTOR_SECRET, _headers(signature=VECTOR_SIGNATURE.replace("v1,", "v2,"))),  # unknown scheme
        (VECTOR_BODY, VECTOR_SECRET, _headers(signature="v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=")),
    ],
)
def test_a_delivery_without_a_valid_signature_is_refused(body, secret, headers):
    check = webhook_verify(body, headers, secrets=[secret], now=VECTOR_TIMESTAMP)
    assert check.refusal is Refusal.SIGNATURE


def test_a_timestamp_changed_within_the_tolerance_breaks_the_signature():
    check = webhook_verify(
        VECTOR_BODY, _headers(timestamp=VECTOR_TIMESTAMP + 1), secrets=[VECTOR_SECRET], now=VECTOR_TIMESTAMP
    )
    assert check.refusal is Refusal.SIGNATURE


def test_an_overlong_webhook_id_is_refused_before_anything_is_computed():
    check = webhook_verify(VECTOR_BODY, _headers(message_id="m" * 300), secrets=[VECTOR_SECRET], now=VECTOR_TIMESTAMP)
    assert check.refusal is Refusal.MALFORMED


def test_secrets_decode_padded_unpadded_and_prefixed_and_bad_ones_are_refused():
    raw = bytes(range(64))
    padded = base64.b64encode(raw).decode()  # Argilla's form: 64 bytes, base64 with "=="
    assert secret_key(padded) == secret_key(padded.rstrip("=")) == secret_key("whsec_" + padded) == raw
    for bad in ("", "whsec_", "not base64!", "abcde"):
        with pytest.raises(ValueError):
            secret_key(bad)


@settings(max_examples=80, deadline=None)
@given(
    key=st.binary(min_size=1, max_size=64),
    message_id=st.text(st.characters(codec="ascii", exclude_categories=["Cc"]), min_size=1, max_size=40),
    timestamp=st.integers(0, 2**34),
    body=st.binary(max_size=200),
    drift=st.integers(-300, 300),
)
def test_independently_signed_deliveries_pass_and_any_changed_byte_fails(key, message_id, timestamp, body, drift):
    secret = base64.b64encode(key).decode()
    headers = _headers(message_id, timestamp, _independent_signature(key, message_id, timestamp, body))
    assert webhook_verify(body, headers, secrets=[secret], now=timestamp + drift).ok
    assert webhook_sign(secret, message_id, timestamp, body) == headers["webhook-signature"]
    changed = body + b"x" if not body else bytes([body[0] ^ 1]) + body[1:]
    refused = webhook_verify(changed, headers, secrets=[secret], now=timestamp)
    assert refused.refusal is Refusal.SIGNATURE


def test_response_events_name_their_dataset_and_other_events_none():
    event = {"type": "response.updated", "version": 1, "data": {"record": {"dataset": {"id": "4f0c"}}}}
    assert webhook_event(json.dumps(event).encode()).dataset_id == "4f0c"
    ping = webhook_event(b'{"type": "ping", "data": {"agent": "argilla-server"}}')
    assert ping.type == "ping" and ping.dataset_id is None


@pytest.mark.parametrize(
    "body", [b"not json", b"\xff\xfe", b"[1, 2]", b'{"data": {}}', b'{"type": "response.created", "data": {}}']
)
def test_bodies_that_are_no_event_are_refused(body):
    with pytest.raises(ValueError):
        webhook_event(body)
