/**
 * The transparent-decrypt capture mode (TPROXY, spec document 3 "Transparent capture";
 * docs/capture.md): `GET`, `POST`, `DELETE /api/tools/agent-bridge/tproxy`.
 *
 * Start, in order, each step undone when a later one fails: the config is validated (400 naming
 * the field, before any command runs); what this start will change is recorded in
 * `<DATA_DIR>/inspector/tproxy-state.json`; rules a dead process left are removed; the transparent
 * listener opens (the inspector's CA, its recording, its forwarding); the firewall steps are
 * applied (tproxy/rules.ts: a failed step reverts the others); the CA goes into the OS trust store
 * (tproxy/trustStore.ts). Stop is the reverse, and runs on DELETE, when the gateway stops
 * (SIGTERM included: this layer's finalizer) and, from the record, at the next start after a crash.
 *
 * One session at a time. Under `--workers` the mode lives on worker 1 (which holds the capture
 * listeners); the other workers forward their calls to it.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import { BadRequest, Conflict, Forbidden, ServiceUnavailable } from "../../domain/errors.js"
import type { TproxyStart, TproxyStatus } from "../../domain/inspector.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { EgressMark } from "../../upstream/client/egressMark.js"
import { loadOrCreateCa } from "./capture/ca.js"
import { Inspector } from "./Inspector.js"
import { failureOfRemote } from "./share.js"
import { startTransparentListener, TransparentListenError, type RunningTransparentListener } from "./tproxy/listener.js"
import { loadTproxyNative, markedSocket, type TproxyNativeLoad } from "./tproxy/native.js"
import {
  applyRules,
  describeChanges,
  describeRevert,
  execRun,
  type Run,
  removeLeftovers,
  revertRules,
  TPROXY_DEFAULTS,
  type TproxyConfig,
  TproxyRulesError,
  validateTproxyConfig
} from "./tproxy/rules.js"
import { type Exec, installCa, removeCa, TrustStoreError, type TrustStoreKind } from "./tproxy/trustStore.js"

type Status = typeof TproxyStatus.Type
type StartBody = typeof TproxyStart.Type
type TproxyFailure = BadRequest | Conflict | Forbidden | ServiceUnavailable

export interface TproxyShape {
  readonly status: Effect.Effect<Status, ServiceUnavailable>
  readonly start: (body: StartBody | undefined) => Effect.Effect<Status, TproxyFailure>
  readonly stop: Effect.Effect<Status, ServiceUnavailable>
}

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

export const realTproxySystem: TproxySystemShape = {
  run: execRun,
  exec: execRun,
  native: loadTproxyNative,
  privileged: () => process.platform === "linux" && (process.getuid?.() === 0 || hasNetAdmin()),
  root: () => process.getuid?.() === 0,
  missingTools: () => TOOLS.filter(([tool]) => !onPath(tool)).map(([tool, pkg]) => `${tool} (apt-get install ${pkg})`)
}

export class TproxySystem extends Context.Tag("gateway/TproxySystem")<TproxySystem, TproxySystemShape>() {
  static readonly layer = Layer.succeed(TproxySystem, realTproxySystem)
}

/** What a start records before it changes anything: enough to undo it after a crash. */
interface Recorded {
  readonly config: TproxyConfig
  readonly pid: number
  readonly startedAt: number
}

export const TPROXY_STATE_FILE = "tproxy-state.json"

const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))

