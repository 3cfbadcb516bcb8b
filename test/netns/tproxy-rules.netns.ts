import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process"
import * as net from "node:net"
import * as readline from "node:readline"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import {
  applyRules,
  execRun,
  type Run,
  removeLeftovers,
  revertRules,
  TPROXY_DEFAULTS,
  TPROXY_TAG,
  type TproxyConfig,
  TproxyRulesError,
  taggedRules
} from "../../src/services/inspector/tproxy/rules.js"
import { makeHosts, type NsPeer, requirements } from "./namespaces.js"

/**
 * The transparent-capture firewall rules (src/services/inspector/tproxy/rules.ts) with the real
 * iptables/ip6tables and iproute2, inside network namespaces this test creates (makeHosts().peer:
 * one linked to this namespace over IPv4 only, one over IPv6 only); every command runs through
 * `ip netns exec`, so this machine's own firewall and routes are never touched.
 *
 * 1. Apply, revert, a failure injected at step 3 or 4, a crash cleaned up by `removeLeftovers`, a
 *    second apply: the state (iptables-save, ip6tables-save, ip -4/-6 rule, ip -4/-6 route show
 *    table all) ends equal to the state before, around rules and routes of others that must
 *    survive.
 * 2. It works: with the rules applied, a connection from inside the namespace to this namespace's
 *    server reaches a transparent listener instead (python3: IP_TRANSPARENT is a plain
 *    setsockopt there), which sees the original destination as its local address and exchanges
 *    data over it: every packet of the connection was diverted, not only the SYN. The rule
 *    counters say which rules saw it. A connection carrying the bypass mark (an owner rule for uid
 *    65534, or SO_MARK as the listener's own upstream sockets set it), one to a local address, and
 *    one opened before the start all reach their real destination.
 *
 * Needs root, iproute2, iptables (ip6tables, iptables-save) and python3; fails, never skips.
 */

const TOOLS: ReadonlyArray<readonly [string, ReadonlyArray<string>, string]> = [
  ["iptables", ["--version"], "iptables (apt-get install iptables)"],
  ["ip6tables", ["--version"], "ip6tables (apt-get install iptables)"],
  ["iptables-save", ["--version"], "iptables-save (apt-get install iptables)"],
  ["ip6tables-save", ["--version"], "ip6tables-save (apt-get install iptables)"],
  ["python3", ["--version"], "python3 for the transparent listener (apt-get install python3)"]
]

const missingTools = (): Array<string> =>
  TOOLS.filter(([tool, args]) => {
    try {
      execFileSync(tool, args, { stdio: "ignore" })
      return false
    } catch {
      return true
    }
  }).map(([, , what]) => what)

const hosts = makeHosts()
let p4: NsPeer
let p6: NsPeer
const children: Array<ChildProcess> = []
const servers: Array<net.Server> = []
const sockets = new Set<net.Socket>()

