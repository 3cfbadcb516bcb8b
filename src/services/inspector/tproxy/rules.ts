import { execFile } from "node:child_process"
import { constants } from "node:os"

/**
 * The firewall side of TPROXY, IPv4 and IPv6: a policy rule and a local route table loop marked packets back through `lo`, mangle
 * OUTPUT marks new connections to `dport` then each of their packets, and PREROUTING hands them to the listener on `onPort`. Why
 * each rule reads as it does, and how a crash is cleaned up: docs/capture.md#why-the-rules-are-written-this-way.
 */

export const TPROXY_TAG = "gateway-tproxy"

export interface TproxyConfig {
  /** Destination TCP port intercepted. */
  readonly dport: number
  /** Packet and connection mark of intercepted traffic. */
  readonly mark: number
  /** Port of the transparent listener. */
  readonly onPort: number
  /** Policy-routing table id. */
  readonly routeTable: number
  /** Socket mark of the listener's own upstream connections: never intercepted. */
  readonly bypassMark: number
}

export const TPROXY_DEFAULTS: TproxyConfig = { dport: 443, mark: 0x2333, onPort: 8443, routeTable: 233, bypassMark: 0x539 }

/** Marks and routing-table ids are 32-bit in the kernel. */
const MAX_U32 = 0xffffffff
/** The kernel's own tables: `default`, `main`, `local`. A local default route in one of them would take every packet. */
const RESERVED_TABLES: ReadonlyArray<number> = [253, 254, 255]

type FieldName = keyof TproxyConfig | "sudoPassword"
const FIELDS: ReadonlyArray<FieldName> = ["dport", "mark", "onPort", "routeTable", "bypassMark", "sudoPassword"]

export type ValidationResult = { ok: true; config: TproxyConfig; sudoPassword?: string } | { ok: false; field: string; message: string }

const checkInteger = (value: unknown, min: number, max: number, what: string): string | undefined => {
  if (typeof value !== "number") return `must be ${what}, got ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`
  if (!Number.isInteger(value)) return `must be ${what}, got ${value}`
  if (value < min || value > max) return `must be ${what}, got ${value}`
  return undefined
}

/**
 * Validates a start body before any command runs: the config with the defaults filled in, or
 * the first bad field and why (a 400 naming the field). No body (undefined or null) is the
 * defaults. `sudoPassword` is returned apart and never appears in a message.
 */
export const validateTproxyConfig = (body: unknown): ValidationResult => {
  if (body === undefined || body === null) return { ok: true, config: TPROXY_DEFAULTS }
  if (typeof body !== "object" || Array.isArray(body)) return { ok: false, field: "body", message: "the start body must be a JSON object" }
  const input = body as Record<string, unknown>
  for (const key of Object.keys(input))
    if (!(FIELDS as ReadonlyArray<string>).includes(key))
      return { ok: false, field: key, message: `unknown field; the start body takes ${FIELDS.join(", ")}` }
  const port = "an integer from 1 to 65535"
  const positive = `an integer from 1 to ${MAX_U32} (32 bits)`
  const rules: ReadonlyArray<readonly [keyof TproxyConfig, number, number, string]> = [
    ["dport", 1, 65535, port],
    ["mark", 1, MAX_U32, positive],
    ["onPort", 1, 65535, port],
    ["routeTable", 1, MAX_U32, positive],
    ["bypassMark", 1, MAX_U32, positive]
  ]
  const config: Record<keyof TproxyConfig, number> = { ...TPROXY_DEFAULTS }
  for (const [field, min, max, what] of rules) {
    if (input[field] === undefined) continue
    const problem = checkInteger(input[field], min, max, what)
    if (problem !== undefined) return { ok: false, field, message: problem }
    config[field] = input[field] as number
  }
  if (RESERVED_TABLES.includes(config.routeTable))
    return {
      ok: false,
      field: "routeTable",
      message: `must not be one of the kernel's own tables (253 default, 254 main, 255 local), got ${config.routeTable}`
    }
  if (config.bypassMark === config.mark) {
    // Name the field the caller set: a `mark` equal to the default bypass mark is the `mark`'s fault.
    const field = input["bypassMark"] !== undefined ? "bypassMark" : "mark"
    return { ok: false, field, message: `the bypass mark must differ from the mark (both ${hex(config.mark)})` }
  }
  const sudoPassword = input["sudoPassword"]
  if (sudoPassword !== undefined && typeof sudoPassword !== "string")
    return { ok: false, field: "sudoPassword", message: `must be a string, got ${sudoPassword === null ? "null" : typeof sudoPassword}` }
  return sudoPassword === undefined ? { ok: true, config } : { ok: true, config, sudoPassword }
}

