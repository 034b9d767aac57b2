"""Run llama-cpp-python's OpenAI-compatible server with the weight-repacking choice of this CPU.

``python -m transforms.llama_launch <llama_cpp.server arguments>`` is ``python -m llama_cpp.server``
except that, where :func:`transforms.cpu_features.weight_repacking` says so (a CPU with AMX, or
``SHIFTLAB_LLAMA_REPACK=off``), every model is loaded with ``use_extra_bufts = False``. The server
has no setting for that field, so the launcher wraps ``llama_model_default_params``, which
``llama_cpp.Llama`` calls once per model load. The decision is printed as the first line of the
server's log. No Django: this runs as the server process.
"""

from __future__ import annotations

import os
import runpy
import sys

from transforms.cpu_features import REPACK_ENV, RepackDecision, read_cpu_flags, weight_repacking

CPUINFO_ENV = "SHIFTLAB_CPUINFO"  # another cpuinfo file, for tests of the decision


def repack_decision() -> RepackDecision:
    flags = read_cpu_flags(os.environ.get(CPUINFO_ENV) or "/proc/cpuinfo")
    return weight_repacking(flags, os.environ.get(REPACK_ENV))


def disable_extra_buffer_types() -> None:
    """Make every later model load in this process use ``use_extra_bufts = False``."""
    import llama_cpp.llama_cpp as low_level

    original = low_level.llama_model_default_params

    def default_params_without_repacking():
        params = original()
        params.use_extra_bufts = False
        return params

    low_level.llama_model_default_params = default_params_without_repacking


def main(argv: list[str]) -> None:
    try:
        decision = repack_decision()
    except ValueError as exc:
        sys.exit(f"shiftlab: {exc}")
    print(f"shiftlab: {decision.describe()}", flush=True)
    if not decision.enabled:
        disable_extra_buffer_types()
    sys.argv = ["llama_cpp.server", *argv]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