/** `command args` inside namespace `ns`: its output; throws on a non-zero exit. */
const inNs = (ns: string, command: string, ...args: Array<string>): string =>
  execFileSync("ip", ["netns", "exec", ns, command, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

/** The runner the rules use, confined to namespace `ns`. */
const nsRun =
  (ns: string): Run =>
  (command, args) =>
    execRun("ip", ["netns", "exec", ns, command, ...args])

/** iptables-save output without its dated comment lines, counters zeroed. */
const normalised = (saved: string) =>
  saved
    .split("\n")
    .filter((l) => !l.startsWith("#"))
    .map((l) => l.replace(/\[\d+:\d+\]/g, "[0:0]"))
    .join("\n")

const snapshot = (ns: string) => ({
  iptables: normalised(inNs(ns, "iptables-save")),
  ip6tables: normalised(inNs(ns, "ip6tables-save")),
  rule4: inNs(ns, "ip", "-4", "rule"),
  rule6: inNs(ns, "ip", "-6", "rule"),
  route4: inNs(ns, "ip", "-4", "route", "show", "table", "all"),
  route6: inNs(ns, "ip", "-6", "route", "show", "table", "all")
})

/** Tagged rules as iptables-save prints them. */
const tagged = (ns: string, family: 4 | 6) =>
  taggedRules(inNs(ns, family === 4 ? "iptables-save" : "ip6tables-save", "-t", "mangle")).map((r) => r.join(" "))

/** What iptables-save prints for the rules of `c`: what `apply` must have put in place, in chain order. */
const expectedRules = (c: TproxyConfig, family: 4 | 6) => {
  const M = `0x${c.mark.toString(16)}`
  const B = `0x${c.bypassMark.toString(16)}`
  const tag = `-m comment --comment ${TPROXY_TAG}`
  return [
    `-A PREROUTING -p tcp -m tcp --dport ${c.dport} -m mark --mark ${M} ${tag} -j TPROXY --on-port ${c.onPort} --on-ip ${family === 4 ? "0.0.0.0" : "::"} --tproxy-mark ${M}/0xffffffff`,
    `-A OUTPUT -p tcp -m tcp --dport ${c.dport} --tcp-flags FIN,SYN,RST,ACK SYN -m mark ! --mark ${B} -m addrtype ! --dst-type LOCAL -m conntrack --ctstate NEW ${tag} -j CONNMARK --set-xmark ${M}/0xffffffff`,
    `-A OUTPUT -p tcp -m tcp --dport ${c.dport} -m mark ! --mark ${B} -m connmark --mark ${M} ${tag} -j MARK --set-xmark ${M}/0xffffffff`
  ]
}

/** The rules, the policy rules and the routes of `configs` (in the order applied) are all in place in `ns`, for both families, and no other
 * tagged rule. */
const expectApplied = (ns: string, ...configs: ReadonlyArray<TproxyConfig>) => {
  for (const family of [4, 6] as const) {
    // iptables-save lists a chain's rules in order, PREROUTING's before OUTPUT's.
    const expected = configs.flatMap((c) => expectedRules(c, family))
    const byChain = (chain: string) => expected.filter((r) => r.startsWith(`-A ${chain} `))
    expect(tagged(ns, family), `IPv${family} tagged rules`).toEqual([...byChain("PREROUTING"), ...byChain("OUTPUT")])
    for (const c of configs) {
      const M = `0x${c.mark.toString(16)}`
      expect(inNs(ns, "ip", `-${family}`, "rule")).toMatch(new RegExp(`^\\d+:\\s+from all fwmark ${M} lookup ${c.routeTable}\\s*$`, "m"))
      expect(inNs(ns, "ip", `-${family}`, "route", "show", "table", String(c.routeTable))).toMatch(/^local default dev lo /m)
    }
  }
}

beforeAll(() => {
  const missing = [requirements(), ...missingTools().map((t) => `npm run test:netns needs ${t}; it never skips.`)].filter(
    (m) => m !== undefined
  )
  if (missing.length > 0) throw new Error(missing.join("\n"))
  p4 = hosts.peer(4)
  p6 = hosts.peer(6)
  // Rules and routes of others, present before and after: the revert and the cleanup must leave
  // them, the look-alike comment included. (They also create the mangle tables, which the
  // nf_tables backend makes on first use and keeps, empty, after the last rule is deleted.)
  for (const peer of [p4, p6])
    for (const family of [4, 6] as const) {
      const ipt = family === 4 ? "iptables" : "ip6tables"
      inNs(
        peer.name,
        ipt,
        "-t",
        "mangle",
        "-A",
        "OUTPUT",
        "-p",
        "udp",
        "--dport",
        "9",
        "-m",
        "comment",
        "--comment",
        "not-the-gateway",
        "-j",
        "MARK",
        "--set-mark",
        "0x7"
      )
      inNs(
        peer.name,
        ipt,
        "-t",
        "mangle",
        "-A",
        "PREROUTING",
        "-p",
        "udp",
        "--dport",
        "443",
        "-m",
        "comment",
        "--comment",
        `${TPROXY_TAG}-lookalike`,
        "-j",
        "MARK",
        "--set-mark",
        "0x8"
      )
      inNs(peer.name, "ip", `-${family}`, "rule", "add", "fwmark", "0x7", "lookup", "77")
      inNs(peer.name, "ip", `-${family}`, "route", "add", "local", family === 4 ? "0.0.0.0/0" : "::/0", "dev", "lo", "table", "77")
    }
}, 60_000)

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGKILL")
  for (const s of sockets) s.destroy()
  // The namespaces first: nothing below may keep them alive if it hangs.
  hosts.cleanup()
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))))
})

