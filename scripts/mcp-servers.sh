#!/usr/bin/env bash
# Real MCP servers for the MCP client integration tests, from the package registries, at pinned versions.
#
#   bash scripts/mcp-servers.sh install   # into target/mcp-servers/ (skipped when already there, same pins)
#   eval "$(bash scripts/mcp-servers.sh env)"
#
# What `env` exports:
#   OMNI_MCP_EVERYTHING   command of the reference "everything" server (npm @modelcontextprotocol/server-everything);
#                         append `stdio` (the default) or `streamableHttp`; the latter listens on $PORT
#                         (default 3001, all interfaces) at path /mcp
#   OMNI_MCP_NODE, OMNI_MCP_EVERYTHING_JS   the same command as two words (node binary, entry script)
#   OMNI_MCP_PYTHON       the venv's python, with the official Python SDK (`mcp` on PyPI)
#   OMNI_MCP_PYSERVER     conformance/mcp/python_server.py: `$OMNI_MCP_PYTHON $OMNI_MCP_PYSERVER stdio`
#                         or `... http --port N` (127.0.0.1:N/mcp; prints `listening URL` on stdout when ready)
#
# Pins: the npm server's whole dependency tree is conformance/mcp/npm/package-lock.json (it takes
# @modelcontextprotocol/sdk from there), the Python packages are conformance/mcp/constraints.txt.
# Needs node 20+, npm, python3 (3.10+) with the venv module, and the npm registry and PyPI.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/target/mcp-servers"
SPEC="$ROOT/conformance/mcp"

EVERYTHING_VERSION=2026.8.31 # @modelcontextprotocol/server-everything (must match npm/package.json)
MCP_VERSION=2.3.0            # mcp, the official Python SDK (must match constraints.txt)

EVERYTHING_JS="$DIR/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
VENV_PYTHON="$DIR/venv/bin/python"
STAMP="$DIR/installed.stamp"

stamp() {
  local py
  py=$(python3 -c 'import sys; print(".".join(map(str, sys.version_info[:3])))')
  printf 'everything=%s mcp=%s python=%s\n' "$EVERYTHING_VERSION" "$MCP_VERSION" "$py"
  cat "$SPEC/npm/package.json" "$SPEC/npm/package-lock.json" "$SPEC/constraints.txt" | sha256sum
}

installed() {
  [[ -f "$STAMP" && -f "$EVERYTHING_JS" && -x "$VENV_PYTHON" ]] && [[ "$(cat "$STAMP")" == "$(stamp)" ]]
}

install() {
  if installed; then
    echo "mcp-servers: already installed in $DIR (everything $EVERYTHING_VERSION, mcp $MCP_VERSION)"
    return
  fi
  local start=$SECONDS
  mkdir -p "$DIR"
  rm -f "$STAMP"

  echo "mcp-servers: npm @modelcontextprotocol/server-everything@$EVERYTHING_VERSION"
  rm -rf "$DIR/node"
  mkdir -p "$DIR/node"
  cp "$SPEC/npm/package.json" "$SPEC/npm/package-lock.json" "$DIR/node/"
  # `npm ci`: exactly the lockfile's tree, local to the prefix (no global install).
  npm ci --prefix "$DIR/node" --no-audit --no-fund --loglevel=error
  local got
  got=$(node -p 'require(process.argv[1]).version' "$DIR/node/node_modules/@modelcontextprotocol/server-everything/package.json")
  [[ "$got" == "$EVERYTHING_VERSION" ]] || {
    echo "mcp-servers: installed server-everything $got, expected $EVERYTHING_VERSION (update npm/package.json and its lock)" >&2
    exit 1
  }

  echo "mcp-servers: PyPI mcp==$MCP_VERSION into $DIR/venv"
  rm -rf "$DIR/venv"
  python3 -m venv "$DIR/venv" || {
    echo "mcp-servers: 'python3 -m venv' failed (on Debian's own python3: apt-get install python3-venv)" >&2
    exit 1
  }
  "$VENV_PYTHON" -m pip install --quiet --disable-pip-version-check --no-input \
    -c "$SPEC/constraints.txt" "mcp==$MCP_VERSION"
  "$VENV_PYTHON" -c 'import mcp.server.mcpserver, uvicorn'

  stamp >"$STAMP"
  echo "mcp-servers: installed in $((SECONDS - start)) s"
}

env_lines() {
  if ! installed; then
    # Printed for `eval`, so that a missing install fails the caller instead of exporting nothing.
    echo "echo 'mcp-servers: not installed (or stale): run bash scripts/mcp-servers.sh install' >&2; false"
    return 1
  fi
  local node
  node=$(command -v node)
  printf 'export OMNI_MCP_NODE=%q\n' "$node"
  printf 'export OMNI_MCP_EVERYTHING_JS=%q\n' "$EVERYTHING_JS"
  printf 'export OMNI_MCP_EVERYTHING=%q\n' "$node $EVERYTHING_JS"
  printf 'export OMNI_MCP_PYTHON=%q\n' "$VENV_PYTHON"
  printf 'export OMNI_MCP_PYSERVER=%q\n' "$SPEC/python_server.py"
}

case "${1:-}" in
  install) install ;;
  env) env_lines ;;
  *)
    echo "usage: $0 install|env" >&2
    exit 2
    ;;
esac
