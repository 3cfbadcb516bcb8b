// `node --import ./bench/lib/moduleTrace.mjs <script>`: records every module the process loads
// (ES modules and what they import, node: builtins included) and, at exit, writes their URLs,
// one a line, to the file named by MODULE_TRACE_OUT. Used by bench/cli-startup.mjs (a module
// count: deterministic, unlike timings) and by test/cli-contract.test.ts (what a light command
// must not load). The hooks run on the loader thread and post each URL here.
import { writeFileSync } from "node:fs"
import { register } from "node:module"
import { MessageChannel } from "node:worker_threads"

const { port1, port2 } = new MessageChannel()
const seen = new Set()
port1.on("message", (url) => seen.add(url))
port1.unref()
register("./moduleTraceHooks.mjs", import.meta.url, { data: { port: port2 }, transferList: [port2] })
process.on("exit", () => {
  if (process.env.MODULE_TRACE_OUT) writeFileSync(process.env.MODULE_TRACE_OUT, [...seen].join("\n") + "\n")
})
