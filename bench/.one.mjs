import { startMock, startGateway, chatBody } from "./lib/targets.mjs"
import { request } from "./lib/load.mjs"
import { cleanup } from "./lib/proc.mjs"
import http from "node:http"
import { execSync, spawn } from "node:child_process"
const mock = await startMock({ benchDir: "/work/main/bench", core: 1, pin: false })
const gw = await startGateway({ rootDir: "/work/main", core: 0, pin: false, mock })
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
for (let i = 0; i < 300; i++) await request(gw.chatUrl, { headers: gw.headers, body: chatBody(gw.model("json-1k")), agent })
const st = spawn("strace", ["-f", "-tt", "-T", "-p", String(gw.pid), "-o", "/tmp/probe/strace.txt"], { stdio: "ignore" })
await new Promise((r) => setTimeout(r, 800))
for (let i = 0; i < 3; i++) { const r = await request(gw.chatUrl, { headers: gw.headers, body: chatBody(gw.model("json-1k")), agent }); console.log("ms", r.ms) }
await new Promise((r) => setTimeout(r, 300))
st.kill("SIGINT"); await new Promise((r) => setTimeout(r, 300))
await cleanup(); process.exit(0)
