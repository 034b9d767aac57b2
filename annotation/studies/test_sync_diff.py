"""What a sync of Argilla responses changes."""

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.studies.sync_diff import SyncCounts, latest_responses, sync_diff, without_nul


def test_sync_diff_creates_updates_keeps_and_withdraws():
    stored = {"same": 1, "edited": 2, "gone": 3}
    diff = sync_diff({"new": (5, "t1"), "same": (1, "t2"), "edited": (4, "t3")}, stored, is_current=int.__eq__)
    assert diff.create == (("new", 5, "t1"),) and diff.update == ((2, 4, "t3"),) and diff.unchanged == 1
    assert diff.withdraw == (("gone", 3, None),)
    assert diff.counts() == {
        "created": 1,
        "updated": 1,
        "withdrawn": 1,
        "unchanged": 1,
        "stale": 0,
        "records_created": 1,
        "records_updated": 1,
        "records_withdrawn": 1,
    }
    already_withdrawn = sync_diff({}, stored, is_current=int.__eq__, is_live=lambda row: row != 3)
    assert [key for key, _, _ in already_withdrawn.withdraw] == ["same", "edited"]


def test_sync_diff_counts_the_records_its_answers_belong_to():
    # Two records (item 1 and 2 of annotator 7) with two questions each: 4 answers, 2 records.
    submitted = {(item, 7, q): (4, "t") for item in (1, 2) for q in ("quality", "fluency")}
    stored = {(1, 7, "quality"): ((1, 7, "quality"), 3)}  # a row is (key, value) here
    diff = sync_diff(submitted, stored, is_current=lambda row, value: row[1] == value)
    counts = diff.counts(key_of=lambda row: row[0], record_of=lambda key: key[:2])
    assert (counts["created"], counts["records_created"]) == (3, 2)
    assert (counts["updated"], counts["records_updated"]) == (1, 1)


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.integers(0, 9), st.integers(0, 3)),
    st.dictionaries(st.integers(0, 9), st.integers(0, 3)),
)
def test_sync_diff_partitions_the_answers_and_rows(submitted, stored):
    diff = sync_diff({k: (v, None) for k, v in submitted.items()}, stored, is_current=int.__eq__)
    assert {key for key, _, _ in diff.create} == submitted.keys() - stored.keys()
    assert {key for key, _, _ in diff.withdraw} == stored.keys() - submitted.keys()
    both = submitted.keys() & stored.keys()
    assert len(diff.update) == sum(submitted[k] != stored[k] for k in both)
    assert all(row != value for row, value, _ in diff.update)
    assert len(diff.create) + len(diff.update) + diff.unchanged == len(submitted)
    assert diff.stale == 0 and diff.touch == ()


@dataclass
class Row:
    value: int
    live: bool
    seen: int  # the time of the newest state stored


def test_older_answers_and_withdrawals_are_stale_and_held_rows_stay():
    stored = {"edited": Row(5, True, 20), "discarded": Row(2, False, 20), "kept": Row(3, True, 20)}
    diff = sync_diff(
        {"edited": (4, 10), "discarded": (2, 10)},  # an overlapping sync's older fetch
        stored,
        is_current=lambda row, value: row.live and row.value == value,
        is_live=lambda row: row.live,
        seen_at=lambda row: row.seen,
        withdrawn_at=lambda key: 15,
    )
    assert (diff.update, diff.create, diff.withdraw, diff.stale) == ((), (), (), 3)
    held = sync_diff({}, stored, is_current=lambda row, value: False, held={"edited", "kept"})
    assert held.withdraw == (("discarded", stored["discarded"], None),)  # is_live defaults to True


def test_an_unchanged_answer_seen_later_moves_the_rows_time_on():
    row = Row(3, True, 10)
    diff = sync_diff({"k": (3, 30)}, {"k": row}, is_current=lambda r, v: r.value == v, seen_at=lambda r: r.seen)
    assert (diff.unchanged, diff.touch) == (1, ((row, 30),))


# One answer's history in Argilla, one event per even time: a value submitted, back to draft
# (None), or deleted (the last event). Fetches start at odd times and see what happened before.
EVENTS = st.lists(st.one_of(st.integers(1, 5), st.just(None), st.just("deleted")), min_size=1, max_size=6)
FETCHES = st.lists(st.integers(0, 6), min_size=1, max_size=6, unique=True)


