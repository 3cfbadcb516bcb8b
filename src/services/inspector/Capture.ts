/**
 * The capture modes 2-4 (docs/inspector.md, "Capture modes"): custom hosts (a marked block in the
 * hosts file and the MITM TLS server), the explicit HTTP proxy (plain HTTP and CONNECT, TLS
 * interception opt-in) and the system-wide proxy (the OS proxy settings pointed at the listener,
 * auto-reverted by the guard timer). The local CA is made on first use under DATA_DIR.
 *
 * What changes the system is recorded before it is changed and reverted on stop: the hosts file's
 * block is removed and the system proxy reverted when the gateway stops (SIGTERM included: this
 * layer's finalizer), and at the next start after a crash (a block left behind is rewritten from
 * the saved hosts, a saved system-proxy state is reverted). Which modes were on is kept in the
 * database, so a restart brings them back.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import * as dns from "node:dns"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import { BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import type { CaptureModes, CustomHostSchema, HostList } from "../../domain/inspector.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { DnsResolver, systemResolve } from "../../upstream/client/egressGuard.js"
import { EgressMark } from "../../upstream/client/egressMark.js"
import type { Dial } from "./capture/forward.js"
import { caPemPath, type LocalCa, loadOrCreateCa } from "./capture/ca.js"
import { HostsFileError, readBlockHosts, removeBlock, setBlockHosts, validateHostName } from "./capture/hostsFile.js"
import { startMitmServer } from "./capture/mitm.js"
import { startHttpProxy } from "./capture/proxy.js"
import { makeSystemProxy, type SavedState } from "./capture/systemProxy.js"
import { Inspector } from "./Inspector.js"
import { INSPECTOR_CA_PATH } from "./paths.js"
import { failureOfRemote, type NodeShare, type RemoteFailure } from "./share.js"

type Modes = typeof CaptureModes.Type
type CustomHost = typeof CustomHostSchema.Type
type Hosts = typeof HostList.Type

/** Under `--workers` a call may fail with ServiceUnavailable: worker 1, which holds the listeners, did not answer. */
export interface CaptureShape {
  readonly modes: Effect.Effect<Modes, ServiceUnavailable>
  readonly httpProxy: (action: "start" | "stop") => Effect.Effect<Modes, Conflict | BadRequest | ServiceUnavailable>
  readonly systemProxy: (action: "apply" | "revert") => Effect.Effect<Modes, Conflict | BadRequest | ServiceUnavailable>
  readonly tlsIntercept: (enabled: boolean) => Effect.Effect<Modes, BadRequest | ServiceUnavailable>
  readonly hosts: {
    readonly list: Effect.Effect<Hosts, ServiceUnavailable>
    readonly add: (input: AddHost) => Effect.Effect<CustomHost, BadRequest | Conflict | Forbidden | ServiceUnavailable>
    readonly remove: (host: string) => Effect.Effect<CustomHost, NotFound | Forbidden | ServiceUnavailable>
    readonly patch: (host: string, enabled: boolean) => Effect.Effect<CustomHost, NotFound | Forbidden | Conflict | ServiceUnavailable>
  }
  readonly caPem: Effect.Effect<string, ServiceUnavailable>
}

interface AddHost {
  readonly host: string
  readonly kind?: "llm" | "app" | "custom" | undefined
  readonly enabled?: boolean | undefined
}

type CaptureFailure = BadRequest | Conflict | Forbidden | NotFound | ServiceUnavailable

/**
 * The capture modes on a worker other than worker 1 (`--workers`, share.ts): every call runs on
 * worker 1, which holds the listeners, the hosts file and the system proxy; its answer or its
 * error is this worker's.
 */
const forwarded = (node: NodeShare): CaptureShape => {
  const call = <A>(op: string, args: unknown = null) => Effect.mapError(node.call(op, args), failureOfRemote) as Effect.Effect<A, never>
  return {
    modes: call("modes"),
    httpProxy: (action) => call("httpProxy", action),
    systemProxy: (action) => call("systemProxy", action),
    tlsIntercept: (enabled) => call("tlsIntercept", enabled),
    hosts: {
      list: call("hosts.list"),
      add: (input) => call("hosts.add", input),
      remove: (host) => call("hosts.remove", host),
      patch: (host, enabled) => call("hosts.patch", { host, enabled })
    },
    caPem: call("caPem")
  }
}