const OTHER: TproxyConfig = { dport: 8443, mark: 0x77, onPort: 9443, routeTable: 177, bypassMark: 0x78 }
const D = 24443
const P = 28443
const FUNCTIONAL: TproxyConfig = { ...TPROXY_DEFAULTS, dport: D, onPort: P }

// A test that fails midway leaves no rules behind for the next one to trip over (each test
// checks for itself that it ends with the state it started from).
afterEach(async () => {
  for (const peer of [p4, p6]) if (peer) for (const c of [TPROXY_DEFAULTS, OTHER, FUNCTIONAL]) await removeLeftovers(c, nsRun(peer.name))
})

describe("the rules in a namespace: applied, reverted, cleaned up", () => {
  it("apply puts the tagged rules, the policy rules and the routes in place for IPv4 and IPv6; revert restores the state before", async () => {
    const ns = p4.name
    const before = snapshot(ns)
    await applyRules(TPROXY_DEFAULTS, nsRun(ns))
    expectApplied(ns, TPROXY_DEFAULTS)
    // Chain order: the CONNMARK rule before the MARK rule that reads its mark.
    const output = inNs(ns, "iptables-save", "-t", "mangle").split("\n")
    expect(output.findIndex((l) => l.includes("-j CONNMARK"))).toBeLessThan(output.findIndex((l) => l.includes(`${TPROXY_TAG} -j MARK`)))
    await revertRules(TPROXY_DEFAULTS, nsRun(ns))
    expect(snapshot(ns)).toEqual(before)
    // Again, with nothing applied: failures ignored, nothing changed.
    await revertRules(TPROXY_DEFAULTS, nsRun(ns))
    expect(snapshot(ns)).toEqual(before)
  })

  const failures: ReadonlyArray<readonly [string, 3 | 4, 4 | 6, (command: string, args: ReadonlyArray<string>) => boolean]> = [
    ["step 3's first command (IPv4 CONNMARK)", 3, 4, (command, args) => command === "iptables" && args.includes("CONNMARK")],
    ["step 3 half done (IPv6 MARK)", 3, 6, (command, args) => command === "ip6tables" && args.includes("MARK")],
    ["the last command (step 4 IPv6)", 4, 6, (command, args) => command === "ip6tables" && args.includes("TPROXY")]
  ]
  it.each(failures)("a failure at %s reverts what was applied: the state before", async (_what, step, family, fails) => {
    const ns = p4.name
    const before = snapshot(ns)
    const real = nsRun(ns)
    const failing: Run = (command, args) =>
      fails(command, args) ? Promise.resolve({ code: 1, stdout: "", stderr: "iptables: injected failure.\n" }) : real(command, args)
    const error = await applyRules(TPROXY_DEFAULTS, failing).then(
      () => undefined,
      (e: unknown) => e
    )
    expect(error).toBeInstanceOf(TproxyRulesError)
    expect(error).toMatchObject({ step, family, stderr: "iptables: injected failure.\n" })
    expect(snapshot(ns)).toEqual(before)
  })

  it("a real failure (step 2: the route exists already) reverts step 1 and leaves the first application as it was", async () => {
    const ns = p4.name
    const before = snapshot(ns)
    await applyRules(TPROXY_DEFAULTS, nsRun(ns))
    const applied = snapshot(ns)
    await expect(applyRules(TPROXY_DEFAULTS, nsRun(ns))).rejects.toMatchObject({
      step: 2,
      family: 4,
      stderr: expect.stringContaining("File exists")
    })
    expect(snapshot(ns)).toEqual(applied)
    await revertRules(TPROXY_DEFAULTS, nsRun(ns))
    expect(snapshot(ns)).toEqual(before)
  })

  it("after a crash, removeLeftovers with the recorded config removes the tagged rules of any config and the recorded routes", async () => {
    const ns = p4.name
    const before = snapshot(ns)
    // Two crashed runs with different configs; the caller recorded the last one.
    await applyRules(TPROXY_DEFAULTS, nsRun(ns))
    await applyRules(OTHER, nsRun(ns))
    expectApplied(ns, TPROXY_DEFAULTS, OTHER)
    expect(await removeLeftovers(OTHER, nsRun(ns))).toEqual({ removed: 2 * 6 + 4 })
    for (const family of [4, 6] as const) expect(tagged(ns, family)).toEqual([])
    // The first run's rule and route were not recorded: still there, until their own config is handed in.
    expect(inNs(ns, "ip", "-4", "rule")).toContain("fwmark 0x2333 lookup 233")
    expect(await removeLeftovers(TPROXY_DEFAULTS, nsRun(ns))).toEqual({ removed: 4 })
    expect(snapshot(ns)).toEqual(before)
    // Nothing left: nothing removed.
    expect(await removeLeftovers(TPROXY_DEFAULTS, nsRun(ns))).toEqual({ removed: 0 })
    expect(await removeLeftovers(undefined, nsRun(ns))).toEqual({ removed: 0 })
  })

  it("a second apply after a revert works", async () => {
    const ns = p4.name
    const before = snapshot(ns)
    await applyRules(OTHER, nsRun(ns))
    await revertRules(OTHER, nsRun(ns))
    await applyRules(OTHER, nsRun(ns))
    expectApplied(ns, OTHER)
    await revertRules(OTHER, nsRun(ns))
    expect(snapshot(ns)).toEqual(before)
  })
})

