"""Which llama.cpp weight-repacking path each CPU gets (pure: cpuinfo text in, decision out)."""

import pytest

from transforms.cpu_features import REPACK_ENV, cpu_flags, weight_repacking

# Trimmed from real /proc/cpuinfo files: an AMD EPYC (AVX-512, no AMX), an Intel Xeon Sapphire
# Rapids (AMX), and an ARM server (Features line).
EPYC = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme sse sse2 avx avx2 fma avx512f avx512_vnni avx512_bf16
"""
SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C
flags\t\t: fpu sse2 avx avx2 avx512f avx512_vnni amx_bf16 avx512_fp16 amx_tile amx_int8
processor\t: 1
flags\t\t: fpu sse2 avx avx2 avx512f avx512_vnni amx_bf16 avx512_fp16 amx_tile amx_int8
"""
ARM = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid sve
"""


def test_flags_are_read_from_x86_and_arm_cpuinfo():
    assert {"avx2", "avx512_vnni"} <= cpu_flags(EPYC)
    assert {"amx_int8", "amx_tile"} <= cpu_flags(SAPPHIRE_RAPIDS)
    assert {"asimd", "sve"} <= cpu_flags(ARM)
    assert cpu_flags("") == frozenset()


def test_amx_turns_repacking_off_and_says_why():
    decision = weight_repacking(cpu_flags(SAPPHIRE_RAPIDS))
    assert not decision.enabled
    assert "AMX" in decision.reason and "20824" in decision.reason
    assert decision.describe().startswith("weight repacking off: AMX")


@pytest.mark.parametrize("cpuinfo", [EPYC, ARM, ""])
def test_other_cpus_keep_repacking(cpuinfo):
    assert weight_repacking(cpu_flags(cpuinfo)).enabled


def test_either_amx_flag_alone_is_enough():
    assert not weight_repacking({"amx_tile"}).enabled
    assert not weight_repacking({"amx_int8"}).enabled


@pytest.mark.parametrize(("override", "expected"), [("on", True), ("ON", True), ("off", False), (" off ", False)])
def test_override_wins_over_the_cpu(override, expected):
    assert weight_repacking(cpu_flags(SAPPHIRE_RAPIDS), override).enabled is expected
    assert weight_repacking(cpu_flags(EPYC), override).enabled is expected


@pytest.mark.parametrize("override", [None, "", "auto"])
def test_auto_is_the_default(override):
    assert not weight_repacking(cpu_flags(SAPPHIRE_RAPIDS), override).enabled
    assert weight_repacking(cpu_flags(EPYC), override).enabled


def test_unknown_override_names_the_choices():
    with pytest.raises(ValueError, match=rf"{REPACK_ENV}='yes' is not one of auto, on, off"):
        weight_repacking(set(), "yes")


# --- Building and starting llama.cpp's llama-server -------------------------------------------


def test_amx_cpus_compile_without_the_amx_kernels():
    from transforms.cpu_features import NO_AMX_COMPILE_FLAGS, compile_flags

    assert compile_flags(cpu_flags(SAPPHIRE_RAPIDS)) == NO_AMX_COMPILE_FLAGS
    assert set(NO_AMX_COMPILE_FLAGS) == {"-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"}
    assert compile_flags({"amx_tile"}) == NO_AMX_COMPILE_FLAGS
    assert compile_flags(cpu_flags(EPYC)) == () and compile_flags(cpu_flags(ARM)) == ()


def test_llama_server_gets_no_repack_exactly_where_repacking_is_off():
    from transforms.cpu_features import llama_server_repack_args

    assert llama_server_repack_args(weight_repacking(cpu_flags(SAPPHIRE_RAPIDS))) == ["--no-repack"]
    assert llama_server_repack_args(weight_repacking(cpu_flags(EPYC))) == []
    assert llama_server_repack_args(weight_repacking(cpu_flags(EPYC), "off")) == ["--no-repack"]


def test_the_build_key_names_the_sources_and_the_cpu_features():
    from transforms.cpu_features import build_key

    key = build_key("0.3.36", "x86_64", cpu_flags(EPYC))
    assert key.startswith("llama-cpp-python-0.3.36-x86_64-")
    # The order of the flags in cpuinfo does not matter; another version, machine or flag set does.
    assert build_key("0.3.36", "x86_64", reversed(sorted(cpu_flags(EPYC)))) == key
    others = {
        build_key("0.3.37", "x86_64", cpu_flags(EPYC)),
        build_key("0.3.36", "aarch64", cpu_flags(EPYC)),
        build_key("0.3.36", "x86_64", cpu_flags(SAPPHIRE_RAPIDS)),
        build_key("0.3.36", "x86_64", cpu_flags(EPYC) - {"avx512f"}),
    }
    assert key not in others and len(others) == 4
    assert "/" not in key and " " not in key


def test_default_slots_are_32_with_16_gib_available_else_16_and_never_above_a_chunk(settings, tmp_path):
    from transforms.cpu_features import default_slots, memory_available

    gib = 1024**3
    assert default_slots(None) == 16 and default_slots(15 * gib) == 16
    assert default_slots(16 * gib) == 32 == 2 * settings.TRANSFORM_CHUNK_SIZE
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20971520 kB\n")
    assert memory_available(str(meminfo), cgroups=()) == 20 * gib
    assert memory_available(str(tmp_path / "missing"), cgroups=()) is None
    assert default_slots(5 * gib) == 4  # model and cache must fit a small machine


def test_memory_available_is_a_containers_limit_when_lower(tmp_path):
    """/proc/meminfo shows the host's memory inside a container; the cgroup's limit less its usage
    is what the server may take there."""
    from transforms.cpu_features import memory_available

    gib = 1024**3
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemAvailable:   20971520 kB\n")  # 20 GiB on the host
    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    limit.write_text(f"{4 * gib}\n")
    usage.write_text(f"{gib}\n")
    assert memory_available(str(meminfo), cgroups=((str(limit), str(usage)),)) == 3 * gib
    limit.write_text("max\n")  # cgroup v2 without a limit
    assert memory_available(str(meminfo), cgroups=((str(limit), str(usage)),)) == 20 * gib
    limit.write_text(f"{64 * gib}\n")  # a limit above what the host has free
    assert memory_available(str(meminfo), cgroups=((str(limit), str(usage)),)) == 20 * gib
    missing = str(tmp_path / "none")
    assert memory_available(str(meminfo), cgroups=((missing, missing), (str(limit), str(usage)))) == 20 * gib