/** Worker 1's side of `forwarded`: runs a call of another worker on this worker's capture modes. */
const servedBy =
  (shape: CaptureShape, run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>) =>
  (op: string, args: any): Promise<{ readonly value: unknown } | { readonly failure: RemoteFailure }> => {
    const effect: Effect.Effect<unknown, CaptureFailure> | undefined =
      op === "modes"
        ? shape.modes
        : op === "httpProxy"
          ? shape.httpProxy(args)
          : op === "systemProxy"
            ? shape.systemProxy(args)
            : op === "tlsIntercept"
              ? shape.tlsIntercept(args)
              : op === "hosts.list"
                ? shape.hosts.list
                : op === "hosts.add"
                  ? shape.hosts.add(args)
                  : op === "hosts.remove"
                    ? shape.hosts.remove(args)
                    : op === "hosts.patch"
                      ? shape.hosts.patch(args.host, args.enabled)
                      : op === "caPem"
                        ? shape.caPem
                        : undefined
    if (effect === undefined) return Promise.resolve({ failure: { tag: "BadRequest", message: `unknown capture call ${op}` } })
    return run(
      Effect.match(effect, {
        onSuccess: (value) => ({ value }),
        onFailure: (e) => ({ failure: { tag: e._tag, message: e.message } })
      })
    )
  }

const STATE_NS = "inspector.capture"
const HOSTS_NS = "inspector.hosts"
const SYSTEM_PROXY_KEY = "system-proxy"

interface Running {
  readonly port: number
  readonly close: () => Promise<void>
}

const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))

