import { execFileSync } from "node:child_process"
import { afterAll, describe, expect, it } from "vitest"
import { loadTproxyNative, TPROXY_ADDON_PATH, type TproxyNative } from "../../src/services/inspector/tproxy/native.js"
import { requirements } from "./namespaces.js"

/**
 * The transparent-capture addon's marks in a network namespace (test/tproxy.native.test.ts has
 * the rest, in npm test): needs root, iproute2 and iptables, and fails naming what is missing.
 */
const addon = (): TproxyNative => {
  const why = requirements()
  if (why !== undefined) throw new Error(why)
  const load = loadTproxyNative()
  if (!load.available)
    throw new Error(
      `the transparent-capture addon is unavailable (${load.reason}); build it with \`npm run build:native\` (node native/build.mjs), then run this file again`
    )
  return load.native
}

/**
 * The marks, ECONNREFUSED and the timeout, inside a network namespace of this run: a node child
 * there runs the scenarios and iptables (mangle OUTPUT counting rules, one per mark) counts the
 * packets that carried each mark; a filter INPUT rule drops the SYNs to DROP_PORT.
 */
const NS = `gwtp-${process.pid}`
const DROP_PORT = 9
const MARKS = { v4: 0x4750001, v6: 0x4750002, refused: 0x4750003, timeout: 0x4750004, unused: 0x4750005 } as const
let nsCreated = false

// Run by `ip netns exec` in its own node process, so that its sockets live in the namespace.
const CHILD = `
const net = require("node:net")
const fs = require("node:fs")
const [addonPath, args] = process.argv.slice(1)
const { marks, dropPort } = JSON.parse(args)
const n = require(addonPath)
const failed = (e) => ({ code: e.code, syscall: e.syscall, message: e.message })
const fds = () => fs.readdirSync("/proc/self/fd").length
const echo = (host) => new Promise((resolve) => {
  const srv = net.createServer((s) => s.once("data", (d) => s.end("pong:" + d)))
  srv.listen(0, host, () => resolve(srv))
})
const roundTrip = async (host, mark) => {
  const srv = await echo(host)
  const s = new net.Socket({ fd: await n.connectMarked(host, srv.address().port, mark, 2000), readable: true, writable: true })
  const reply = await new Promise((resolve, reject) => {
    let text = ""
    s.setEncoding("utf8")
    s.on("data", (d) => (text += d))
    s.once("end", () => resolve(text))
    s.once("error", reject)
    s.write("ping")
  })
  s.destroy()
  await new Promise((r) => srv.close(r))
  return reply
}
;(async () => {
  const out = {}
  out.v4 = await roundTrip("127.0.0.1", marks.v4)
  out.v6 = await roundTrip("::1", marks.v6)
  const gone = await echo("127.0.0.1")
  const closedPort = gone.address().port
  await new Promise((r) => gone.close(r))
  const before = fds()
  out.refused = await n.connectMarked("127.0.0.1", closedPort, marks.refused, 2000).then(() => "connected", failed)
  const t0 = Date.now()
  out.timeout = await n.connectMarked("127.0.0.1", dropPort, marks.timeout, 300).then(() => "connected", failed)
  out.timeoutMs = Date.now() - t0
  out.leakedFds = fds() - before
  process.stdout.write(JSON.stringify(out) + "\\n")
})().catch((e) => {
  process.stdout.write(JSON.stringify({ error: String((e && e.stack) || e) }) + "\\n")
  process.exitCode = 1
})
`

const run = (file: string, args: Array<string>) =>
  execFileSync(file, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 20_000 })
const inNs = (...args: Array<string>) => run("ip", ["netns", "exec", NS, ...args])

/** Packets counted per rule of the namespace's mangle OUTPUT chain: `all:<mark>` and `syn:<mark>` (hex, as iptables prints it). */
const counters = (tool: "iptables" | "ip6tables") => {
  const counted = new Map<string, number>()
  for (const line of inNs(tool, "-t", "mangle", "-L", "OUTPUT", "-v", "-x", "-n").split("\n")) {
    const m = /mark match (0x[0-9a-f]+)/.exec(line)
    if (m) counted.set(`${line.includes("flags:") ? "syn" : "all"}:${m[1]}`, Number(line.trim().split(/\s+/)[0]))
  }
  return counted
}
const hex = (mark: number) => `0x${mark.toString(16)}`

