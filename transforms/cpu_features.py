"""Which llama.cpp code paths are safe on this CPU (pure module: reads nothing by itself).

llama.cpp can "repack" quantised weights into extra buffer types at load time: the generic CPU
repack (AVX2/AVX-512 interleaved Q4_0/Q4_K/IQ4_NL layouts) and, on Intel CPUs with Advanced Matrix
Extensions (Xeon Sapphire Rapids and later: ``amx_int8``/``amx_tile`` in ``/proc/cpuinfo``), the
AMX buffer type. The AMX path segfaults in its first matrix multiply on Q4_K weights (llama.cpp
issue 20824, closed without a fix; seen on our own machines: "amx repack tensor ..." in the log,
then exit -11 on the first generation while ``/v1/models`` still answers). Repacking is one switch
in llama.cpp (``llama_model_params.use_extra_bufts``; ``--no-repack`` for ``llama-server``), so on
a CPU with AMX every extra buffer type is turned off; elsewhere repacking stays on (it speeds up
prompt processing; ``benchmarks/llama_repack.py`` measures by how much).

``SHIFTLAB_LLAMA_REPACK`` overrides the choice: ``auto`` (the default), ``on`` or ``off``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: CPU flags that select a llama.cpp code path known to crash, and why.
CRASHING_FLAGS = {
    "amx_int8": "AMX (amx_int8): llama.cpp's AMX weight repacking segfaults on the first generation (issue 20824)",
    "amx_tile": "AMX (amx_tile): llama.cpp's AMX weight repacking segfaults on the first generation (issue 20824)",
}
REPACK_ENV = "SHIFTLAB_LLAMA_REPACK"
REPACK_CHOICES = ("auto", "on", "off")


@dataclass(frozen=True)
class RepackDecision:
    """Whether llama.cpp may repack weights into extra buffer types, and a one-line reason."""

    enabled: bool
    reason: str

    def describe(self) -> str:
        return f"weight repacking {'on' if self.enabled else 'off'}: {self.reason}"


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The feature flags in the text of ``/proc/cpuinfo`` (x86 ``flags``, ARM ``Features``)."""
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in {"flags", "features"}:
            flags.update(value.split())
    return frozenset(flags)


def weight_repacking(flags: Iterable[str], override: str | None = None) -> RepackDecision:
    """Decide llama.cpp's ``use_extra_bufts`` for a CPU with ``flags``.

    ``override`` is the value of ``SHIFTLAB_LLAMA_REPACK`` (None or "" means auto). Raises
    ValueError for an unknown override, naming the accepted values.
    """
    choice = (override or "auto").strip().lower()
    if choice not in REPACK_CHOICES:
        raise ValueError(f"{REPACK_ENV}={override!r} is not one of {', '.join(REPACK_CHOICES)}")
    if choice == "on":
        return RepackDecision(True, f"forced by {REPACK_ENV}=on")
    if choice == "off":
        return RepackDecision(False, f"forced by {REPACK_ENV}=off")
    crashing = sorted(set(flags) & CRASHING_FLAGS.keys())
    if crashing:
        return RepackDecision(False, CRASHING_FLAGS[crashing[0]])
    return RepackDecision(True, "no CPU feature with a known llama.cpp crash")


def read_cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The flags of this machine's CPU; empty where ``path`` does not exist (not Linux)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return cpu_flags(handle.read())
    except OSError:
        return frozenset()
