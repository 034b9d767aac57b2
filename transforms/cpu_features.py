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

The same facts decide how llama.cpp's own ``llama-server`` is built and started: without the AMX
kernels on AMX CPUs (``compile_flags``), with ``--no-repack`` where repacking is off, in a build
folder named after the llama.cpp sources and the CPU features it was compiled for (``build_key``),
with the parallel slots measured best here (``default_slots``).
"""

from __future__ import annotations

import hashlib
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


#: Compiler flags that leave llama.cpp's AMX kernels out of a -march=native build.
NO_AMX_COMPILE_FLAGS = ("-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16")


def compile_flags(flags: Iterable[str]) -> tuple[str, ...]:
    """Extra C/C++ flags for building llama.cpp natively on a CPU with ``flags``: none, or on a CPU
    with AMX the flags that leave its AMX code out (``-march=native`` would compile it in)."""
    return NO_AMX_COMPILE_FLAGS if set(flags) & CRASHING_FLAGS.keys() else ()


def llama_server_repack_args(decision: RepackDecision) -> list[str]:
    """``llama-server``'s arguments for a repacking decision: ``--no-repack`` where it is off."""
    return [] if decision.enabled else ["--no-repack"]


def build_key(version: str, machine: str, flags: Iterable[str]) -> str:
    """The name of a native ``llama-server`` build: the llama-cpp-python release whose vendored
    llama.cpp it compiles, the machine type and a digest of the CPU's feature flags (a binary built
    with ``-march=native`` may use any of them, so another CPU gets its own build)."""
    digest = hashlib.sha256(" ".join(sorted(set(flags))).encode()).hexdigest()[:12]
    return f"llama-cpp-python-{version}-{machine or 'unknown'}-{digest}"


#: Memory from which the embedded server gets 32 slots rather than 16: 32 x 4096 tokens of cache
#: are 3.8 GB for the demo model (16: 1.9 GB), which should stay a small part of what is free.
MANY_SLOTS_MEMORY = 16 * 1024**3
#: Below this the server gets 4 slots (0.5 GB of cache), so that model and cache fit a small machine.
SOME_SLOTS_MEMORY = 6 * 1024**3

# cgroup v2, then v1: a container's memory limit and what it uses, which /proc/meminfo does not show.
_CGROUP_MEMORY = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)


def memory_available(path: str = "/proc/meminfo", cgroups=_CGROUP_MEMORY) -> int | None:
    """Bytes of memory available to new processes: ``MemAvailable``, or less where this process's
    cgroup (a container) has a lower limit than it leaves free; None where unknown (not Linux)."""
    try:
        with open(path, encoding="utf-8") as handle:
            available = next((int(line.split()[1]) * 1024 for line in handle if line.startswith("MemAvailable:")), None)
    except (OSError, ValueError, IndexError):
        available = None
    for limit_path, usage_path in cgroups:
        try:
            with open(limit_path, encoding="utf-8") as limit, open(usage_path, encoding="utf-8") as usage:
                limit_text, used = limit.read().strip(), int(usage.read().strip())
        except (OSError, ValueError):
            continue
        if limit_text.isdigit():  # "max" (v2) has no limit; v1 writes a huge number instead
            left = max(int(limit_text) - used, 0)
            available = left if available is None else min(available, left)
        break
    return available


def default_slots(available: int | None) -> int:
    """Parallel slots of the embedded ``llama-server``: 32 with at least ``MANY_SLOTS_MEMORY`` bytes
    ``available``, 16 with at least ``SOME_SLOTS_MEMORY`` or when unknown, else 4.

    On the quiet 2-core EPYC of ``docs/performance.md`` (Qwen2.5-Coder-1.5B Q4_K_M) a decode step of few
    sequences costs about as much per sequence as one alone (the Q4_K arithmetic is the bound, not the
    weight reads), but from about 16 tokens a step llama.cpp's batched kernels cost a third as much per
    token; and since the backend evaluates a batch's shared prompt prefix once for all slots
    (``transforms.backends.slot_sharing``), more slots no longer cost more prompt. A paraphrase run of
    48 texts went 1.51x (16 slots) and 1.69x (32) as fast as llama-cpp-python's server on 1 thread,
    2.09x and 2.43x on 2 (medians of 3, ``docs/performance.md``). A chunk of examples or pairs sends at
    most 2 x ``TRANSFORM_CHUNK_SIZE`` (32) texts at once, so slots beyond 32 stay idle there. Each slot holds
    ``n_ctx`` tokens of cache. Machines with more cores were not measured.
    """
    if available is None:
        return 16
    return 32 if available >= MANY_SLOTS_MEMORY else 16 if available >= SOME_SLOTS_MEMORY else 4
