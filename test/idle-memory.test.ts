import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type ServerProcess, startServerProcess } from "./support/cli.js"

/**
 * src/platform/system/IdleMemory.ts: a gateway at rest gives back the young generation start-up
 * grew (two 16 MB semi-spaces), seen from outside as its resident memory. Two real gateway
 * processes on fresh data directories, one with the job every second and one with it off.
 */
const rssMb = (pid: number): number => Number(/VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024

const dirs: Array<string> = []
const servers: Array<ServerProcess> = []
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()))
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

const start = async (seconds: string) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "idle-memory-"))
  dirs.push(dir)
  const s = await startServerProcess({ DATA_DIR: dir, HOME: dir, GATEWAY_IDLE_GC_SECONDS: seconds })
  servers.push(s)
  return s
}

// Node 22's V8 keeps the pages it frees from the young generation (RSS unchanged), so the job is
// off there by default (src/platform/system/IdleMemory.ts) and this comparison is Node 20's.
describe.runIf(Number(process.versions.node.split(".")[0]) < 22)("memory at rest (Node 20)", () => {
  it("a gateway left idle gives back its young generation within seconds; with GATEWAY_IDLE_GC_SECONDS=0 it keeps it", {
    timeout: 60_000
  }, async () => {
    const [on, off] = await Promise.all([start("1"), start("0")])
    const end = Date.now() + 25_000
    let a = rssMb(on.child.pid!)
    let b = rssMb(off.child.pid!)
    while (!(a < b - 15) && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 500))
      a = rssMb(on.child.pid!)
      b = rssMb(off.child.pid!)
    }
    expect(a, `resident MB with the job ${a.toFixed(0)}, without ${b.toFixed(0)}`).toBeLessThan(b - 15)
    // Both still answer.
    for (const s of [on, off]) expect((await fetch(`${s.url}/api/health/ping`)).status).toBe(200)
  })
})
