/**
 * Custom hosts (capture mode 2, docs/inspector.md): the saved hosts become a marked block in the
 * hosts file, pointing them at the MITM TLS server on this machine, which runs while any host is
 * enabled. A change that cannot be applied is undone in the saved hosts.
 */
import * as Effect from "effect/Effect"
import { BadRequest, Conflict, Forbidden, NotFound } from "../../domain/errors.js"
import type { HostList } from "../../domain/inspector.js"
import type { KeyValueShape } from "../../platform/store/KeyValue.js"
import { HostsFileError, readBlockHosts, setBlockHosts, validateHostName } from "./capture/hostsFile.js"
import { startMitmServer } from "./capture/mitm.js"
import { type CaptureState, type CustomHost, describe, HOSTS_NS, type ListenerSettings, loadHosts } from "./captureState.js"
import type { InspectorConfigShape } from "./InspectorConfig.js"
import type { InspectorSink } from "./types.js"

type Hosts = typeof HostList.Type

export interface CustomHostsDeps {
  readonly config: InspectorConfigShape
  readonly sink: InspectorSink
  readonly kv: KeyValueShape
  /** Runs an effect of the layer's runtime from a promise. */
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  readonly state: CaptureState
  readonly listeners: ListenerSettings
}

/** A host to add (`capture-modes/hosts`). */
export interface AddHost {
  readonly host: string
  readonly kind?: "llm" | "app" | "custom" | undefined
  readonly enabled?: boolean | undefined
}

/** The custom hosts: the hosts file's block and the MITM server kept as the saved hosts say (`sync`), and their list, add, remove and
 * patch. */
export const makeCustomHosts = ({ config, sink, kv, run, state, listeners }: CustomHostsDeps) => {
  const { ca, upstreamCa, resolveHost, verifyUpstream, dial } = listeners
  const load = loadHosts(kv)

  /** The hosts file's block and the MITM server, as the saved hosts say. */
  const sync = async (): Promise<void> => {
    const hosts = await run(load)
    const enabled = hosts.filter((h) => h.enabled).map((h) => h.host)
    // The hosts file is touched only when there is something to write or a block to remove.
    const written = await readBlockHosts(config.hostsFile).catch(() => [] as Array<string>)
    if (enabled.length > 0 || written.length > 0) await setBlockHosts(config.hostsFile, enabled)
    if (enabled.length > 0 && !state.mitm) {
      try {
        state.mitm = await startMitmServer({
          host: "127.0.0.1",
          port: config.mitmPort,
          sink,
          ca,
          hosts: () => new Map(state.hosts.map((h) => [h.host, { kind: h.kind, enabled: h.enabled }])),
          ...(upstreamCa ? { upstreamCa } : {}),
          ...(resolveHost ? { resolve: resolveHost } : {}),
          verifyUpstream,
          idleTimeoutMs: config.idleTimeoutMs,
          dial
        })
        state.mitmError = null
      } catch (e) {
        state.mitmError = `the MITM server could not listen on port ${config.mitmPort}: ${describe(e)} (ports below 1024 need root or CAP_NET_BIND_SERVICE; INSPECTOR_MITM_PORT changes it)`
      }
    } else if (enabled.length === 0 && state.mitm) {
      const m = state.mitm
      state.mitm = undefined
      await m.close()
    }
  }

  /** At start: the hosts file's block and the MITM server as saved (a block a crash left behind is rewritten). */
  const restore = Effect.promise(() =>
    sync().catch((e) => {
      state.mitmError = `custom hosts could not be applied: ${describe(e)}`
    })
  )

  const refresh = Effect.tap(load, (h) =>
    Effect.sync(() => {
      state.hosts = h
    })
  )
  const failure = (e: unknown) =>
    e instanceof HostsFileError && /EACCES|EPERM|elevated/i.test(e.message)
      ? new Forbidden({ message: e.message })
      : new BadRequest({ message: e instanceof Error ? e.message : String(e) })
  const hostOf = (host: string) => state.hosts.find((h) => h.host === host.toLowerCase())

  const list: Effect.Effect<Hosts> = Effect.map(refresh, (hosts) => ({
    hosts,
    hostsFile: config.hostsFile,
    mitm: { running: state.mitm !== undefined, port: state.mitm?.port ?? config.mitmPort, error: state.mitmError }
  }))
  const add = (input: AddHost): Effect.Effect<CustomHost, BadRequest | Conflict | Forbidden> =>
    Effect.gen(function* () {
      let host: string
      try {
        host = validateHostName(input.host.trim().toLowerCase())
      } catch (e) {
        return yield* Effect.fail(new BadRequest({ message: describe(e) }))
      }
      yield* refresh
      if (hostOf(host)) return yield* Effect.fail(new Conflict({ message: `${host} is already a custom host` }))
      const entry: CustomHost = { host, kind: input.kind ?? "custom", enabled: input.enabled ?? true, addedAt: Date.now() }
      yield* kv.set(HOSTS_NS, host, JSON.stringify(entry))
      yield* refresh
      const failed = yield* Effect.promise(() =>
        sync().then(
          () => undefined,
          (e: unknown) => e
        )
      )
      if (failed !== undefined) {
        yield* kv.remove(HOSTS_NS, host)
        yield* refresh
        return yield* Effect.fail(failure(failed))
      }
      return entry
    })
  const remove = (host: string): Effect.Effect<CustomHost, NotFound | Forbidden> =>
    Effect.gen(function* () {
      yield* refresh
      const found = hostOf(host)
      if (!found) return yield* Effect.fail(new NotFound({ message: `${host} is not a custom host` }))
      yield* kv.remove(HOSTS_NS, found.host)
      yield* refresh
      const failed = yield* Effect.promise(() =>
        sync().then(
          () => undefined,
          (e: unknown) => e
        )
      )
      if (failed !== undefined) return yield* Effect.fail(new Forbidden({ message: describe(failed) }))
      return found
    })
  const patch = (host: string, enabled: boolean): Effect.Effect<CustomHost, NotFound | Forbidden | Conflict> =>
    Effect.gen(function* () {
      yield* refresh
      const found = hostOf(host)
      if (!found) return yield* Effect.fail(new NotFound({ message: `${host} is not a custom host` }))
      const next = { ...found, enabled }
      yield* kv.set(HOSTS_NS, found.host, JSON.stringify(next))
      yield* refresh
      const failed = yield* Effect.promise(() =>
        sync().then(
          () => undefined,
          (e: unknown) => e
        )
      )
      if (failed !== undefined) {
        yield* kv.set(HOSTS_NS, found.host, JSON.stringify(found))
        yield* refresh
        return yield* Effect.fail(new Forbidden({ message: describe(failed) }))
      }
      return next
    })

  return { sync, restore, list, add, remove, patch }
}
