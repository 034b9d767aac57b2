"""What a sync of Argilla responses changes."""

from hypothesis import given, settings
from hypothesis import strategies as st

from annotation.sync_diff import SyncCounts, sync_diff


def test_sync_diff_creates_updates_keeps_and_withdraws():
    stored = {"same": 1, "edited": 2, "gone": 3}
    diff = sync_diff({"new": (5, "t1"), "same": (1, "t2"), "edited": (4, "t3")}, stored, is_current=int.__eq__)
    assert diff.create == (("new", 5, "t1"),) and diff.update == ((2, 4, "t3"),) and diff.unchanged == 1
    assert diff.withdraw == (("gone", 3),)
    assert diff.counts() == {"created": 1, "updated": 1, "withdrawn": 1, "unchanged": 1}
    already_withdrawn = sync_diff({}, stored, is_current=int.__eq__, is_live=lambda row: row != 3)
    assert [key for key, _ in already_withdrawn.withdraw] == ["same", "edited"]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.integers(0, 9), st.integers(0, 3)),
    st.dictionaries(st.integers(0, 9), st.integers(0, 3)),
)
def test_sync_diff_partitions_the_answers_and_rows(submitted, stored):
    diff = sync_diff({k: (v, None) for k, v in submitted.items()}, stored, is_current=int.__eq__)
    assert {key for key, _, _ in diff.create} == submitted.keys() - stored.keys()
    assert {key for key, _ in diff.withdraw} == stored.keys() - submitted.keys()
    both = submitted.keys() & stored.keys()
    assert len(diff.update) == sum(submitted[k] != stored[k] for k in both)
    assert all(row != value for row, value, _ in diff.update)
    assert len(diff.create) + len(diff.update) + diff.unchanged == len(submitted)


def test_sync_counts_audit_only_what_happened():
    counts = SyncCounts(created=2, unchanged=0, withdrawn=1)
    assert counts.changed == 3 and counts.audit_payload() == {"created": 2, "withdrawn": 1}
