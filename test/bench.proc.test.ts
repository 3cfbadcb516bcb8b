import { spawn } from "node:child_process"
import * as net from "node:net"
import * as path from "node:path"
import { describe, expect, it } from "vitest"

/** The bench's helpers that read /proc and `ss` (bench/lib/proc.mjs, plain JavaScript: typed here). */
interface ProcLib {
  readonly processTree: (pid: number) => ReadonlyArray<number>
  readonly connectionsByPid: (port: number | string) => Record<string, number> | null
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
