"""How many torch threads the encoder's model process runs (pure: no Django, no I/O).

Beside the embedded LLM server on a small machine, torch's default of one thread per core sets the
encoder's OpenMP threads against llama.cpp's: torch's threads meet at a barrier in every operation
and spin while they wait, so one of them descheduled by the LLM stalls the others. On 2 cores MiniLM
fell from 575 sentences/s alone to 35-50 beside the LLM on one thread (docs/performance.md). The
encoder therefore takes the cores the LLM leaves, at least one, and nothing spins against the LLM.
"""

from __future__ import annotations


def encoder_threads(*, cpus: int, setting: int = 0, llm_threads: int | None = None) -> int | None:
    """torch threads for the encoder's model process; None leaves torch's default (one per core).

    ``setting`` (``SHIFTLAB_ENCODER_THREADS``) where positive is taken as it is. 0 is automatic: with
    an LLM server of ``llm_threads`` CPU threads on this machine, the ``cpus`` it leaves, at least
    one; with none (``llm_threads`` None), torch's default.
    """
    if setting < 0:
        raise ValueError(f"encoder threads must be 0 (automatic) or positive, not {setting}")
    if setting > 0:
        return setting
    if llm_threads is None:
        return None
    return max(1, cpus - llm_threads)
