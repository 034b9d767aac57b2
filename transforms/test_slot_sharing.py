"""The prefix a batch shares, as ``slot_sharing.shared_prefix`` finds it (pure)."""

from __future__ import annotations

from transforms.backends.base import ChatRequest
from transforms.backends.slot_sharing import MIN_PREFIX_CHARS, prefix_file_name, shared_prefix

SYSTEM = {"role": "system", "content": "You are a careful editor. Reply with the rewritten text only, nothing else."}


def batch(*users: str, system: dict = SYSTEM) -> list[ChatRequest]:
    return [
        ChatRequest(messages=[system, {"role": "user", "content": u}], seed=1, temperature=0.0, top_p=1.0, max_tokens=8)
        for u in users
    ]


def test_the_prefix_is_the_shared_messages_and_the_shared_start_of_the_last_cut_before_the_text():
    requests = batch("Reword this.\n\nText: A dog runs.", "Reword this.\n\nText: A cat sleeps.")
    assert shared_prefix(requests) == [SYSTEM, {"role": "user", "content": "Reword this.\n\nText: A"}]
    # the trailing space of "Text: " is dropped where the texts begin (a tokenizer joins it to the word)
    requests = batch("Reword this.\n\nText: Dogs run.", "Reword this.\n\nText: Cats sleep.")
    assert shared_prefix(requests)[-1]["content"] == "Reword this.\n\nText:"


def test_identical_requests_share_all_of_their_messages():
    requests = batch("Reword: same text.", "Reword: same text.")
    assert shared_prefix(requests) == requests[0].messages


def test_no_prefix_for_a_single_request_differing_structure_or_too_little_text():
    assert shared_prefix(batch("Reword this.\n\nText: A dog runs.")) is None
    other = {"role": "system", "content": SYSTEM["content"] + " Be brief."}
    mixed = batch("Text: one") + batch("Text: two", system=other)
    assert shared_prefix(mixed) is None
    short = {"role": "system", "content": "x"}
    assert len(short["content"]) + len("Text:") < MIN_PREFIX_CHARS
    assert shared_prefix(batch("Text: one", "Text: two", system=short)) is None
    extra = ChatRequest(messages=[SYSTEM], seed=1, temperature=0.0, top_p=1.0, max_tokens=8)
    assert shared_prefix([*batch("Text: one"), extra]) is None


def test_the_save_file_is_named_by_model_and_prefix():
    messages = shared_prefix(batch("Reword this.\n\nText: A dog.", "Reword this.\n\nText: A cat."))
    name = prefix_file_name("m", messages)
    assert name == prefix_file_name("m", [dict(m) for m in messages])
    assert name != prefix_file_name("other", messages)
    assert name.startswith("shiftlab-prefix-") and name.endswith(".bin") and "/" not in name


def test_slot_files_are_only_for_servers_on_a_loopback_address():
    """LlamaServer gives llama-server a slot directory only where no other machine reaches the port
    (anyone who does could save slot files to that disk)."""
    from core.local_server import is_loopback

    assert all(map(is_loopback, ["127.0.0.1", "127.0.0.2", "::1", "localhost"]))
    assert not any(map(is_loopback, ["0.0.0.0", "::", "10.1.2.3", "192.168.0.7", "example.org", ""]))
