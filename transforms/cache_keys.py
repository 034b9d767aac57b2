"""Keys of the generation and judgement caches (pure module).

A key hashes everything that changes a model's answer, so equal keys mean "same request, reuse the
stored answer". Stored rows are looked up by these keys: changing a field name, a value's type or
the hashing would silently invalidate every existing cache (``test_cache_keys`` pins known keys).
"""

from __future__ import annotations

from core.hashing import sha256_json, sha256_text

__all__ = ["generation_key", "judgement_key"]


def generation_key(
    *,
    input_text: str,
    transformation: str,
    step: int,
    prompt_hash: str,
    model: str,
    params_hash: str,
    seed: int,
    attempt: int,
    language: str,
    input_language: str,
    model_identity: str = "",
) -> str:
    """Cache key of one LLM step of a transformation.

    Parameters
    ----------
    input_text : str
        The step's input (the source text, or the previous step's cleaned output).
    transformation : str
        Name of the transformation.
    step : int
        Index of the step within the transformation.
    prompt_hash : str
        Content hash of the prompt template.
    model : str
        Model id of the generator.
    params_hash : str
        Hash of the sampling parameters (``GenerationParams.sampling_hash``).
    seed : int
        The run seed.
    attempt : int
        Attempt number of the text (0 for the first).
    language : str
        Language the step writes in.
    input_language : str
        Language the step's input is written in.
    model_identity : str
        What identifies the model's weights beyond its name (a GGUF file's SHA-256, what the
        server reports), so that new weights served under the same name miss the cache. Empty when
        unknown: the key is then exactly the key made before identities existed, so runs without
        one keep finding their cached generations.

    Returns
    -------
    str
        SHA-256 hex digest.
    """
    fields = {
        "input": sha256_text(input_text),
        "transformation": transformation,
        "step": step,
        "prompt": prompt_hash,
        "model": model,
        "params": params_hash,
        "seed": seed,
        "attempt": attempt,
        "language": language,
        "from": input_language,
    }
    if model_identity:
        fields["model_identity"] = model_identity
    return sha256_json(fields)


def judgement_key(
    *,
    kind: str,
    model: str,
    prompt_hash: str,
    params_hash: str,
    text_a: str,
    text_b: str,
    seed: int,
    attempt: int,
) -> str:
    """Cache key of one judgement of the pair (``text_a``, ``text_b``).

    Parameters
    ----------
    kind : str
        The judge kind's value ("similarity", "quality", "fluency").
    model : str
        Model id of the judge.
    prompt_hash : str
        Content hash of the judge prompt.
    params_hash : str
        Hash of the sampling parameters (``JudgeParams.sampling_hash``).
    text_a, text_b : str
        The judged texts, in order.
    seed : int
        The report seed.
    attempt : int
        Attempt number (0 for the first; a new attempt follows an answer without a score).

    Returns
    -------
    str
        SHA-256 hex digest.
    """
    return sha256_json(
        {
            "kind": kind,
            "model": model,
            "prompt": prompt_hash,
            "params": params_hash,
            "a": sha256_text(text_a),
            "b": sha256_text(text_b),
            "seed": seed,
            "attempt": attempt,
        }
    )
