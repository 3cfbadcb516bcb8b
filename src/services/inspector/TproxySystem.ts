/**
 * What the transparent capture (Tproxy.ts) needs from the machine: the firewall's and the trust
 * store's commands, the native addon, the privileges and the tools it checks for. The real
 * machine's by default; tests may give their own.
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as path from "node:path"
import { loadTproxyNative, type TproxyNativeLoad } from "./tproxy/native.js"
import { execRun, type Run } from "./tproxy/rules.js"
import type { Exec, TrustStoreKind } from "./tproxy/trustStore.js"

/** What the mode needs from the machine; tests may give their own. */
export interface TproxySystemShape {
  /** Runs ip, iptables, ip6tables, iptables-save... (rules.ts). */
  readonly run: Run
  /** Runs the trust store's commands (update-ca-certificates, sudo). */
  readonly exec: Exec
  readonly native: () => TproxyNativeLoad
  /** Whether this process may change the firewall (root, or CAP_NET_ADMIN). */
  readonly privileged: () => boolean
  readonly root: () => boolean
  /** The trust stores looked for (default: Debian's, then Fedora's). */
  readonly trustStores?: ReadonlyArray<TrustStoreKind>
  /** Tools that must be on PATH. */
  readonly missingTools: () => ReadonlyArray<string>
}

/** CAP_NET_ADMIN (bit 12) in the effective set of /proc/self/status. */
const hasNetAdmin = (): boolean => {
  try {
    const m = /^CapEff:\s*([0-9a-f]+)$/m.exec(fs.readFileSync("/proc/self/status", "utf8"))
    return m !== null && (BigInt(`0x${m[1]}`) & (1n << 12n)) !== 0n
  } catch {
    return false
  }
}

/** Whether a tool is on PATH (or in /usr/sbin, /sbin). */
const onPath = (tool: string): boolean =>
  (process.env["PATH"] ?? "")
    .split(path.delimiter)
    .concat(["/usr/sbin", "/sbin"])
    .some((dir) => dir !== "" && fs.existsSync(path.join(dir, tool)))

const TOOLS: ReadonlyArray<readonly [string, string]> = [
  ["ip", "iproute2"],
  ["iptables", "iptables"],
  ["ip6tables", "iptables"],
  ["iptables-save", "iptables"]
]

/** This machine: the commands run for real, the privileges read from the process, the tools looked for on PATH. */
export const realTproxySystem: TproxySystemShape = {
  run: execRun,
  exec: execRun,
  native: loadTproxyNative,
  privileged: () => process.platform === "linux" && (process.getuid?.() === 0 || hasNetAdmin()),
  root: () => process.getuid?.() === 0,
  missingTools: () => TOOLS.filter(([tool]) => !onPath(tool)).map(([tool, pkg]) => `${tool} (apt-get install ${pkg})`)
}

/** The machine the transparent capture changes (this one, unless a test gives its own). */
export class TproxySystem extends Context.Tag("gateway/TproxySystem")<TproxySystem, TproxySystemShape>() {
  static readonly layer = Layer.succeed(TproxySystem, realTproxySystem)
}