// ---- the functional check ----

/** A transparent listener on port P (IP_TRANSPARENT / IPV6_TRANSPARENT) and a plain one on loopback:D, each answering its label, its own
 * address and the line read. */
const LISTENER = `
import socket, sys, threading
family, port, dport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
af = socket.AF_INET if family == "4" else socket.AF_INET6
def listen(addr, p, transparent):
    s = socket.socket(af, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if af == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    if transparent:
        if af == socket.AF_INET:
            s.setsockopt(socket.SOL_IP, 19, 1)  # IP_TRANSPARENT
        else:
            s.setsockopt(socket.IPPROTO_IPV6, 75, 1)  # IPV6_TRANSPARENT
    s.bind((addr, p))
    s.listen(16)
    return s
def answer(c, label):
    try:
        c.settimeout(5)
        line = c.makefile("rb").readline().decode().strip()
        here = c.getsockname()
        c.sendall(("%s %s %d %s\\n" % (label, here[0], here[1], line)).encode())
    except Exception:
        pass
    finally:
        c.close()
def serve(s, label):
    while True:
        c, _ = s.accept()
        threading.Thread(target=answer, args=(c, label), daemon=True).start()
servers = [(listen("0.0.0.0" if af == socket.AF_INET else "::", port, True), "tproxied"), (listen("127.0.0.1" if af == socket.AF_INET else "::1", dport, False), "local")]
for s, label in servers:
    threading.Thread(target=serve, args=(s, label), daemon=True).start()
print("listening", flush=True)
sys.stdin.read()
`

/** A TCP client: connects, sends "hello" (after a line on stdin when told to wait), prints the answer as JSON. Optionally as another uid.
 * */
const CLIENT = `
const net = require("node:net")
const [host, port, uid, wait] = process.argv.slice(1)
if (uid) { process.setgid(Number(uid)); process.setuid(Number(uid)) }
const out = (o) => { process.stdout.write(JSON.stringify(o) + "\\n"); process.exit(0) }
const s = net.connect({ host, port: Number(port) })
let text = ""
s.on("connect", () => {
  if (wait !== "wait") return s.write("hello\\n")
  process.stdout.write(JSON.stringify({ connected: true }) + "\\n")
  process.stdin.once("data", () => s.write("hello\\n"))
})
s.on("data", (d) => (text += d))
s.on("end", () => out({ answer: text.trim() }))
s.on("error", (e) => out({ error: e.code || e.message }))
setTimeout(() => out({ error: "no answer in 4 s", text }), wait === "wait" ? 20000 : 4000)
`

