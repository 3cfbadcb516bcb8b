import { writeFileSync } from "node:fs"
import { startMock, startGateway, chatBody, streamBody } from "./lib/targets.mjs"
import { latencyRun } from "./lib/load.mjs"
import { cleanup } from "./lib/proc.mjs"
const mock = await startMock({ benchDir: "/work/main/bench", core: 1, pin: false })
const gw = await startGateway({ rootDir: "/work/main", core: 0, pin: false, mock, extraNodeArgs: ["--import", "/work/main/.count.mjs"] })
if (!gw.ok) { console.log(gw.error); process.exit(1) }
const body = process.argv.includes("--stream") ? streamBody(gw.model("sse-burst")) : chatBody(gw.model("json-1k"))
await latencyRun(gw.chatUrl, { headers: gw.headers, body, durationMs: 500 })
process.kill(gw.pid, "SIGUSR1"); await new Promise((r) => setTimeout(r, 100))
const l = await latencyRun(gw.chatUrl, { headers: gw.headers, body, durationMs: 1500 })
writeFileSync("/tmp/probe/n", String(l.n))
process.kill(gw.pid, "SIGUSR2"); await new Promise((r) => setTimeout(r, 500))
console.log(gw.proc.output().split("\n").filter((x) => x.includes("OPS")).join("\n"))
await cleanup(); process.exit(0)
