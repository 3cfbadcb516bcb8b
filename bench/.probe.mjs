// quick probe: node /tmp/probe/probe.mjs [--floor] [--prof]
import path from "node:path"
import { startMock, startFloor, startGateway, startPeer, chatBody, streamBody } from "./lib/targets.mjs"
import { latencyRun, throughputRun } from "./lib/load.mjs"
import { cleanup, pinSelf } from "./lib/proc.mjs"
import { readFileSync } from "node:fs"
const cpuOf = (pid) => { const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" "); return (Number(f[11]) + Number(f[12])) * 10 }
const root = "/work/main", benchDir = "/work/main/bench"
const args = process.argv.slice(2)
pinSelf(1)
const mock = await startMock({ benchDir, core: 1, pin: true })
const targets = []
if (args.includes("--floor")) targets.push(await startFloor({ benchDir, core: 0, pin: true, mock }))
if (args.includes("--peer")) targets.push(await startPeer({ benchDir, core: 0, pin: true, mock }))
const extra = args.includes("--prof") ? ["--cpu-prof", "--cpu-prof-interval", "100", "--cpu-prof-dir=/tmp/probe/prof"] : []
const gw = await startGateway({ rootDir: root, core: 0, prepCore: 1, pin: true, mock, extraNodeArgs: extra })
if (!gw.ok) { console.log(gw.error); await cleanup(); process.exit(1) }
targets.push(gw)
const all = [mock, ...targets]
for (const t of all) { t.model ??= (m) => m; t.headers ??= { "content-type": "application/json" } }
for (const t of all) await throughputRun(t.chatUrl, { headers: t.headers, body: chatBody(t.model("json-1k")), connections: 32, durationS: 2 })
for (const t of all) {
  const l = args.includes("--json") ? { p50: 0, p99: 0, errors: 0 } : await latencyRun(t.chatUrl, { headers: t.headers, body: chatBody(t.model("json-1k")), durationMs: 2000 })
  const cpu0 = t.pid ? cpuOf(t.pid) : 0, w0 = Date.now()
  const j = args.includes("--sse") ? { rps: 0, non2xx: 0 } : await throughputRun(t.chatUrl, { headers: t.headers, body: chatBody(t.model("json-1k")), connections: 32, durationS: 4 })
  const cpuPct = t.pid ? (100 * (cpuOf(t.pid) - cpu0) / (Date.now() - w0)).toFixed(0) : "?"
  const s = args.includes("--json") && !args.includes("--sse") ? { rps: 0, non2xx: 0 } : await throughputRun(t.chatUrl, { headers: t.headers, body: streamBody(t.model("sse-burst")), connections: 32, durationS: 4 })
  console.log(`${t.name.padEnd(8)} p50 ${l.p50.toFixed(3)} p99 ${l.p99.toFixed(3)} err ${l.errors} | json c32 ${j.rps.toFixed(0)} (non2xx ${j.non2xx}) cpu ${cpuPct}% | sse c32 ${s.rps.toFixed(0)} (non2xx ${s.non2xx})`)
}
await cleanup()
process.exit(0)
