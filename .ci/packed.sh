#!/usr/bin/env bash
# The gateway installed alone, as a user who only runs it would: `npm pack` of this clone (its
# `files`: bin/, dist/, the native addon's sources, skills/, sdk/), then in an empty directory
# `npm install --omit=dev` of the tarball and `npx gateway`, which must answer a chat request
# through a fake upstream on 127.0.0.1. Writes a report in vitest's JSON shape to $1 (three
# checks: packed, installed, answered) for .ci/run's tally, and prints the install's time and size.
set -uo pipefail
report="${1:?usage: packed.sh <report.json>}"
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
passed=0
failed=0
check() { # name, status
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "packed: ok: $1"; else failed=$((failed + 1)); echo "packed: FAILED: $1"; fi
}
finish() {
  node -e 'const [f, p, n] = process.argv.slice(1); require("fs").writeFileSync(f, JSON.stringify({ success: Number(n) === 0, numPassedTests: Number(p), numFailedTests: Number(n), numFailedTestSuites: 0 }))' "$report" "$passed" "$failed"
  exit $((failed > 0))
}

# The tarball (its `prepare` builds dist/ only when it is not current).
npm pack --pack-destination "$tmp" >"$tmp/pack.log" 2>&1
tarball="$(ls "$tmp"/gateway-*.tgz 2>/dev/null | head -n 1)"
[ -n "$tarball" ]
check "npm pack" $?
[ -n "$tarball" ] || { cat "$tmp/pack.log"; finish; }
echo "packed: $(basename "$tarball"), $(du -h "$tarball" | cut -f1)"

# An empty directory. npm 11 runs no install script unless allowed: the gateway's (its optional
# native addon) and better-sqlite3's (its compiled driver) are; npm 10 runs them anyway.
app="$tmp/app"
mkdir -p "$app"
echo '{ "private": true, "allowScripts": { "gateway": true, "better-sqlite3": true } }' >"$app/package.json"
t0=$SECONDS
(cd "$app" && npm install --omit=dev --no-audit --no-fund "$tarball") >"$tmp/install.log" 2>&1
installed=$?
check "npm install --omit=dev of the tarball in an empty directory" "$installed"
[ "$installed" -eq 0 ] || { tail -n 30 "$tmp/install.log"; finish; }
echo "packed: installed in $((SECONDS - t0)) s, node_modules $(du -sh "$app/node_modules" | cut -f1)"

# A fake upstream (OpenAI chat, whole answers) and the installed gateway in front of it.
cat >"$tmp/upstream.mjs" <<'JS'
import http from "node:http"
const server = http.createServer((req, res) => {
  let body = ""
  req.on("data", (d) => (body += d))
  req.on("end", () => {
    const answer = JSON.stringify({ id: "chatcmpl-packed", object: "chat.completion", created: 1, model: "m1", choices: [{ index: 0, message: { role: "assistant", content: "hello from the packed gateway" }, finish_reason: "stop" }], usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 } })
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) })
    res.end(answer)
  })
})
server.listen(0, "127.0.0.1", () => console.log(server.address().port))
JS
node "$tmp/upstream.mjs" >"$tmp/upstream.port" 2>"$tmp/upstream.log" &
pids+=($!)
for _ in $(seq 1 50); do [ -s "$tmp/upstream.port" ] && break; sleep 0.1; done
upstream_port="$(cat "$tmp/upstream.port")"
port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
key="sk-packed-admin-0123456789abcdef"
export DATA_DIR="$tmp/data" GATEWAY_ENV_FILE="$tmp/data/.env" GATEWAY_API_KEY="$key" LOG_LEVEL=warning
(cd "$app" && npx gateway setup --non-interactive --add-provider --provider openai-compatible --provider-base-url "http://127.0.0.1:$upstream_port/v1" --api-key sk-up --default-model m1) >"$tmp/setup.log" 2>&1
# The bin npx runs, started directly so that its pid is the gateway's own (stopped at the end).
(cd "$app" && exec ./node_modules/.bin/gateway --port "$port" --host 127.0.0.1 --no-open) >"$tmp/gateway.log" 2>&1 &
pids+=($!)
answer=""
for _ in $(seq 1 300); do
  answer="$(curl -s -H "authorization: Bearer $key" -H 'content-type: application/json' \
    -d '{"model":"openai-compatible/m1","messages":[{"role":"user","content":"hi"}]}' "http://127.0.0.1:$port/v1/chat/completions" 2>/dev/null)"
  [ -n "$answer" ] && break
  sleep 0.2
done
echo "$answer" | grep -q "hello from the packed gateway"
answered=$?
check "the installed gateway answers a chat request" "$answered"
[ "$answered" -eq 0 ] || { echo "answer: $answer"; cat "$tmp/setup.log"; tail -n 30 "$tmp/gateway.log"; }
finish