/** Runs one command (with `input` on its standard input when given); resolves with its exit code, never rejects. */
export type Run = (
  command: string,
  args: ReadonlyArray<string>,
  input?: string
) => Promise<{ code: number; stdout: string; stderr: string }>

/** Exit code `execRun` reports for a command that is not installed (as a shell does). */
export const NOT_FOUND = 127
/** Exit code `execRun` reports for a command killed after its 60 s. */
export const TIMED_OUT = 124

/**
 * `execFile` with a 60 s timeout (update-ca-certificates runs its hooks) and the C locale; never rejects: a non-zero exit resolves with
 * its code, a command that is not installed with 127 (ENOENT), one that cannot be started with
 * 126, a timeout with 124, a death by signal with 128 + the signal's number.
 */
export const execRun: Run = (command, args, input) =>
  new Promise((resolve) => {
    const child = execFile(
      command,
      [...args],
      { timeout: 60_000, encoding: "utf8", windowsHide: true, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, LC_ALL: "C" } },
      (err, stdout, stderr) => {
        if (err === null) return resolve({ code: 0, stdout, stderr })
        const e = err as {
          readonly code?: number | string | null
          readonly killed?: boolean
          readonly signal?: NodeJS.Signals | null
          readonly message: string
        }
        if (typeof e.code === "number") return resolve({ code: e.code, stdout, stderr })
        if (e.code === "ENOENT") return resolve({ code: NOT_FOUND, stdout, stderr: `${stderr}${command}: not found (spawn ENOENT)` })
        if (e.killed) return resolve({ code: TIMED_OUT, stdout, stderr: `${stderr}${command}: timed out after 60 s` })
        if (e.signal)
          return resolve({ code: 128 + (constants.signals[e.signal] ?? 0), stdout, stderr: `${stderr}${command}: killed by ${e.signal}` })
        resolve({ code: 126, stdout, stderr: `${stderr}${command}: ${e.message}` })
      }
    )
    child.stdin?.on("error", () => undefined)
    child.stdin?.end(input)
  })

/** A `Run` that cannot reject, whatever it is given: a rejection counts as a failed command. */
const guarded =
  (run: Run): Run =>
  async (command, args) => {
    try {
      return await run(command, args)
    } catch (e) {
      const code = (e as NodeJS.ErrnoException | undefined)?.code === "ENOENT" ? NOT_FOUND : 126
      return { code, stdout: "", stderr: e instanceof Error ? e.message : String(e) }
    }
  }

export interface RuleStep {
  readonly step: 1 | 2 | 3 | 4
  readonly family: 4 | 6
  readonly apply: readonly [string, ReadonlyArray<string>]
  readonly revert: readonly [string, ReadonlyArray<string>]
  readonly describe: string
}

const hex = (n: number) => `0x${n.toString(16)}`

/** `-w 5`: with the legacy backend, wait up to 5 s for another program's xtables lock instead of failing (nf_tables ignores it). */
const iptables = (family: 4 | 6, op: "-A" | "-D", chain: string, rule: ReadonlyArray<string>): readonly [string, ReadonlyArray<string>] => [
  family === 4 ? "iptables" : "ip6tables",
  ["-w", "5", "-t", "mangle", op, chain, ...rule]
]

const comment = ["-m", "comment", "--comment", TPROXY_TAG]

/**
 * The commands in apply order: step 1 IPv4, step 1 IPv6, step 2 IPv4, step 2 IPv6, step 3
 * (CONNMARK on the SYN) IPv4, IPv6, step 3 (MARK from the connection) IPv4, IPv6, step 4 IPv4,
 * IPv6: each stage for both families before the next. Step 3 is two rules per family, 3a before
 * 3b in the chain (3b sets the packet mark of the SYN from the connection mark 3a just set).
 * Revert is the same list backwards.
 */
