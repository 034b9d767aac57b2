"""Which server the embedded LLM runs: the built llama-server (where it is cached, whether it runs)
or llama-cpp-python's; the command line each gets. Stand-in binaries are small shell scripts."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from django.core.management.base import CommandError

from transforms import llama_build
from transforms.embedded import LlamaServer
from transforms.llama_build import BINARY_ENV, CACHE_ENV, CHOICE_ENV, cache_root, choose_binary, pinned_version
from transforms.management.commands.llm_server import server_choice, slots_wanted

AMX_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f amx_bf16 amx_tile amx_int8\n"
PLAIN_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n"


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_pinned_release_is_read_from_the_requirements():
    assert pinned_version("# comment\nllama-cpp-python[server]==0.3.36\n") == "0.3.36"
    assert pinned_version("llama-cpp-python==0.4.0 ; python_version >= '3.11'\n") == "0.4.0"
    assert pinned_version(llama_build.REQUIREMENTS.read_text())  # the checkout's own pin
    with pytest.raises(ValueError, match="no pinned llama-cpp-python"):
        pinned_version("llama-cpp-python>=0.3\n")


def test_the_cache_is_outside_the_checkout_and_can_be_moved(tmp_path):
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "shiftlab" / "llama-server"
    assert cache_root({CACHE_ENV: str(tmp_path / "elsewhere")}) == tmp_path / "elsewhere"
    binary = llama_build.cached_binary({CACHE_ENV: str(tmp_path)})
    assert binary.parent.parent.parent == tmp_path and binary.name == "llama-server"
    assert binary.parent.parent.name == llama_build.this_build_key()


def test_no_binary_means_llama_cpp_python_with_the_build_command_named(tmp_path):
    choice = choose_binary({CACHE_ENV: str(tmp_path)})
    assert choice.binary is None
    assert "no llama-server at" in choice.reason and "scripts/build_llama_server.sh" in choice.reason


def test_a_binary_that_runs_is_chosen_and_one_that_does_not_is_not(tmp_path):
    good = script(tmp_path / "good", 'echo "version: 7000 (abcdef0)"; echo "built with cc" >&2')
    choice = choose_binary({BINARY_ENV: str(good)})
    assert choice.binary == good and "version: 7000 (abcdef0)" in choice.reason
    broken = script(tmp_path / "broken", "echo 'illegal instruction' >&2; exit 132")
    choice = choose_binary({BINARY_ENV: str(broken)})
    assert choice.binary is None and "does not run" in choice.reason
    assert choose_binary({BINARY_ENV: str(good), CHOICE_ENV: "off"}).binary is None


def test_llm_server_choice_auto_insists_or_never(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(BINARY_ENV, raising=False)
    assert server_choice("auto").binary is None
    with pytest.raises(CommandError, match="--server llama-server: no llama-server at"):
        server_choice("llama-server")
    good = script(tmp_path / "good", 'echo "version: 1 (x)"')
    monkeypatch.setenv(BINARY_ENV, str(good))
    monkeypatch.setenv(CHOICE_ENV, "off")
    assert server_choice("auto").binary is None  # switched off
    assert server_choice("llama-server").binary == good  # asked for by name: the switch does not apply
    assert server_choice("llama-cpp-python").binary is None


def test_slots_come_from_the_option_the_setting_or_the_memory_available(monkeypatch):
    from transforms.management.commands import llm_server

    assert slots_wanted(3, 6) == (3, "--parallel")
    assert slots_wanted(None, 6) == (6, "SHIFTLAB_LLM_PARALLEL")
    monkeypatch.setattr(llm_server, "memory_available", lambda: None)
    assert slots_wanted(None, 0) == (16, "default; memory available unknown")
    monkeypatch.setattr(llm_server, "memory_available", lambda: 20 * 1024**3)
    assert slots_wanted(None, 0) == (32, "default for 20 GiB of memory available")
    monkeypatch.setattr(llm_server, "memory_available", lambda: 8 * 1024**3)
    assert slots_wanted(None, 0) == (16, "default for 8 GiB of memory available")


@pytest.mark.parametrize(("cpuinfo", "no_repack"), [(AMX_CPUINFO, True), (PLAIN_CPUINFO, False)])
def test_llama_server_command_has_the_slots_and_no_repacking_on_amx(tmp_path, monkeypatch, cpuinfo, no_repack):
    info = tmp_path / "cpuinfo"
    info.write_text(cpuinfo)
    monkeypatch.setenv("SHIFTLAB_CPUINFO", str(info))
    monkeypatch.delenv("SHIFTLAB_LLAMA_REPACK", raising=False)
    server = LlamaServer(
        tmp_path / "m.gguf", model_alias="m", port=9, n_ctx=1024, n_threads=3, binary=tmp_path / "llama-server", slots=4
    )
    cmd = server.command()
    assert cmd[0] == str(tmp_path / "llama-server")
    assert cmd[cmd.index("--parallel") + 1] == "4" and cmd[cmd.index("--ctx-size") + 1] == "4096"
    assert cmd[cmd.index("--threads") + 1] == "3" and "--cont-batching" in cmd
    assert cmd[cmd.index("--poll") + 1] == "0"  # waiting threads sleep: no collapse when a core is busy
    assert ("--no-repack" in cmd) is no_repack
    assert server.kind == "llama-server" and "4 parallel slots" in server.describe()
    plain = LlamaServer(tmp_path / "m.gguf", model_alias="m", port=9, binary=None)
    assert plain.command()[1:3] == ["-m", "transforms.llama_launch"] and plain.kind == "llama-cpp-python"


def test_the_build_script_installs_into_the_cache_once(tmp_path):
    """scripts/build_llama_server.sh with a stand-in cmake on PATH (the real build takes minutes): it
    builds only the llama-server and llama-quantize targets, installs both at the cached path for this
    CPU and release, and a second run keeps them without building."""
    version = pinned_version(llama_build.REQUIREMENTS.read_text())
    work = tmp_path / "work"
    sources = work / "src" / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
    sources.mkdir(parents=True)
    (sources / "CMakeLists.txt").write_text("# stand-in\n")
    shims = tmp_path / "bin"
    shims.mkdir()
    calls = tmp_path / "cmake-calls"
    # The stand-in cmake records its arguments and, on --build, leaves the "binaries" in <build>/bin.
    script(
        shims / "cmake",
        f'echo "$@" >> {calls}\n'
        'if [ "$1" = --build ]; then mkdir -p "$2/bin"; for tool in llama-server llama-quantize; do '
        'printf \'#!/bin/sh\\necho "version: 42 (stand-in)"\\n\' > "$2/bin/$tool"; chmod +x "$2/bin/$tool"; done; fi',
    )
    env = {
        **os.environ,
        "PATH": f"{shims}:{os.environ['PATH']}",
        CACHE_ENV: str(tmp_path / "cache"),
        "SHIFTLAB_LLAMA_BUILD_DIR": str(work),
    }
    build = [str(llama_build.REPO_DIR / "scripts" / "build_llama_server.sh")]
    first = subprocess.run(build, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    installed = llama_build.cached_binary({CACHE_ENV: str(tmp_path / "cache")})
    assert first.stdout.splitlines()[-1] == str(installed) and installed.is_file()
    assert choose_binary({CACHE_ENV: str(tmp_path / "cache")}).binary == installed
    configure, build_call = calls.read_text().splitlines()
    assert "-DGGML_NATIVE=ON" in configure and "-DLLAMA_BUILD_SERVER=ON" in configure
    assert "--target llama-server llama-quantize" in build_call
    assert llama_build.cached_tool("llama-quantize", {CACHE_ENV: str(tmp_path / "cache")}).is_file()
    again = subprocess.run(build, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout.strip() == str(installed)
    assert len(calls.read_text().splitlines()) == 2  # nothing built the second time
