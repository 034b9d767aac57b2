"""The Hugging Face card names what each approved transformation's gate rests on (issue 40): the
basis a prediction-powered or one-rating-per-item gate records; a classic gate's entry adds none."""

from evaluation.hf_export import approval_summary, hf_card


def _config(gate: dict) -> dict:
    return {
        "transformations": [
            {
                "transformation": "paraphrase",
                "axis": "lexical",
                "study": {"name": "para", "version": 2},
                "approval": {"decision": "approve", "by": "rita", "at": "2026-12-07T02:00:00"},
                "gate": gate,
                "runs": [],
            }
        ]
    }


def test_the_card_says_what_the_gate_rests_on():
    basis = "LLM judge default on 1,379 outputs, corrected by 38 human-rated items from 9 raters"
    approvals = approval_summary(_config({"passed": True, "evidence_hash": "a" * 64, "basis": basis, "evidence": {}}))
    assert approvals[0]["basis"] == basis
    card = hf_card(
        run_id=7, run_name="", config_hash="c" * 64, rows=[], approvals=approvals, report_files=[], license_id=None
    )
    assert "What each gate's decision rests on:" in card and f"- paraphrase: {basis}" in card
    # Older configs carry it only in the evidence; a classic gate has none and the card adds no list.
    from_evidence = approval_summary(_config({"passed": True, "evidence": {"gate_basis": basis}}))
    assert from_evidence[0]["basis"] == basis
    classic = approval_summary(_config({"passed": True, "evidence": {"n_ratings": 300}}))
    card = hf_card(
        run_id=7, run_name="", config_hash="c" * 64, rows=[], approvals=classic, report_files=[], license_id=None
    )
    assert classic[0]["basis"] == "" and "rests on" not in card
