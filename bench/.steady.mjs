import { startMock, startGateway, chatBody, streamBody } from "./lib/targets.mjs"
import { throughputRun } from "./lib/load.mjs"
import { cleanup, pinSelf } from "./lib/proc.mjs"
pinSelf(1)
const mock = await startMock({ benchDir: "/work/main/bench", core: 1, pin: true })
const gw = await startGateway({ rootDir: "/work/main", core: 0, prepCore: 1, pin: true, mock, extraNodeArgs: ["--import", "/work/main/.prof.mjs"] })
if (!gw.ok) { console.log(gw.error); process.exit(1) }
const sse = process.argv.includes("--sse")
const body = sse ? streamBody(gw.model("sse-burst")) : chatBody(gw.model("json-1k"))
await throughputRun(gw.chatUrl, { headers: gw.headers, body, connections: 32, durationS: 3 })
process.kill(gw.pid, "SIGUSR1")
const r = await throughputRun(gw.chatUrl, { headers: gw.headers, body, connections: 32, durationS: 4 })
process.kill(gw.pid, "SIGUSR2"); await new Promise((r) => setTimeout(r, 1500))
console.log("rps", r.rps.toFixed(0))
await cleanup(); process.exit(0)
