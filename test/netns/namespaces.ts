import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as readline from "node:readline"
import { fileURLToPath } from "node:url"

/**
 * Network namespaces for the family tests (`npm run test:netns`): each an isolated host reached
 * from this process only through its own veth pair, with private addresses only (10.200.0.0/16,
 * fd00:200::/32). Needs root and iproute2's `ip`; `requirements()` says what is missing.
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
   * A host reachable over one family only: a namespace, a veth pair with addresses of that family
   * alone (IPv6 switched off on both ends of the IPv4 link; no IPv4 address on the IPv6 one), and
   * nsServer.mjs inside it.
   */
  const host = async (family: 4 | 6): Promise<NsHost> => {
    const name = `gwt${family}-${process.pid}`
    const outer = `g${family}h${process.pid}`
    const inner = `g${family}n${process.pid}`
    const base = tag * 4
    const v4 = [`10.200.${base >> 8}.${(base & 255) + 1}`, `10.200.${base >> 8}.${(base & 255) + 2}`] as const
    const v6 = [`fd00:200:${tag.toString(16)}::1`, `fd00:200:${tag.toString(16)}::2`] as const
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
    const address = family === 4 ? v4[1] : v6[1]
    const child = spawn("ip", ["netns", "exec", name, process.execPath, SERVER, address, `ipv${family}-only host`], { stdio: ["ignore", "pipe", "inherit"] })
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
  return { host, cleanup }
}