export const planSteps = (config: TproxyConfig): ReadonlyArray<RuleStep> => {
  const M = hex(config.mark)
  const B = hex(config.bypassMark)
  const D = String(config.dport)
  const T = String(config.routeTable)
  const P = String(config.onPort)
  const families = [4, 6] as const
  const v = (family: 4 | 6) => `IPv${family}`
  const ruleSpec = ["fwmark", M, "lookup", T]
  const routeSpec = (family: 4 | 6) => ["local", family === 4 ? "0.0.0.0/0" : "::/0", "dev", "lo", "table", T]
  const connmark = [
    ...[
      "-p",
      "tcp",
      "--dport",
      D,
      "--syn",
      "-m",
      "mark",
      "!",
      "--mark",
      B,
      "-m",
      "addrtype",
      "!",
      "--dst-type",
      "LOCAL",
      "-m",
      "conntrack",
      "--ctstate",
      "NEW"
    ],
    ...comment,
    ...["-j", "CONNMARK", "--set-mark", M]
  ]
  const mark = [
    ...["-p", "tcp", "--dport", D, "-m", "mark", "!", "--mark", B, "-m", "connmark", "--mark", M],
    ...comment,
    ...["-j", "MARK", "--set-mark", M]
  ]
  const tproxy = [
    ...["-p", "tcp", "--dport", D, "-m", "mark", "--mark", M],
    ...comment,
    ...["-j", "TPROXY", "--on-port", P, "--tproxy-mark", M]
  ]
  return [
    ...families.map(
      (family): RuleStep => ({
        step: 1,
        family,
        apply: ["ip", [`-${family}`, "rule", "add", ...ruleSpec]],
        revert: ["ip", [`-${family}`, "rule", "del", ...ruleSpec]],
        describe: `${v(family)} policy rule: packets marked ${M} are routed by table ${T}`
      })
    ),
    ...families.map(
      (family): RuleStep => ({
        step: 2,
        family,
        apply: ["ip", [`-${family}`, "route", "add", ...routeSpec(family)]],
        revert: ["ip", [`-${family}`, "route", "del", ...routeSpec(family)]],
        describe: `${v(family)} route: in table ${T} every destination is local, via lo`
      })
    ),
    ...families.map(
      (family): RuleStep => ({
        step: 3,
        family,
        apply: iptables(family, "-A", "OUTPUT", connmark),
        revert: iptables(family, "-D", "OUTPUT", connmark),
        describe: `${v(family)} mangle OUTPUT: a new TCP connection to port ${D} (its SYN) not carrying the bypass mark ${B} and not to a local address gets the connection mark ${M}`
      })
    ),
    ...families.map(
      (family): RuleStep => ({
        step: 3,
        family,
        apply: iptables(family, "-A", "OUTPUT", mark),
        revert: iptables(family, "-D", "OUTPUT", mark),
        describe: `${v(family)} mangle OUTPUT: every packet to port ${D} of a connection marked ${M} gets the packet mark ${M}, which reroutes it through lo`
      })
    ),
    ...families.map(
      (family): RuleStep => ({
        step: 4,
        family,
        apply: iptables(family, "-A", "PREROUTING", tproxy),
        revert: iptables(family, "-D", "PREROUTING", tproxy),
        describe: `${v(family)} mangle PREROUTING: TCP packets to port ${D} marked ${M} go to the transparent listener on port ${P}`
      })
    )
  ]
}

const PACKAGES: Record<string, string> = {
  ip: "iproute2",
  iptables: "iptables",
  ip6tables: "iptables",
  "iptables-save": "iptables",
  "ip6tables-save": "iptables"
}