/** A client whose socket carries SO_MARK `mark`, as the listener's upstream sockets do. */
const MARKED_CLIENT = `
import json, socket, sys
host, port, mark = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(4)
s.setsockopt(socket.SOL_SOCKET, 36, mark)  # SO_MARK
try:
    s.connect((host, port))
    s.sendall(b"hello\\n")
    print(json.dumps({"answer": s.makefile("rb").readline().decode().strip()}))
except Exception as e:
    print(json.dumps({"error": str(e)}))
`

interface Reply {
  readonly answer?: string
  readonly error?: string
}

const runIn = (ns: string, argv: ReadonlyArray<string>): Promise<Reply> =>
  new Promise((resolve, reject) =>
    execFile("ip", ["netns", "exec", ns, ...argv], { timeout: 15_000 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`in ${ns}: ${argv[0]} failed: ${error.message}\n${stderr}`))
      resolve(JSON.parse(stdout) as Reply)
    })
  )

/** One connection from inside `ns` to host:D, as root or as `uid`. */
const connectFrom = (ns: string, host: string, port: number, uid?: number) =>
  runIn(ns, [process.execPath, "-e", CLIENT, host, String(port), uid === undefined ? "" : String(uid)])

/** A connection from inside `ns` opened now; `send()` sends its line later and gives the answer. */
const openFrom = async (ns: string, host: string, port: number) => {
  const child = spawn("ip", ["netns", "exec", ns, process.execPath, "-e", CLIENT, host, String(port), "", "wait"], {
    stdio: ["pipe", "pipe", "inherit"]
  })
  children.push(child)
  const lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  const first = JSON.parse(String((await lines.next()).value)) as Reply & { connected?: boolean }
  if (!first.connected) throw new Error(`the waiting client in ${ns} did not connect: ${JSON.stringify(first)}`)
  return {
    send: async (): Promise<Reply> => {
      child.stdin!.write("go\n")
      return JSON.parse(String((await lines.next()).value)) as Reply
    }
  }
}

/** This namespace's server on the veth: what a connection reaches when nothing diverts it. */
const startServer = (address: string): Promise<void> =>
  new Promise((resolve, reject) => {
    const server = net.createServer((socket) => {
      // A connection whose client was reset by someone else stays open here: closed in afterAll.
      sockets.add(socket)
      socket.once("close", () => sockets.delete(socket))
      socket.setEncoding("utf8")
      let text = ""
      socket.on("data", (d: string) => {
        text += d
        if (text.includes("\n")) socket.end(`direct ${text.trim()}\n`)
      })
      socket.on("error", () => undefined)
    })
    servers.push(server)
    server.once("error", reject)
    server.listen(D, address, () => resolve())
  })

const startListener = async (ns: string, family: 4 | 6) => {
  const child = spawn("ip", ["netns", "exec", ns, "python3", "-c", LISTENER, String(family), String(P), String(D)], {
    stdio: ["pipe", "pipe", "inherit"]
  })
  children.push(child)
  await new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`the transparent listener in ${ns} exited (${code}) before listening`)))
    readline
      .createInterface({ input: child.stdout! })
      .once("line", (l) => (l === "listening" ? resolve() : reject(new Error(`listener: ${l}`))))
  })
}