export class Capture extends Context.Tag("gateway/InspectorCapture")<Capture, CaptureShape>() {
  static readonly layer = Layer.scoped(
    Capture,
    Effect.gen(function* () {
      const inspector = yield* Inspector
      // `--workers`: worker 1 holds the listeners; the others forward their calls to it.
      if (inspector.node !== undefined && !inspector.node.holdsCapture) return forwarded(inspector.node)
      const kv = yield* KeyValue
      const flags = yield* FeatureFlags
      const config = inspector.config
      const sink = inspector.core.sink
      const run = Runtime.runPromise(yield* Effect.runtime<never>())
      // A custom host's real address: past the hosts file (mitm.ts), unless the gateway was given its own resolver (tests).
      const resolver = yield* DnsResolver
      const resolveHost =
        resolver === systemResolve
          ? undefined
          : async (name: string) => {
              const first = (await resolver(name))[0]
              if (first === undefined) throw Object.assign(new Error(`${name} has no address`), { code: "ENOTFOUND" })
              return { address: first.address, port: 443 }
            }

      // While the transparent capture runs, the forwarders' own connections carry its bypass mark (a name looked up first).
      const egressMark = Option.getOrUndefined(yield* Effect.serviceOption(EgressMark))
      const dial = (): Dial | undefined => {
        const marked = egressMark?.current()
        if (marked === undefined) return undefined
        return async (host, port, timeoutMs) => marked(net.isIP(host) !== 0 ? host : (await dns.promises.lookup(host)).address, port, timeoutMs)
      }

      let caPromise: Promise<LocalCa> | undefined
      const ca = () => (caPromise ??= loadOrCreateCa(config.caDir))
      const upstreamCa = config.upstreamCaFile ? [yield* Effect.promise(() => fs.readFile(config.upstreamCaFile!, "utf8"))] : undefined
      // A restart flag: its value at start holds until the next one (docs/feature-flags.md).
      const verifyAtStart = !(yield* flags.enabled("MITM_DISABLE_TLS_VERIFY"))
      const verifyUpstream = () => verifyAtStart

      let proxy: Running | undefined
      let proxyError: string | null = null
      let mitm: Running | undefined
      let mitmError: string | null = null
      let intercept = Option.getOrUndefined(yield* kv.get(STATE_NS, "tls-intercept")) === "true"
      let systemApplied: { appliedAt: number; changes: ReadonlyArray<unknown>; notes: ReadonlyArray<string> } | undefined
      let systemError: string | null = null
      let guard: ReturnType<typeof setTimeout> | undefined

      // ---------------------------------------------------------------- HTTP proxy (mode 3)
      const startProxy = async (): Promise<void> => {
        if (proxy) return
        proxy = await startHttpProxy({
          host: "127.0.0.1",
          port: config.httpProxyPort,
          sink,
          source: () => (systemApplied ? "system-proxy" : "http-proxy"),
          intercept: () => intercept,
          ca,
          ...(upstreamCa ? { upstreamCa } : {}),
          verifyUpstream,
          idleTimeoutMs: config.idleTimeoutMs,
          dial
        })
        proxyError = null
      }
      const stopProxy = async () => {
        const p = proxy
        proxy = undefined
        if (p) await p.close()
      }

      // ---------------------------------------------------------------- custom hosts (mode 2)
      const loadHosts = Effect.map(kv.entries(HOSTS_NS), (rows) => rows.map(([, v]) => JSON.parse(v) as CustomHost))
      /** The hosts file's block and the MITM server, as the saved hosts say. */
      const syncHosts = async (): Promise<void> => {
        const hosts = await run(loadHosts)
        const enabled = hosts.filter((h) => h.enabled).map((h) => h.host)
        // The hosts file is touched only when there is something to write or a block to remove.
        const written = await readBlockHosts(config.hostsFile).catch(() => [] as Array<string>)
        if (enabled.length > 0 || written.length > 0) await setBlockHosts(config.hostsFile, enabled)
        if (enabled.length > 0 && !mitm) {
          try {
            mitm = await startMitmServer({
              host: "127.0.0.1",
              port: config.mitmPort,
              sink,
              ca,
              hosts: () => new Map(hostsCache.map((h) => [h.host, { kind: h.kind, enabled: h.enabled }])),
              ...(upstreamCa ? { upstreamCa } : {}),
              ...(resolveHost ? { resolve: resolveHost } : {}),
              verifyUpstream,
              idleTimeoutMs: config.idleTimeoutMs,
              dial
            })
            mitmError = null
          } catch (e) {
            mitmError = `the MITM server could not listen on port ${config.mitmPort}: ${describe(e)} (ports below 1024 need root or CAP_NET_BIND_SERVICE; INSPECTOR_MITM_PORT changes it)`
          }
        } else if (enabled.length === 0 && mitm) {
          const m = mitm
          mitm = undefined
          await m.close()
        }
      }
      let hostsCache: ReadonlyArray<CustomHost> = yield* loadHosts
      const refreshHosts = Effect.tap(loadHosts, (h) =>
        Effect.sync(() => {
          hostsCache = h
        })
      )
      const hostsFailure = (e: unknown) =>
        e instanceof HostsFileError && /EACCES|EPERM|elevated/i.test(e.message)
          ? new Forbidden({ message: e.message })
          : new BadRequest({ message: e instanceof Error ? e.message : String(e) })

      // ---------------------------------------------------------------- system proxy (mode 4)
      const systemProxy = makeSystemProxy({
        home: config.systemProxyHome,
        store: {
          load: () => run(Effect.map(kv.get(STATE_NS, SYSTEM_PROXY_KEY), (o) => (Option.isSome(o) ? (JSON.parse(o.value) as SavedState) : undefined))),
          save: (s) => run(kv.set(STATE_NS, SYSTEM_PROXY_KEY, JSON.stringify(s))),
          clear: () => run(Effect.asVoid(kv.remove(STATE_NS, SYSTEM_PROXY_KEY)))
        }
      })
      const revertSystem = async () => {
        if (guard) clearTimeout(guard)
        guard = undefined
        const result = await systemProxy.revert()
        systemApplied = undefined
        return result
      }

      const modes: Effect.Effect<Modes> = Effect.gen(function* () {
        const caPath = caPemPath(config.caDir)
        const caExists = yield* Effect.promise(() =>
          fs.access(caPath).then(
            () => true,
            () => false
          )
        )
        const fingerprint = caExists ? (yield* Effect.promise(() => ca())).fingerprint256 : null
        const memory = inspector.core.memory()
        const status = yield* Effect.promise(() => systemProxy.status())
        return {
          agentBridge: { enabled: true, capturingBodies: inspector.core.wantsBodies(), subscribers: inspector.core.subscriberCount() },
          customHosts: {
            hosts: hostsCache,
            hostsFile: config.hostsFile,
            mitm: { running: mitm !== undefined, port: mitm?.port ?? config.mitmPort, error: mitmError }
          },
          httpProxy: {
            running: proxy !== undefined,
            host: "127.0.0.1",
            port: proxy?.port ?? config.httpProxyPort,
            error: proxyError,
            url: proxy ? `http://127.0.0.1:${proxy.port}` : null
          },
          systemProxy: {
            applied: status.applied,
            appliedAt: status.appliedAt,
            guardMinutes: config.systemProxyGuardMinutes,
            revertsAt: status.appliedAt !== null ? status.appliedAt + config.systemProxyGuardMinutes * 60_000 : null,
            changes: status.changes,
            notes: systemApplied?.notes ?? [],
            error: systemError
          },
          tlsIntercept: { enabled: intercept },
          ca: {
            fingerprint256: fingerprint,
            pemUrl: INSPECTOR_CA_PATH,
            path: caExists ? caPath : null,
            trust: [
              `curl: curl --cacert ${caPath} -x http://127.0.0.1:${proxy?.port ?? config.httpProxyPort} https://...`,
              `Node: NODE_EXTRA_CA_CERTS=${caPath} (with HTTPS_PROXY and NODE_USE_ENV_PROXY=1 on Node 22+)`,
              `Python: REQUESTS_CA_BUNDLE / SSL_CERT_FILE=${caPath}`,
              `Debian/Ubuntu system store: cp ${caPath} /usr/local/share/ca-certificates/gateway-inspector-ca.crt && update-ca-certificates`
            ]
          },
          buffer: { entries: memory.entries, bufferSize: memory.bufferSize, bodyBytes: memory.bodyBytes, maxBodyBytes: memory.maxBodyBytes, maskSecrets: config.maskSecrets }
        }
      })

      // ---------------------------------------------------------------- start: what was on comes back; a crash is undone
      const recovered = yield* Effect.promise(() => systemProxy.recover().catch((e) => (systemError = `revert after a crash failed: ${describe(e)}`)))
      if (recovered === true) yield* Effect.logWarning("inspector: the system proxy settings left applied by a previous run were reverted")
      yield* Effect.promise(() =>
        syncHosts().catch((e) => {
          mitmError = `custom hosts could not be applied: ${describe(e)}`
        })
      )
      if (Option.getOrUndefined(yield* kv.get(STATE_NS, "http-proxy")) === "on") {
        yield* Effect.promise(() =>
          startProxy().catch((e) => {
            proxyError = `the HTTP proxy could not listen on 127.0.0.1:${config.httpProxyPort}: ${describe(e)}`
          })
        )
        if (proxyError) yield* Effect.logWarning(`inspector: ${proxyError}`)
      }

      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          if (guard) clearTimeout(guard)
          await Promise.allSettled([
            systemApplied || (await systemProxy.status()).applied ? systemProxy.revert() : Promise.resolve(),
            stopProxy(),
            mitm?.close(),
            hostsCache.some((h) => h.enabled) ? removeBlock(config.hostsFile) : Promise.resolve()
          ])
        })
      )