const cleanupNs = () => {
  if (!nsCreated) return
  nsCreated = false
  try {
    run("ip", ["netns", "del", NS])
  } catch {
    // already gone
  }
}
process.once("exit", cleanupNs)
afterAll(cleanupNs)

describe("connectMarked in a network namespace (iptables counts the marked packets)", () => {
  it("every packet of its connections carries the mark, the SYN included; a closed port gives ECONNREFUSED; a dropped SYN ETIMEDOUT after timeoutMs", async () => {
    addon()
    for (const tool of ["ip", "iptables", "ip6tables"]) {
      try {
        run(tool, ["-V"])
      } catch (e) {
        throw new Error(`this test needs \`${tool}\` on PATH (iproute2, iptables): ${(e as Error).message}`)
      }
    }
    run("ip", ["netns", "add", NS])
    nsCreated = true
    inNs("ip", "link", "set", "lo", "up")
    for (const [name, mark] of Object.entries(MARKS)) {
      // Counting rules (no target): every packet with the mark, and its SYNs; IPv6's in ip6tables, the unused mark in both.
      for (const tool of name === "v6" ? ["ip6tables"] : name === "unused" ? ["iptables", "ip6tables"] : ["iptables"]) {
        inNs(tool, "-t", "mangle", "-A", "OUTPUT", "-m", "mark", "--mark", hex(mark))
        inNs(tool, "-t", "mangle", "-A", "OUTPUT", "-p", "tcp", "--syn", "-m", "mark", "--mark", hex(mark))
      }
    }
    inNs("iptables", "-A", "INPUT", "-p", "tcp", "--syn", "--dport", String(DROP_PORT), "-j", "DROP")

    const line = inNs(process.execPath, "-e", CHILD, TPROXY_ADDON_PATH, JSON.stringify({ marks: MARKS, dropPort: DROP_PORT })).trim()
    const out = JSON.parse(line) as Record<string, any>
    expect(out.error, line).toBeUndefined()
    expect(out.v4).toBe("pong:ping")
    expect(out.v6).toBe("pong:ping")
    expect(out.refused).toMatchObject({ code: "ECONNREFUSED", syscall: "connect", message: expect.stringContaining("Connection refused") })
    expect(out.timeout).toMatchObject({ code: "ETIMEDOUT", syscall: "connect", message: expect.stringContaining("no answer in 300 ms") })
    expect(out.timeoutMs).toBeGreaterThanOrEqual(290)
    expect(out.timeoutMs).toBeLessThan(2000)
    expect(out.leakedFds, "the failed connects closed their sockets").toBe(0)

    const v4 = counters("iptables")
    const v6 = counters("ip6tables")
    const seen = { v4: Object.fromEntries(v4), v6: Object.fromEntries(v6) }
    // The round trip: SYN, ACK, data, FIN... all marked.
    expect(v4.get(`syn:${hex(MARKS.v4)}`), JSON.stringify(seen)).toBe(1)
    expect(v4.get(`all:${hex(MARKS.v4)}`), JSON.stringify(seen)).toBeGreaterThanOrEqual(3)
    expect(v6.get(`syn:${hex(MARKS.v6)}`), JSON.stringify(seen)).toBe(1)
    expect(v6.get(`all:${hex(MARKS.v6)}`), JSON.stringify(seen)).toBeGreaterThanOrEqual(3)
    // The refused and the timed-out connects sent their SYN marked (the mark is set before connect).
    expect(v4.get(`syn:${hex(MARKS.refused)}`), JSON.stringify(seen)).toBe(1)
    expect(v4.get(`syn:${hex(MARKS.timeout)}`), JSON.stringify(seen)).toBeGreaterThanOrEqual(1)
    // A mark nobody used counted nothing: the rules count marks, not traffic.
    expect(v4.get(`all:${hex(MARKS.unused)}`), JSON.stringify(seen)).toBe(0)
    expect(v6.get(`all:${hex(MARKS.unused)}`), JSON.stringify(seen)).toBe(0)
  })
})
