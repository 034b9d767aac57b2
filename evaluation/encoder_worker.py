"""Child process that holds one sentence-transformers model and encodes texts on request.

Run by :mod:`evaluation.encoders` as ``python -P encoder_worker.py OPTIONS_JSON`` (why a separate
process: see that module; ``-P`` keeps this folder, whose ``selectors.py`` would shadow the
standard library's, off ``sys.path``). It imports nothing from Shiftlab, so it starts without Django.

Protocol on stdin/stdout, one request at a time:

- after loading, the worker writes ``{"ok": true, "dim": D, ...}`` and a newline;
- each request is one JSON line ``{"texts": [...], "batch_size": B, "prompt_name": P}``;
- each answer is one JSON line ``{"ok": true, "rows": N, "dim": D}`` followed by ``N * D``
  little-endian float32 values, or ``{"ok": false, "error": "..."}``.

Everything else (logs, warnings, progress bars) goes to stderr.
"""

from __future__ import annotations

import json
import sys

import numpy as np


def _load(options: dict):
    # Imported here so that a missing or broken torch install is reported to the parent
    # through the protocol (main catches it) instead of killing the worker silently.
    import torch
    from sentence_transformers import SentenceTransformer

    if options.get("threads"):  # before any operation: torch's thread pool is sized once
        torch.set_num_threads(int(options["threads"]))
    model = SentenceTransformer(
        options["path"],
        device=options.get("device") or None,
        trust_remote_code=bool(options.get("trust_remote_code", False)),
        local_files_only=True,
    )
    if options.get("max_seq_length"):
        model.max_seq_length = int(options["max_seq_length"])
    # Always cast: transformers 5 loads weights in the dtype they are stored in, so a model saved in
    # float16 would otherwise run in float16 when float32 is asked for (and cached as float32).
    model.to(getattr(torch, options.get("dtype") or "float32"))
    model.eval()
    return model


def main() -> None:
    protocol = sys.stdout.buffer
    # Libraries that print must not corrupt the binary protocol stream.
    sys.stdout = sys.stderr
    options = json.loads(sys.argv[1])
    try:
        model = _load(options)
    except Exception as exc:  # any loading failure is reported to the parent, which raises it
        _send(protocol, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    _send(
        protocol,
        {
            "ok": True,
            "dim": model.get_sentence_embedding_dimension(),
            "device": str(model.device),
            "dtype": dtype,
            "threads": _torch_threads(),
        },
    )
    for line in sys.stdin.buffer:
        request = json.loads(line)
        try:
            vectors = model.encode(
                request["texts"],
                batch_size=int(request["batch_size"]),
                prompt_name=request.get("prompt_name"),
                convert_to_numpy=True,
                normalize_embeddings=False,
                show_progress_bar=False,
            )
        except Exception as exc:  # reported per request; the worker stays usable
            _send(protocol, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
            continue
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        rows, dim = vectors.shape if vectors.ndim == 2 else (0, 0)
        _send(protocol, {"ok": True, "rows": rows, "dim": dim}, vectors.tobytes())


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _send(stream, header: dict, payload: bytes = b"") -> None:
    stream.write(json.dumps(header).encode("utf-8") + b"\n")
    stream.write(payload)
    stream.flush()


if __name__ == "__main__":
    main()