      const hostOf = (host: string) => hostsCache.find((h) => h.host === host.toLowerCase())

      const shape: CaptureShape = {
        modes,
        httpProxy: (action) =>
          Effect.gen(function* () {
            if (action === "start") {
              const error = yield* Effect.promise(() =>
                startProxy().then(
                  () => undefined,
                  (e: unknown) => e
                )
              )
              if (error !== undefined) {
                const code = (error as { code?: string }).code
                if (code === "EADDRINUSE") {
                  return yield* Effect.fail(
                    new Conflict({
                      message: `port ${config.httpProxyPort} is already in use (http_proxy_port_in_use): stop what listens there or set INSPECTOR_HTTP_PROXY_PORT`
                    })
                  )
                }
                return yield* Effect.fail(new BadRequest({ message: `the HTTP proxy could not start: ${describe(error)}` }))
              }
              yield* kv.set(STATE_NS, "http-proxy", "on")
            } else {
              if (systemApplied) return yield* Effect.fail(new Conflict({ message: "the system proxy points at this listener: revert it first (capture-modes/system-proxy)" }))
              yield* Effect.promise(stopProxy)
              yield* kv.set(STATE_NS, "http-proxy", "off")
            }
            return yield* modes
          }),
        systemProxy: (action) =>
          Effect.gen(function* () {
            if (action === "apply") {
              if ((yield* Effect.promise(() => systemProxy.status())).applied) return yield* Effect.fail(new Conflict({ message: "the system proxy is already applied" }))
              const started = yield* Effect.promise(() =>
                startProxy().then(
                  () => undefined,
                  (e: unknown) => e
                )
              )
              if (started !== undefined) return yield* Effect.fail(new Conflict({ message: `the HTTP proxy listener is needed and could not start: ${describe(started)}` }))
              const applied = yield* Effect.promise(() =>
                systemProxy.apply({ host: "127.0.0.1", port: proxy!.port }).then(
                  (a) => a,
                  (e: unknown) => new Error(describe(e))
                )
              )
              if (applied instanceof Error) {
                systemError = applied.message
                return yield* Effect.fail(new BadRequest({ message: `the system proxy could not be applied (nothing was left changed): ${applied.message}` }))
              }
              systemError = null
              systemApplied = { appliedAt: applied.appliedAt, changes: applied.changes, notes: applied.notes }
              guard = setTimeout(() => {
                void revertSystem().catch(() => undefined)
              }, config.systemProxyGuardMinutes * 60_000)
              guard.unref()
            } else {
              yield* Effect.promise(() => revertSystem().catch((e) => (systemError = describe(e))))
            }
            return yield* modes
          }),
        tlsIntercept: (enabled) =>
          Effect.gen(function* () {
            intercept = enabled
            if (enabled) yield* Effect.promise(() => ca())
            yield* kv.set(STATE_NS, "tls-intercept", String(enabled))
            return yield* modes
          }),
        hosts: {
          list: Effect.map(refreshHosts, (hosts) => ({
            hosts,
            hostsFile: config.hostsFile,
            mitm: { running: mitm !== undefined, port: mitm?.port ?? config.mitmPort, error: mitmError }
          })),
          add: (input) =>
            Effect.gen(function* () {
              let host: string
              try {
                host = validateHostName(input.host.trim().toLowerCase())
              } catch (e) {
                return yield* Effect.fail(new BadRequest({ message: describe(e) }))
              }
              yield* refreshHosts
              if (hostOf(host)) return yield* Effect.fail(new Conflict({ message: `${host} is already a custom host` }))
              const entry: CustomHost = { host, kind: input.kind ?? "custom", enabled: input.enabled ?? true, addedAt: Date.now() }
              yield* kv.set(HOSTS_NS, host, JSON.stringify(entry))
              yield* refreshHosts
              const failed = yield* Effect.promise(() =>
                syncHosts().then(
                  () => undefined,
                  (e: unknown) => e
                )
              )
              if (failed !== undefined) {
                yield* kv.remove(HOSTS_NS, host)
                yield* refreshHosts
                return yield* Effect.fail(hostsFailure(failed))
              }
              return entry
            }),
          remove: (host) =>
            Effect.gen(function* () {
              yield* refreshHosts
              const found = hostOf(host)
              if (!found) return yield* Effect.fail(new NotFound({ message: `${host} is not a custom host` }))
              yield* kv.remove(HOSTS_NS, found.host)
              yield* refreshHosts
              const failed = yield* Effect.promise(() =>
                syncHosts().then(
                  () => undefined,
                  (e: unknown) => e
                )
              )
              if (failed !== undefined) return yield* Effect.fail(new Forbidden({ message: describe(failed) }))
              return found
            }),
          patch: (host, enabled) =>
            Effect.gen(function* () {
              yield* refreshHosts
              const found = hostOf(host)
              if (!found) return yield* Effect.fail(new NotFound({ message: `${host} is not a custom host` }))
              const next = { ...found, enabled }
              yield* kv.set(HOSTS_NS, found.host, JSON.stringify(next))
              yield* refreshHosts
              const failed = yield* Effect.promise(() =>
                syncHosts().then(
                  () => undefined,
                  (e: unknown) => e
                )
              )
              if (failed !== undefined) {
                yield* kv.set(HOSTS_NS, found.host, JSON.stringify(found))
                yield* refreshHosts
                return yield* Effect.fail(new Forbidden({ message: describe(failed) }))
              }
              return next
            })
        },
        caPem: Effect.map(
          Effect.promise(() => ca()),
          (c) => c.certPem
        )
      }
      inspector.node?.serve(servedBy(shape, run))
      return shape
    })
  )
}