def _history(events):
    history = [(2 * k + 2, state) for k, state in enumerate(events)]
    return history[: next((k + 1 for k, (_, s) in enumerate(history) if s == "deleted"), len(history))]


def _apply(row, history, at):
    """One sync of a fetch started at ``at`` into the stored row (or None), as the services do."""
    before = [(t, state) for t, state in history if t < at]
    submitted, withdrawn = {}, at  # a missing response: gone by the time the fetch started
    if before and isinstance(before[-1][1], int):
        submitted["k"] = (before[-1][1], before[-1][0])
    elif before and before[-1][1] is None:
        withdrawn = before[-1][0]
    diff = sync_diff(
        submitted,
        {"k": row} if row is not None else {},
        is_current=lambda r, value: r.live and r.value == value,
        is_live=lambda r: r.live,
        seen_at=lambda r: r.seen,
        withdrawn_at=lambda key: withdrawn,
    )
    for _, value, t in diff.create:
        row = Row(value, True, t)
    for _, value, t in diff.update:
        row = Row(value, True, t)
    for current, t in diff.touch:
        row = Row(current.value, current.live, t)
    for _, current, t in diff.withdraw:
        row = Row(current.value, False, t)
    return row


@settings(max_examples=300, deadline=None)
@given(EVENTS, FETCHES, st.randoms(use_true_random=False))
def test_no_older_state_replaces_a_newer_one(events, fetch_steps, random):
    """Fetches written in any order (overlapping syncs): the stored row only moves forward in
    Argilla's time, and always holds the state Argilla had at that time."""
    history = _history(events)
    order = [2 * step + 1 for step in fetch_steps]
    random.shuffle(order)
    row, seen = None, -1
    for at in order:
        row = _apply(row, history, at)
        if row is None:
            continue
        assert row.seen >= seen
        seen = row.seen
        last = [state for t, state in history if t <= row.seen][-1]
        assert last == (row.value if row.live else last) and (row.live or last is None or last == "deleted")


@settings(max_examples=300, deadline=None)
@given(EVENTS, FETCHES, st.randoms(use_true_random=False))
def test_syncs_in_any_order_end_where_the_newest_fetch_says(events, fetch_steps, random):
    """With the services' second rule (a fetch that started before the stored one writes nothing,
    ``answer_store.fetch_outdated``), the result is what the newest fetch alone gives: nothing
    lost, nothing invented, no older value winning."""
    history = _history(events)
    fetches = [2 * step + 1 for step in fetch_steps]
    order = list(fetches)
    random.shuffle(order)
    row, synced_at = None, None
    for at in order:
        if synced_at is None or at >= synced_at:
            row, synced_at = _apply(row, history, at), at
    newest = _apply(None, history, max(fetches))
    if newest is None:
        assert row is None or not row.live
    else:
        assert row is not None and row.live == newest.live and (not row.live or row.value == newest.value)


def test_latest_responses_keep_the_newest_copy_of_a_response():
    @dataclass(frozen=True)
    class R:
        record_external_id: str
        user_id: int
        question: str | None
        value: object
        status: str
        updated_at: int

    rows = [
        R("a", 1, "quality", 4, "submitted", 5),
        R("a", 1, "fluency", 3, "submitted", 5),
        R("a", 1, "quality", 2, "submitted", 9),  # the same record in a newer dataset of the study
        R("a", 1, "fluency", 2, "submitted", 9),
        R("a", 1, "quality", 1, "submitted", 1),  # an older copy again: ignored
        R("b", 1, None, None, "discarded", 3),
    ]
    found = latest_responses(rows)
    assert (found[("a", 1)].at, found[("a", 1)].values) == (9, {"quality": 2, "fluency": 2})
    assert (found[("b", 1)].status, found[("b", 1)].values) == ("discarded", {})


def test_without_nul():
    assert without_nul("a\x00b\x00") == "ab" and without_nul("plain") == "plain"


def test_sync_counts_audit_only_what_happened():
    counts = SyncCounts(created=2, unchanged=0, withdrawn=1, stale=1)
    assert counts.changed == 3 and counts.audit_payload() == {"created": 2, "withdrawn": 1, "stale": 1}