/** The packet counters of our rules (and of the test's bypass rule), from `iptables-save -c`. */
const counters = (ns: string, family: 4 | 6) => {
  const saved = inNs(ns, family === 4 ? "iptables-save" : "ip6tables-save", "-c", "-t", "mangle").split("\n")
  const packets = (pattern: RegExp) => {
    const l = saved.find((s) => pattern.test(s))
    return l === undefined ? 0 : Number(/^\[(\d+):/.exec(l)?.[1] ?? 0)
  }
  return {
    connmark: packets(/--comment gateway-tproxy -j CONNMARK/),
    mark: packets(/--comment gateway-tproxy -j MARK/),
    tproxy: packets(/--comment gateway-tproxy -j TPROXY/),
    bypass: packets(/--comment gateway-tproxy-test-bypass /)
  }
}
const delta = (a: ReturnType<typeof counters>, b: ReturnType<typeof counters>) => ({
  connmark: b.connmark - a.connmark,
  mark: b.mark - a.mark,
  tproxy: b.tproxy - a.tproxy,
  bypass: b.bypass - a.bypass
})

describe.each([4, 6] as const)("IPv%s: a connection from inside the namespace", (family) => {
  it("reaches the transparent listener with its original destination once the rules are applied; bypass-marked, local and already open ones do not", async () => {
    const peer = family === 4 ? p4 : p6
    const ns = peer.name
    const server = peer.hostAddress
    const loopback = family === 4 ? "127.0.0.1" : "::1"
    const ipt = family === 4 ? "iptables" : "ip6tables"
    await startServer(server)
    await startListener(ns, family)

    // Before: the server answers.
    expect(await connectFrom(ns, server, D)).toEqual({ answer: "direct hello" })
    const open = await openFrom(ns, server, D)

    await applyRules(FUNCTIONAL, nsRun(ns))
    try {
      // Diverted: the listener accepted it on the original destination address and port and
      // exchanged data over it (the SYN alone diverted would end in a reset).
      let c0 = counters(ns, family)
      expect(await connectFrom(ns, server, D)).toEqual({ answer: `tproxied ${server} ${D} hello` })
      let c1 = counters(ns, family)
      const diverted = delta(c0, c1)
      // One connection marked (its SYN), then each of its packets (SYN, ACK, data, FIN...) marked
      // and each handed to the listener by TPROXY.
      expect(diverted.connmark).toBe(1)
      expect(diverted.mark).toBeGreaterThanOrEqual(3)
      expect(diverted.tproxy).toBe(diverted.mark)

      // Opened before the start: still goes to the server, not a packet marked.
      c0 = counters(ns, family)
      expect(await open.send()).toEqual({ answer: "direct hello" })
      expect(delta(c0, counters(ns, family))).toEqual({ connmark: 0, mark: 0, tproxy: 0, bypass: 0 })

      // A process whose packets carry the bypass mark (an owner rule for uid 65534, as the test's stand-in for SO_MARK).
      const bypassRule = [
        "-m",
        "owner",
        "--uid-owner",
        "65534",
        "-m",
        "comment",
        "--comment",
        `${TPROXY_TAG}-test-bypass`,
        "-j",
        "MARK",
        "--set-mark",
        `0x${FUNCTIONAL.bypassMark.toString(16)}`
      ]
      inNs(ns, ipt, "-t", "mangle", "-I", "OUTPUT", "1", ...bypassRule)
      try {
        c0 = counters(ns, family)
        expect(await connectFrom(ns, server, D, 65534)).toEqual({ answer: "direct hello" })
        c1 = counters(ns, family)
        expect(delta(c0, c1)).toMatchObject({ connmark: 0, mark: 0, tproxy: 0 })
        expect(c1.bypass - c0.bypass).toBeGreaterThanOrEqual(3)
      } finally {
        inNs(ns, ipt, "-t", "mangle", "-D", "OUTPUT", ...bypassRule)
      }

      // A socket with SO_MARK = the bypass mark, as the listener's own upstream connections.
      c0 = counters(ns, family)
      expect(await runIn(ns, ["python3", "-c", MARKED_CLIENT, server, String(D), String(FUNCTIONAL.bypassMark)])).toEqual({
        answer: "direct hello"
      })
      expect(delta(c0, counters(ns, family))).toEqual({ connmark: 0, mark: 0, tproxy: 0, bypass: 0 })
      // ...while any other socket mark is diverted.
      expect(await runIn(ns, ["python3", "-c", MARKED_CLIENT, server, String(D), "1"])).toEqual({ answer: `tproxied ${server} ${D} hello` })

      // To an address of this machine: not outbound, not diverted.
      c0 = counters(ns, family)
      expect(await connectFrom(ns, loopback, D)).toEqual({ answer: `local ${loopback} ${D} hello` })
      expect(delta(c0, counters(ns, family))).toEqual({ connmark: 0, mark: 0, tproxy: 0, bypass: 0 })
    } finally {
      await revertRules(FUNCTIONAL, nsRun(ns))
    }

    // Reverted: the server again, nothing of ours left.
    expect(await connectFrom(ns, server, D)).toEqual({ answer: "direct hello" })
    expect(tagged(ns, family)).toEqual([])
    expect(inNs(ns, "ip", `-${family}`, "rule")).not.toContain(`lookup ${FUNCTIONAL.routeTable}`)
  })
})
