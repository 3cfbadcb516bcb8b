#!/usr/bin/env bash
# The JSON and same-format SSE ratios with Debian's wrk as the load generator instead of the
# harness's own client (bench/README.md, "With wrk"): the floor and the gateway on core 0, the mock
# upstream and wrk on core 1, interleaved rounds, req/s and the target's CPU µs per request.
#   bash bench/wrk.sh [rounds] [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
seconds="${2:-5}"
command -v wrk >/dev/null || { echo "wrk is not installed (Debian: apt-get install wrk)" >&2; exit 1; }
command -v taskset >/dev/null || { echo "taskset is not installed (Debian: util-linux)" >&2; exit 1; }
node scripts/build-stamp.mjs start
tmp="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
wait_for() { for _ in $(seq 1 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; echo "nothing answers at $1" >&2; exit 1; }

mock=$(free_port); floor=$(free_port); gw=$(free_port)
key="sk-wrk-admin-0123456789abcdef0123"
taskset -c 1 node bench/mock-upstream.mjs --port "$mock" >"$tmp/mock.log" 2>&1 & pids+=($!)
taskset -c 0 node bench/floor-proxy.mjs --port "$floor" --upstream "http://127.0.0.1:$mock" >"$tmp/floor.log" 2>&1 & pids+=($!)
floor_pid=$!
export DATA_DIR="$tmp/data" GATEWAY_ENV_FILE="$tmp/data/.env" GATEWAY_API_KEY="$key" LOG_LEVEL=warning
node bin/gateway setup --non-interactive --add-provider --provider openai-compatible --provider-base-url "http://127.0.0.1:$mock/v1" --api-key sk-wrk --default-model json-1k >/dev/null
taskset -c 0 node bin/gateway --port "$gw" --no-open >"$tmp/gateway.log" 2>&1 & pids+=($!)
gw_pid=$!
wait_for "http://127.0.0.1:$gw/api/health/ping"
wait_for "http://127.0.0.1:$floor/"

script() { # model, stream (the file is named after the model, its / as _)
  cat >"$tmp/${1//\//_}.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"model":"$1","stream":$2,"messages":[{"role":"user","content":"hi"}]}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $key"
LUA
}
script json-1k false; script sse-burst true; script openai-compatible/json-1k false; script openai-compatible/sse-burst true
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)
# One measurement: req/s and the target's CPU µs per request.
measure() { # port pid lua
  local before after out rps n
  before=$(cpu "$2")
  out=$(taskset -c 1 wrk -t1 -c32 -d"${seconds}s" -s "$tmp/${3//\//_}.lua" "http://127.0.0.1:$1/v1/chat/completions")
  after=$(cpu "$2")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  n=$(echo "$out" | awk '/requests in/ {print $1}')
  echo "$rps $(node -e "console.log(((($after-$before)/$tck)*1e6/$n).toFixed(0))")"
}
# Warm-up (JIT, pools), not measured.
for lua in json-1k sse-burst; do taskset -c 1 wrk -t1 -c32 -d3s -s "$tmp/$lua.lua" "http://127.0.0.1:$floor/v1/chat/completions" >/dev/null; done
for lua in openai-compatible_json-1k openai-compatible_sse-burst; do taskset -c 1 wrk -t1 -c32 -d3s -s "$tmp/$lua.lua" "http://127.0.0.1:$gw/v1/chat/completions" >/dev/null; done

printf "| round | load | floor req/s | gateway req/s | gw ÷ floor | floor CPU µs/req | gateway CPU µs/req | gw ÷ floor |\n|---|---|---:|---:|---:|---:|---:|---:|\n"
for r in $(seq 1 "$rounds"); do
  for kind in json-1k sse-burst; do
    read -r frps fcpu < <(measure "$floor" "$floor_pid" "$kind")
    read -r grps gcpu < <(measure "$gw" "$gw_pid" "openai-compatible/$kind")
    node -e "const [f,g,fc,gc]=process.argv.slice(1).map(Number);console.log('| $r | $kind c=32 | '+f.toFixed(0)+' | '+g.toFixed(0)+' | '+(g/f).toFixed(2)+'× | '+fc+' | '+gc+' | '+(gc/fc).toFixed(2)+'× |')" "$frps" "$grps" "$fcpu" "$gcpu"
  done
done