export class Tproxy extends Context.Tag("gateway/InspectorTproxy")<Tproxy, TproxyShape>() {
  static readonly layer = Layer.scoped(
    Tproxy,
    Effect.gen(function* () {
      const inspector = yield* Inspector
      const node = inspector.node
      // `--workers`: worker 1 holds the capture listeners and this mode; the others forward to it.
      if (node !== undefined && !node.holdsCapture) {
        const call = <A>(op: string, args: unknown = null) => Effect.mapError(node.call(op, args), failureOfRemote) as Effect.Effect<A, never>
        return {
          status: call<Status>("tproxy.status"),
          start: (body) => call<Status>("tproxy.start", body ?? null),
          stop: call<Status>("tproxy.stop")
        } satisfies TproxyShape
      }
      const system = yield* TproxySystem
      const egressMark = Option.getOrUndefined(yield* Effect.serviceOption(EgressMark))
      const flags = yield* FeatureFlags
      const config = inspector.config
      const sink = inspector.core.sink
      const stateFile = path.join(config.caDir, TPROXY_STATE_FILE)
      const ca = () => loadOrCreateCa(config.caDir)
      const upstreamCa = config.upstreamCaFile ? [fs.readFileSync(config.upstreamCaFile, "utf8")] : undefined
      // A restart flag: its value at start holds until the next one (docs/feature-flags.md).
      const verifyAtStart = !(yield* flags.enabled("MITM_DISABLE_TLS_VERIFY"))
      const verifyUpstream = () => verifyAtStart
      const trustOptions = (sudoPassword?: string) => ({
        exec: system.exec,
        root: system.root(),
        ...(sudoPassword !== undefined ? { sudoPassword } : {}),
        ...(system.trustStores !== undefined ? { stores: system.trustStores } : {})
      })

      interface Session {
        readonly config: TproxyConfig
        readonly listener: RunningTransparentListener
        readonly startedAt: number
        readonly trust: { installed: boolean; path: string | null; note: string | null }
        /** Kept in memory for the session only (never written or logged): a non-root gateway needs it again to remove the slot. */
        readonly sudoPassword: string | undefined
      }
      let session: Session | undefined
      // Starts and stops run one after the other: a DELETE during a start waits for it.
      let queue: Promise<unknown> = Promise.resolve()
      const serial = <A>(f: () => Promise<A>): Promise<A> => {
        const next = queue.then(f, f)
        queue = next.catch(() => undefined)
        return next
      }
      let interceptCount = 0
      let lastError: string | null = null

      const readRecord = (): Recorded | undefined => {
        try {
          return JSON.parse(fs.readFileSync(stateFile, "utf8")) as Recorded
        } catch {
          return undefined
        }
      }
      const writeRecord = (r: Recorded) => {
        fs.mkdirSync(path.dirname(stateFile), { recursive: true, mode: 0o700 })
        fs.writeFileSync(stateFile, JSON.stringify(r), { mode: 0o600 })
      }
      const clearRecord = () => fs.rmSync(stateFile, { force: true })

      const availability = (): { available: true } | { available: false; reason: string } => {
        if (process.platform !== "linux") return { available: false, reason: "not Linux: TPROXY, IP_TRANSPARENT and SO_MARK are Linux features" }
        const load = system.native()
        if (!load.available) return { available: false, reason: load.reason }
        if (!system.privileged())
          return { available: false, reason: "the gateway runs without CAP_NET_ADMIN: transparent capture changes the firewall and needs root (or that capability)" }
        const missing = system.missingTools()
        if (missing.length > 0) return { available: false, reason: `missing on this machine: ${missing.join(", ")}` }
        return { available: true }
      }

      const status = (): Status => {
        const a = availability()
        const shown = session?.config ?? TPROXY_DEFAULTS
        return {
          running: session !== undefined,
          available: a.available,
          reason: a.available ? null : a.reason,
          interceptCount,
          port: session?.listener.port ?? TPROXY_DEFAULTS.onPort,
          startedAt: session?.startedAt ?? null,
          config: session ? { ...session.config } : null,
          trustStore: session?.trust ?? { installed: false, path: null, note: null },
          commands: { applied: session ? [...describeChanges(shown)] : [], revert: [...describeRevert(shown)] },
          lastError
        }
      }

      /** Undoes everything a session (or a dead process's record) put in place; never throws. */
      const teardown = async (s: Session | undefined, recorded: TproxyConfig | undefined): Promise<Array<string>> => {
        const problems: Array<string> = []
        if (s !== undefined) await s.listener.close().catch((e) => problems.push(`closing the listener: ${describe(e)}`))
        const cfg = s?.config ?? recorded
        if (cfg !== undefined) {
          await revertRules(cfg, system.run)
          // Anything a crash in the middle left, with the tags and the recorded routes.
          await removeLeftovers(cfg, system.run)
        }
        // Only once no rule diverts anything: the gateway's own connections go out unmarked again.
        egressMark?.set(undefined)
        await removeCa(trustOptions(s?.sudoPassword)).catch((e) => problems.push(`removing the CA from the trust store: ${describe(e)}`))
        clearRecord()
        return problems
      }

      // ---------------------------------------------------------------- after a crash
      const left = readRecord()
      if (left !== undefined) {
        const problems = yield* Effect.promise(() => teardown(undefined, left.config))
        lastError = problems.length > 0 ? `cleanup after a crash: ${problems.join("; ")}` : null
        yield* Effect.logWarning(
          `inspector: transparent capture was left running by process ${left.pid}: its firewall rules, routes and trust-store slot were removed${problems.length > 0 ? ` (${problems.join("; ")})` : ""}`
        )
      }

      const stopNow = async (): Promise<void> => {
        const s = session
        session = undefined
        const problems = await teardown(s, s === undefined ? readRecord()?.config : undefined)
        lastError = problems.length > 0 ? problems.join("; ") : null
      }

      yield* Effect.addFinalizer(() => Effect.promise(() => serial(() => (session !== undefined || readRecord() !== undefined ? stopNow() : Promise.resolve()))))

      const startNow = async (body: StartBody | undefined): Promise<TproxyFailure | undefined> => {
        const checked = validateTproxyConfig(body)
        if (!checked.ok) return new BadRequest({ message: `invalid request: ${checked.field}: ${checked.message}` })
        if (session !== undefined)
          return new Conflict({ message: "transparent capture is already running: one session at a time (DELETE /api/tools/agent-bridge/tproxy stops it)" })
        const a = availability()
        if (!a.available) return new ServiceUnavailable({ message: `transparent capture is unavailable here: ${a.reason}` })
        const cfg = checked.config
        let listener: RunningTransparentListener | undefined
        let rulesApplied = false
        const undo = async () => {
          if (listener !== undefined) await listener.close().catch(() => undefined)
          if (rulesApplied) await revertRules(cfg, system.run)
          egressMark?.set(undefined)
          clearRecord()
        }
        try {
          // Rules a dead process left (tagged), before anything of this start.
          const previous = readRecord()
          await removeLeftovers(previous?.config, system.run)
          writeRecord({ config: cfg, pid: process.pid, startedAt: Date.now() })
          const native = system.native()
          if (!native.available) throw new Error(native.reason)
          await ca()
          interceptCount = 0
          try {
            listener = await startTransparentListener({
              native: native.native,
              port: cfg.onPort,
              bypassMark: cfg.bypassMark,
              sink,
              ca,
              upstreamCa,
              verifyUpstream,
              idleTimeoutMs: config.idleTimeoutMs,
              onIntercept: () => {
                interceptCount++
              }
            })
          } catch (e) {
            await undo()
            if (e instanceof TransparentListenError && e.code === "EADDRINUSE") return new Conflict({ message: `onPort ${cfg.onPort}: ${e.message}` })
            return new ServiceUnavailable({ message: `the transparent listener could not start: ${describe(e)}` })
          }
          // From before the first rule: the gateway's own new connections (to providers, by the
          // other capture modes) carry the bypass mark, or the rules would bring them back here.
          const nativeAddon = native.native
          egressMark?.set((address, port, timeoutMs) => markedSocket(nativeAddon, address, port, cfg.bypassMark, timeoutMs))
          try {
            await applyRules(cfg, system.run)
            rulesApplied = true
          } catch (e) {
            await undo()
            if (e instanceof TproxyRulesError && e.missingTool !== undefined) return new ServiceUnavailable({ message: e.message })
            return new Conflict({ message: `${describe(e)}; nothing was left applied` })
          }
          let trust: Session["trust"]
          try {
            const slot = await installCa((await ca()).certPem, trustOptions(checked.sudoPassword))
            trust = { installed: true, path: slot, note: null }
          } catch (e) {
            if (e instanceof TrustStoreError && e.reason === "unsupported") {
              trust = { installed: false, path: null, note: e.message }
            } else {
              // The slot may be written with the store's rebuild failed: it goes too.
              await removeCa(trustOptions(checked.sudoPassword)).catch(() => undefined)
              await undo()
              const message = `the CA could not be installed in the OS trust store: ${describe(e)}; nothing was left applied`
              return e instanceof TrustStoreError && e.reason === "permission" ? new Forbidden({ message }) : new Conflict({ message })
            }
          }
          session = { config: cfg, listener, startedAt: Date.now(), trust, sudoPassword: checked.sudoPassword }
          lastError = null
          return undefined
        } catch (e) {
          await undo()
          return new ServiceUnavailable({ message: `transparent capture could not start: ${describe(e)}` })
        }
      }

      const shape: TproxyShape = {
        status: Effect.sync(status),
        start: (body) =>
          Effect.flatMap(
            Effect.promise(() => serial(() => startNow(body))),
            (failure) => {
              if (failure === undefined) return Effect.succeed(status())
              // A refused body or a second start changed nothing: not the mode's error.
              if (failure._tag !== "BadRequest" && !failure.message.startsWith("transparent capture is already running")) lastError = failure.message
              return Effect.fail(failure)
            }
          ),
        stop: Effect.map(
          Effect.promise(() => serial(stopNow)),
          status
        )
      }

      node?.serve((op, args) => {
        const effect: Effect.Effect<unknown, TproxyFailure> | undefined =
          op === "tproxy.status" ? shape.status : op === "tproxy.start" ? shape.start((args ?? undefined) as StartBody | undefined) : op === "tproxy.stop" ? shape.stop : undefined
        if (effect === undefined) return Promise.resolve({ failure: { tag: "BadRequest", message: `unknown transparent-capture call ${op}` } })
        return Effect.runPromise(
          Effect.match(effect, {
            onSuccess: (value) => ({ value }),
            onFailure: (e) => ({ failure: { tag: e._tag, message: e.message } })
          })
        )
      }, "tproxy.")
      return shape
    })
  )
}