/** Quotes an argument for a POSIX shell when it needs it. */
const shellWord = (arg: string) => (/^[A-Za-z0-9_@%+=:,./!-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`)
const commandLine = ([command, args]: readonly [string, ReadonlyArray<string>]) => [command, ...args].map(shellWord).join(" ")

/** A firewall step failed: which one, the command, what it printed; `missingTool` when the command is not installed. */
export class TproxyRulesError extends Error {
  readonly _tag = "TproxyRulesError"
  override readonly name = "TproxyRulesError"
  readonly step: 1 | 2 | 3 | 4
  readonly family: 4 | 6
  readonly command: string
  readonly stderr: string
  readonly exitCode: number
  readonly missingTool: string | undefined

  constructor(step: RuleStep, result: { readonly code: number; readonly stderr: string }) {
    const command = commandLine(step.apply)
    const tool = step.apply[0]
    const missing = result.code === NOT_FOUND ? tool : undefined
    const detail = result.stderr.trim()
    super(
      missing !== undefined
        ? `transparent capture firewall step ${step.step} (IPv${step.family}) failed: ${tool} is not installed; install it (apt install ${PACKAGES[tool] ?? tool}). Command: ${command}`
        : `transparent capture firewall step ${step.step} (IPv${step.family}: ${step.describe}) failed with exit code ${result.code}: ${command}${detail ? `: ${detail}` : ""}`
    )
    this.step = step.step
    this.family = step.family
    this.command = command
    this.stderr = result.stderr
    this.exitCode = result.code
    this.missingTool = missing
  }
}

const revertSteps = async (steps: ReadonlyArray<RuleStep>, run: Run) => {
  for (const step of [...steps].reverse()) await run(step.revert[0], step.revert[1])
}

/**
 * Applies the steps in order. When one fails, the steps applied so far are reverted in reverse
 * order (failures ignored) and a `TproxyRulesError` naming the failed step is thrown: rules are
 * never left half applied. Assumes none of it is in place (after a crash, `removeLeftovers`
 * first: an existing route makes step 2 fail with "File exists").
 */
export const applyRules = async (config: TproxyConfig, run: Run): Promise<void> => {
  const safe = guarded(run)
  const applied: Array<RuleStep> = []
  for (const step of planSteps(config)) {
    const result = await safe(step.apply[0], step.apply[1])
    if (result.code !== 0) {
      await revertSteps(applied, safe)
      throw new TproxyRulesError(step, result)
    }
    applied.push(step)
  }
}

/** Runs every inverse command in reverse order, ignoring failures: safe at any time, applied or not. */
export const revertRules = async (config: TproxyConfig, run: Run): Promise<void> => {
  await revertSteps(planSteps(config), guarded(run))
}

/** Splits an iptables-save line into its arguments: whitespace-separated, `"..."` quoted with backslash escapes. */
export const splitSavedRule = (line: string): Array<string> => {
  const out: Array<string> = []
  let current = ""
  let inWord = false
  let quoted = false
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (quoted) {
      if (c === "\\" && i + 1 < line.length) current += line[++i]
      else if (c === '"') quoted = false
      else current += c
    } else if (c === '"') {
      quoted = true
      inWord = true
    } else if (c === " " || c === "\t") {
      if (inWord) out.push(current)
      current = ""
      inWord = false
    } else {
      current += c
      inWord = true
    }
  }
  if (inWord) out.push(current)
  return out
}

/** The `-A` rules of an `iptables-save -t mangle` output that carry exactly our comment, as their arguments (`-A CHAIN ...`). */
export const taggedRules = (saved: string): Array<Array<string>> => {
  const rules: Array<Array<string>> = []
  for (const raw of saved.split("\n")) {
    // `iptables-save -c` puts the counters first: `[12:648] -A ...`.
    const line = raw.trim().replace(/^\[\d+:\d+\]\s+/, "")
    if (!line.startsWith("-A ")) continue
    const args = splitSavedRule(line)
    if (args.some((arg, i) => arg === "--comment" && args[i + 1] === TPROXY_TAG)) rules.push(args)
  }
  return rules
}

/** At most this many copies of one ip rule are deleted (`ip rule add` twice adds it twice). */
const MAX_COPIES = 32

/**
 * Cleans up after a crash: every tagged iptables/ip6tables mangle rule, whatever config put it
 * there (read from `iptables-save -t mangle` / `ip6tables-save -t mangle`, each deleted with the
 * `-D` built from its saved line), then the ip rules and routes of the recorded config (every
 * copy). Best effort: failures are skipped. `removed` counts the commands that deleted something.
 */
export const removeLeftovers = async (recorded: TproxyConfig | undefined, run: Run): Promise<{ removed: number }> => {
  const safe = guarded(run)
  let removed = 0
  for (const [tool, save] of [
    ["iptables", "iptables-save"],
    ["ip6tables", "ip6tables-save"]
  ] as const) {
    const saved = await safe(save, ["-t", "mangle"])
    if (saved.code !== 0) continue
    for (const rule of taggedRules(saved.stdout)) {
      const result = await safe(tool, ["-w", "5", "-t", "mangle", "-D", ...rule.slice(1)])
      if (result.code === 0) removed++
    }
  }
  if (recorded !== undefined) {
    const routing = planSteps(recorded)
      .filter((s) => s.step <= 2)
      .reverse()
    for (const step of routing) {
      for (let i = 0; i < MAX_COPIES; i++) {
        const result = await safe(step.revert[0], step.revert[1])
        if (result.code !== 0) break
        removed++
      }
    }
  }
  return { removed }
}

/** The exact commands `applyRules` runs, in order, as shell lines (for the docs, GET, and by hand). */
export const describeChanges = (config: TproxyConfig): ReadonlyArray<string> => planSteps(config).map((s) => commandLine(s.apply))

/** The exact commands `revertRules` runs, in order: the undo by hand. */
export const describeRevert = (config: TproxyConfig): ReadonlyArray<string> =>
  planSteps(config)
    .map((s) => commandLine(s.revert))
    .reverse()
