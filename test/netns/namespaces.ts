import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"

/**
 * Network namespaces for the netns tests (`npm run test:netns`): each an isolated host reached
 * from this process only through its own veth pair, with private addresses only (10.200.0.0/16
 * and fd00:200::/32 for the proxy hosts, 10.201.0.0/16 and fd00:201::/32 for the bare peers).
 * Needs root and iproute2's `ip`; `requirements()` says what is missing.
 */

const SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), "nsServer.mjs")

/** What a host's proxy saw: one entry per tunnel. */
export interface Tunnel {
  readonly target: string
  readonly family: "IPv4" | "IPv6"
}

export interface NsHost {
  readonly name: string
  /** The address of the host's proxy (port 3128), on the namespace's side of the veth. */
  readonly address: string
  readonly tunnels: Array<Tunnel>
}

/** A namespace with nothing running in it: a caller on another machine, as the gateway sees it. */
export interface NsPeer {
  readonly name: string
  /** The namespace's own address on the veth: where its requests come from. */
  readonly address: string
  /** This side's address on the veth: where the namespace reaches this process. */
  readonly hostAddress: string
}

/** Why the netns tests cannot run here, or undefined when they can. */
export const requirements = (): string | undefined => {
  const missing: Array<string> = []
  if (typeof process.getuid !== "function" || process.getuid() !== 0)
    missing.push(`root (running as uid ${process.getuid?.() ?? "unknown"}): creating network namespaces and veth pairs needs CAP_NET_ADMIN`)
  try {
    execFileSync("ip", ["-V"], { stdio: "ignore" })
  } catch {
    missing.push("iproute2's `ip` command on PATH (apt-get install iproute2)")
  }
  return missing.length === 0 ? undefined : `npm run test:netns needs ${missing.join(" and ")}; it never skips.`
}

const ip = (...args: Array<string>) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] })

/**
 * The namespaces of one run, named after this process so that runs side by side do not meet;
 * the subnets are derived from the pid for the same reason.
 */
export const makeHosts = () => {
  const tag = process.pid % 16000
  const created: Array<string> = []
  const links: Array<string> = []
  const children: Array<ChildProcess> = []

  /**
   * Namespace `name` and a veth pair `outer` (this side) / `inner` (inside it) with addresses of
   * `family` alone, in 10.`net`.0.0/16 or fd00:`net`::/32: the namespace's and this side's.
   */
  const veth = (family: 4 | 6, name: string, outer: string, inner: string, net: number) => {
    const base = tag * 4
    const v4 = [`10.${net}.${base >> 8}.${(base & 255) + 1}`, `10.${net}.${base >> 8}.${(base & 255) + 2}`] as const
    const v6 = [`fd00:${net}:${tag.toString(16)}::1`, `fd00:${net}:${tag.toString(16)}::2`] as const
    ip("netns", "add", name)
    created.push(name)
    ip("link", "add", outer, "type", "veth", "peer", "name", inner)
    links.push(outer)
    ip("link", "set", inner, "netns", name)
    ip("-n", name, "link", "set", "lo", "up")
    if (family === 4) {
      // No IPv6 on this link, not even link-local addresses.
      fs.writeFileSync(`/proc/sys/net/ipv6/conf/${outer}/disable_ipv6`, "1")
      ip("netns", "exec", name, "sh", "-c", `echo 1 > /proc/sys/net/ipv6/conf/${inner}/disable_ipv6`)
      ip("addr", "add", `${v4[0]}/30`, "dev", outer)
      ip("-n", name, "addr", "add", `${v4[1]}/30`, "dev", inner)
    } else {
      ip("-6", "addr", "add", `${v6[0]}/64`, "dev", outer, "nodad")
      ip("-n", name, "-6", "addr", "add", `${v6[1]}/64`, "dev", inner, "nodad")
    }
    ip("link", "set", outer, "up")
    ip("-n", name, "link", "set", inner, "up")
    return family === 4 ? { address: v4[1], hostAddress: v4[0] } : { address: v6[1], hostAddress: v6[0] }
  }

  /**
   * A host reachable over one family only: a namespace, a veth pair with addresses of that family
   * alone (IPv6 switched off on both ends of the IPv4 link; no IPv4 address on the IPv6 one), and
   * nsServer.mjs inside it.
   */
  const host = async (family: 4 | 6): Promise<NsHost> => {
    const name = `gwt${family}-${process.pid}`
    const { address } = veth(family, name, `g${family}h${process.pid}`, `g${family}n${process.pid}`, 200)
    const child = spawn("ip", ["netns", "exec", name, process.execPath, SERVER, address, `ipv${family}-only host`], {
      stdio: ["ignore", "pipe", "inherit"]
    })
    children.push(child)
    const tunnels: Array<Tunnel> = []
    await new Promise<void>((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`nsServer in ${name} exited (${code}) before listening`)))
      readline.createInterface({ input: child.stdout! }).on("line", (line) => {
        const o = JSON.parse(line) as { listening?: boolean } & Tunnel
        if (o.listening) resolve()
        else tunnels.push({ target: o.target, family: o.family })
      })
    })
    return { name, address, tunnels }
  }

  /**
   * A namespace linked to this one over one family only, as `host` links it, with nothing running
   * inside: run clients in it with `nsRequest`. Its subnet (10.201.x.x/30, fd00:201:x::/64) is not
   * the hosts' one.
   */
  const peer = (family: 4 | 6): NsPeer => {
    const name = `gwp${family}-${process.pid}`
    return { name, ...veth(family, name, `g${family}q${process.pid}`, `g${family}r${process.pid}`, 201) }
  }

  /**
   * Stops the servers, deletes the veth pairs (from this side: a namespace that lingers after
   * `netns del` would otherwise keep its pair) and the namespaces.
   */
  const cleanup = () => {
    for (const c of children) if (c.exitCode === null) c.kill("SIGKILL")
    for (const link of links.splice(0)) {
      try {
        ip("link", "del", link)
      } catch {
        // already gone
      }
    }
    for (const name of created.splice(0)) {
      try {
        ip("netns", "del", name)
      } catch {
        // already gone
      }
    }
  }
  // Even when the run dies before afterAll.
  process.once("exit", cleanup)
  return { host, peer, cleanup }
}

