"""The declared design of a study: round trip, hash, errors."""

import pytest

from annotation.design import DesignError, StudyDesign


def test_design_round_trip_hash_and_errors():
    design = StudyDesign(items_per_transformation=6, seed=3)
    assert StudyDesign.from_dict(design.to_dict()) == design
    assert design.revised(seed=4).content_hash != design.content_hash
    assert [q.name for q in design.questions] == ["quality", "fluency"]
    assert [q.values for q in StudyDesign(kind="similarity").questions] == [(0, 1, 2, 3, 4, 5)]
    with pytest.raises(DesignError, match="raters_per_item"):
        StudyDesign(raters_per_item=0)
    with pytest.raises(DesignError, match="kind must be one of"):
        StudyDesign(kind="stars")
    with pytest.raises(DesignError, match="unknown design field"):
        StudyDesign.from_dict({"raters": 3})
