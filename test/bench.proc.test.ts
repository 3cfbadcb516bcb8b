import { spawn } from "node:child_process"
import * as net from "node:net"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

/** The bench's helpers that read /proc and `ss` (bench/lib/proc.mjs, plain JavaScript: typed here). */
interface CpuSnapshot {
  readonly machine: { readonly busy: number; readonly total: number } | null
  readonly ours: number | null
}
interface ProcLib {
  readonly processTree: (pid: number) => ReadonlyArray<number>
  readonly connectionsByPid: (port: number | string) => Record<string, number> | null
  readonly familyCpuSeconds: (pid: number) => number | null
  readonly cpuSnapshot: () => CpuSnapshot
  readonly foreignSince: (prev: CpuSnapshot, now?: CpuSnapshot) => number | null
}
const loadProc = async (): Promise<ProcLib> => (await import(path.resolve("bench/lib/proc.mjs"))) as ProcLib

describe.runIf(process.platform === "linux")("bench/lib/proc.mjs", () => {
  it("processTree gives a process first, then its children", async () => {
    const { processTree } = await loadProc()
    const child = spawn(process.execPath, ["-e", "setTimeout(() => {}, 10000)"], { stdio: "ignore" })
    try {
      await new Promise((resolve) => child.once("spawn", resolve))
      const tree = processTree(process.pid)
      expect(tree[0]).toBe(process.pid)
      expect(tree).toContain(child.pid)
    } finally {
      child.kill()
    }
  })

  it("counts a grandchild's CPU as ours after it has exited (a --workers gateway's workers, a CLI run)", async () => {
    const { familyCpuSeconds, cpuSnapshot } = await loadProc()
    // A child that runs a grandchild burning 0.4 s of CPU, waits for it to exit, then stays alive.
    const burn = "const t = process.cpuUsage(); while (process.cpuUsage(t).user + process.cpuUsage(t).system < 400000) {}"
    const script = `require("node:child_process").spawnSync(process.execPath, ["-e", ${JSON.stringify(burn)}]); console.log("done"); setTimeout(() => {}, 20000)`
    const before = familyCpuSeconds(process.pid)
    const snapBefore = cpuSnapshot()
    const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "ignore"] })
    try {
      await new Promise<void>((resolve, reject) => {
        child.stdout.on("data", (d: Buffer) => d.toString().includes("done") && resolve())
        child.once("exit", (code) => reject(new Error(`the child exited (${code}) before its grandchild was done`)))
      })
      const after = familyCpuSeconds(process.pid)
      const snapAfter = cpuSnapshot()
      expect(before).not.toBeNull()
      expect(after! - before!).toBeGreaterThanOrEqual(0.38)
      expect(snapAfter.ours! - snapBefore.ours!).toBeGreaterThanOrEqual(0.38)
    } finally {
      child.kill()
    }
  }, 30_000)

  it("foreignSince is the machine's busy time less ours, over the machine's capacity", async () => {
    const { foreignSince } = await loadProc()
    const prev = { machine: { busy: 100, total: 1000 }, ours: 40 }
    // 20 s of capacity, 12 busy, 9 of them ours: 3 others'.
    expect(foreignSince(prev, { machine: { busy: 112, total: 1020 }, ours: 49 })).toBeCloseTo(0.15, 10)
    expect(foreignSince(prev, { machine: { busy: 112, total: 1020 }, ours: null })).toBeNull()
  })

  it("connectionsByPid counts the connections accepted on a port by the process that holds them", async () => {
    const { connectionsByPid } = await loadProc()
    const server = net.createServer()
    let accepted = 0
    const both = new Promise<void>((resolve) =>
      server.on("connection", () => {
        if (++accepted === 2) resolve()
      })
    )
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const port = (server.address() as net.AddressInfo).port
    const clients = [net.connect(port, "127.0.0.1"), net.connect(port, "127.0.0.1")]
    try {
      await both
      const byPid = connectionsByPid(port)
      // null where `ss` is missing or fails: the bench then prints "?".
      if (byPid !== null) expect(byPid).toEqual({ [String(process.pid)]: 2 })
    } finally {
      for (const c of clients) c.destroy()
      await new Promise((resolve) => server.close(resolve))
    }
  })
})
