/**
 * A transparent-capture session (Tproxy.ts): its start, step by step, after what it will change
 * is recorded, each step undone when a later one fails; its stop; and the cleanup, at the next
 * start, of what a dead process's record names.
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { BadRequest, Conflict, Forbidden, ServiceUnavailable } from "../../domain/errors.js"
import type { TproxyStart } from "../../domain/inspector.js"
import type { EgressMarkShape } from "../../upstream/client/EgressMark.js"
import { loadOrCreateCa } from "./capture/ca.js"
import type { InspectorConfigShape } from "./InspectorConfig.js"
import { type RunningTransparentListener, startTransparentListener, TransparentListenError } from "./tproxy/listener.js"
import { markedSocket } from "./tproxy/native.js"
import { applyRules, removeLeftovers, revertRules, type TproxyConfig, TproxyRulesError, validateTproxyConfig } from "./tproxy/rules.js"
import { installCa, removeCa, TrustStoreError } from "./tproxy/trustStore.js"
import type { TproxySystemShape } from "./TproxySystem.js"
import type { InspectorSink } from "./types.js"

type StartBody = typeof TproxyStart.Type
export type TproxyFailure = BadRequest | Conflict | Forbidden | ServiceUnavailable

/** The record's file name, under the inspector's directory. */
export const TPROXY_STATE_FILE = "tproxy-state.json"

const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/** What a start records before it changes anything: enough to undo it after a crash. */
interface Recorded {
  readonly config: TproxyConfig
  readonly pid: number
  readonly startedAt: number
}

/** The record in `stateFile`: read, written before a start changes anything, cleared once everything is undone. */
export const makeRecord = (stateFile: string) => {
  const read = (): Recorded | undefined => {
    try {
      return JSON.parse(fs.readFileSync(stateFile, "utf8")) as Recorded
    } catch {
      return undefined
    }
  }
  const write = (r: Recorded) => {
    fs.mkdirSync(path.dirname(stateFile), { recursive: true, mode: 0o700 })
    fs.writeFileSync(stateFile, JSON.stringify(r), { mode: 0o600 })
  }
  const clear = () => fs.rmSync(stateFile, { force: true })
  return { read, write, clear }
}

/** A running session: what it applied, its listener, the trust store's slot. */
export interface Session {
  readonly config: TproxyConfig
  readonly listener: RunningTransparentListener
  readonly startedAt: number
  readonly trust: { installed: boolean; path: string | null; note: string | null }
  /** Kept in memory for the session only (never written or logged): a non-root gateway needs it again to remove the slot. */
  readonly sudoPassword: string | undefined
}

/** The mode's state: the session (one at a time), its intercepted connections, the last error. */
export interface TproxyState {
  session: Session | undefined
  interceptCount: number
  lastError: string | null
}

/** Whether the mode can run on this machine, or why not. */
export type Availability = { available: true } | { available: false; reason: string }

export interface TproxySessionDeps {
  readonly system: TproxySystemShape
  /** The mark the gateway's own connections carry while the rules divert traffic. */
  readonly egressMark: EgressMarkShape | undefined
  readonly config: InspectorConfigShape
  readonly sink: InspectorSink
  readonly upstreamCa: Array<string> | undefined
  readonly verifyUpstream: () => boolean
  readonly record: ReturnType<typeof makeRecord>
  readonly state: TproxyState
}

/** A session's start and stop, the mode's availability here, and the cleanup after a crash; made once per layer. */
export const makeTproxySessions = ({ system, egressMark, config, sink, upstreamCa, verifyUpstream, record, state }: TproxySessionDeps) => {
  const ca = () => loadOrCreateCa(config.caDir)
  const trustOptions = (sudoPassword?: string) => ({
    exec: system.exec,
    root: system.root(),
    ...(sudoPassword !== undefined ? { sudoPassword } : {}),
    ...(system.trustStores !== undefined ? { stores: system.trustStores } : {})
  })

  /** Whether the mode can run here (Linux, the addon, the privilege, the tools), or why not. */
  const availability = (): Availability => {
    if (process.platform !== "linux")
      return { available: false, reason: "not Linux: TPROXY, IP_TRANSPARENT and SO_MARK are Linux features" }
    const load = system.native()
    if (!load.available) return { available: false, reason: load.reason }
    if (!system.privileged())
      return {
        available: false,
        reason: "the gateway runs without CAP_NET_ADMIN: transparent capture changes the firewall and needs root (or that capability)"
      }
    const missing = system.missingTools()
    if (missing.length > 0) return { available: false, reason: `missing on this machine: ${missing.join(", ")}` }
    return { available: true }
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
    record.clear()
    return problems
  }

  /** At start: what a process that died while capturing left (its record) is removed, before anything else. */
  const afterCrash = Effect.gen(function* () {
    const left = record.read()
    if (left !== undefined) {
      const problems = yield* Effect.promise(() => teardown(undefined, left.config))
      state.lastError = problems.length > 0 ? `cleanup after a crash: ${problems.join("; ")}` : null
      yield* Effect.logWarning(
        `inspector: transparent capture was left running by process ${left.pid}: its firewall rules, routes and trust-store slot were removed${problems.length > 0 ? ` (${problems.join("; ")})` : ""}`
      )
    }
  })

  /** Stops the session (or undoes what the record names); its problems become the last error. */
  const stopNow = async (): Promise<void> => {
    const s = state.session
    state.session = undefined
    const problems = await teardown(s, s === undefined ? record.read()?.config : undefined)
    state.lastError = problems.length > 0 ? problems.join("; ") : null
  }

  /** Starts a session: the body checked, the record written, the listener, the rules, the CA in the trust store; a failure undoes every
   * step. */
  const startNow = async (body: StartBody | undefined): Promise<TproxyFailure | undefined> => {
    const checked = validateTproxyConfig(body)
    if (!checked.ok) return new BadRequest({ message: `invalid request: ${checked.field}: ${checked.message}` })
    if (state.session !== undefined)
      return new Conflict({
        message: "transparent capture is already running: one session at a time (DELETE /api/tools/agent-bridge/tproxy stops it)"
      })
    const a = availability()
    if (!a.available) return new ServiceUnavailable({ message: `transparent capture is unavailable here: ${a.reason}` })
    const cfg = checked.config
    let listener: RunningTransparentListener | undefined
    let rulesApplied = false
    const undo = async () => {
      if (listener !== undefined) await listener.close().catch(() => undefined)
      if (rulesApplied) await revertRules(cfg, system.run)
      egressMark?.set(undefined)
      record.clear()
    }
    try {
      // Rules a dead process left (tagged), before anything of this start.
      const previous = record.read()
      await removeLeftovers(previous?.config, system.run)
      record.write({ config: cfg, pid: process.pid, startedAt: Date.now() })
      const native = system.native()
      if (!native.available) throw new Error(native.reason)
      await ca()
      state.interceptCount = 0
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
            state.interceptCount++
          }
        })
      } catch (e) {
        await undo()
        if (e instanceof TransparentListenError && e.code === "EADDRINUSE")
          return new Conflict({ message: `onPort ${cfg.onPort}: ${e.message}` })
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
      state.session = { config: cfg, listener, startedAt: Date.now(), trust, sudoPassword: checked.sudoPassword }
      state.lastError = null
      return undefined
    } catch (e) {
      await undo()
      return new ServiceUnavailable({ message: `transparent capture could not start: ${describe(e)}` })
    }
  }

  return { availability, afterCrash, startNow, stopNow }
}
