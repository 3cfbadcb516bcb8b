#!/usr/bin/env bash
# Installs the coding agents the end-to-end test runs, pinned, each into its own prefix under
# $GATEWAY_AGENTS_DIR (default node_modules/.cache/gateway-agents). Skips agents already there.
set -euo pipefail
dir="${GATEWAY_AGENTS_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/node_modules/.cache/gateway-agents}"
mkdir -p "$dir"
install() {
  local name="$1" pkg="$2" bin="$3"
  if [ -x "$dir/$name/node_modules/.bin/$bin" ]; then return; fi
  echo "installing $pkg into $dir/$name"
  npm install --prefix "$dir/$name" --no-audit --no-fund --loglevel=error "$pkg" >/dev/null
}
install codex "@openai/codex@0.169.0" codex
install claude "@anthropic-ai/claude-code@2.1.330" claude
install gemini "@google/gemini-cli@0.61.0" gemini
install opencode "opencode-ai@1.18.33" opencode
install qwen "@qwen-code/qwen-code@0.24.4" qwen
install kilo "@kilocode/cli@7.7.7" kilo
echo "$dir"