/** What `nsRequest` saw: the answer, or why there was none. */
export interface NsAnswer {
  /** The client's own end of the connection (its source address), when it connected. */
  readonly localAddress?: string
  readonly status?: number
  readonly headers?: Record<string, string | Array<string> | undefined>
  readonly text?: string
  /** The answer's body as JSON, when it is JSON. */
  readonly body?: any
  /** A 101 answer took the connection (a WebSocket upgrade accepted). */
  readonly upgraded?: boolean
  /** The client's error code or message, when no answer came. */
  readonly error?: string
}

// Runs in its own node process, so that its connection starts inside the namespace.
const CLIENT = `
const http = require("node:http")
const [url, headers] = process.argv.slice(1)
const out = (o) => process.stdout.write(JSON.stringify(o) + "\\n")
let localAddress
const req = http.request(url, { headers: JSON.parse(headers), agent: false }, (res) => {
  let text = ""
  res.setEncoding("utf8")
  res.on("data", (c) => (text += c))
  res.on("end", () => out({ localAddress, status: res.statusCode, headers: res.headers, text }))
})
req.on("socket", (s) => s.on("connect", () => (localAddress = s.localAddress)))
req.on("upgrade", (res, socket) => {
  out({ localAddress, status: res.statusCode, headers: res.headers, upgraded: true })
  socket.destroy()
})
req.on("error", (e) => out({ localAddress, error: e.code || e.message }))
req.setTimeout(10000, () => req.destroy(new Error("no answer in 10 s")))
req.end()
`

/**
 * One HTTP GET of `url` with `headers`, by a fresh node process started inside namespace `ns`
 * (`ip netns exec`), or in this one when `ns` is undefined: the same client either way. With
 * `upgrade: websocket` headers a 101 is reported as `upgraded` and the connection dropped.
 */
export const nsRequest = (ns: string | undefined, url: string, headers: Record<string, string> = {}): Promise<NsAnswer> => {
  const argv = [process.execPath, "-e", CLIENT, url, JSON.stringify(headers)]
  const [file, ...args] = ns === undefined ? argv : ["ip", "netns", "exec", ns, ...argv]
  return new Promise((resolve, reject) =>
    execFile(file!, args, { timeout: 20_000 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`${ns ? `in ${ns}: ` : ""}GET ${url} failed to run: ${error.message}\n${stderr}`))
      const answer = JSON.parse(stdout) as NsAnswer
      let body: unknown
      try {
        body = answer.text ? JSON.parse(answer.text) : undefined
      } catch {
        body = undefined
      }
      resolve({ ...answer, body })
    })
  )
}
