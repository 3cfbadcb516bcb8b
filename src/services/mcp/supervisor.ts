/**
 * One supervised connection per enabled MCP server (docs/mcp.md, "Connections to the upstream servers"):
 * a life spawns the stdio process (or opens the HTTP connection), initializes the SDK client,
 * lists what the server offers and waits until the connection ends; a life that ends is begun
 * again on `restartSchedule`; a 401 (needs-auth) or a record that cannot work (failed) waits for
 * a change of the record or a restart. The registry's changes are reconciled with the running
 * connections, one at a time.
 */
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js"
import type { McpHealthState, McpServerHealth, McpServerRecord } from "../../domain/mcpServers.js"
import type { Connection, ErrorMeaning, ListKind } from "./connection.js"
import { signInHint } from "./McpOAuthRefused.js"
import type { McpOfferings } from "./McpUpstreams.js"
import { scrubberOf } from "./mcpServerSecrets.js"
import { describeEnd, type ProcessRecord, type StdioProcess, spawnStdioServer, stdioEnv, stopStdioServer } from "./processes.js"

/** The SDK and what the connections do with it, loaded at the first connection (not by the CLI, not with no server). */
export type ConnectionModule = typeof import("./connection.js")
let connectionModule: Promise<ConnectionModule> | undefined
/** A load that failed is not kept: the next connection tries again. */
export const loadConnection = (): Promise<ConnectionModule> =>
  (connectionModule ??= import("./connection.js").catch((e: unknown) => {
    connectionModule = undefined
    throw e
  }))

/** How a life ended: `restarting` is begun again on the schedule; `failed` and `needs-auth` wait for the record to change or a restart. */
export class LifeEnded extends Data.TaggedError("LifeEnded")<{
  readonly reason: string
  readonly state: "restarting" | "failed" | "needs-auth"
  /** How long the connection was up (ready) before it ended: 0 if it never was. */
  readonly upMs: number
}> {}

/** A life up this long before it ended counts as a success: the next restart waits the first delay again. */
export const STABLE_AFTER = Duration.minutes(1)

/**
 * When a connection is begun again after it ended: 0.5 s, then doubling, at most every 30 s; a
 * connection that stayed up `STABLE_AFTER` starts the count again. Stops for `failed` and `needs-auth`.
 */
export const restartSchedule = Schedule.exponential(Duration.millis(500), 2).pipe(
  Schedule.union(Schedule.spaced(Duration.seconds(30))),
  Schedule.intersect(Schedule.identity<LifeEnded>()),
  Schedule.resetWhen(([, ended]) => ended.upMs >= Duration.toMillis(STABLE_AFTER)),
  Schedule.whileInput((ended: LifeEnded) => ended.state === "restarting")
)

/** A server's connection as the supervisor holds it. */
export interface Entry {
  record: McpServerRecord
  /** The record's fields a connection is made of: when they change, it is made again. */
  fingerprint: string
  health: McpServerHealth
  offerings: McpOfferings
  /** While connected: the client, the SDK it was made with, and a way to say the connection is lost. */
  live: Live | undefined
  fiber: Fiber.RuntimeFiber<void, never> | undefined
}

export interface Live {
  readonly conn: Connection
  readonly sdk: ConnectionModule
  /** An error suggests the connection is gone (an HTTP request that failed): checked with a ping, the life ended if so. */
  readonly suspect: (why: string) => void
  /** The server answered 401 in the middle of the session: it needs a sign-in. */
  readonly unauthorized: (why: string) => void
}

export const EMPTY_OFFERINGS: McpOfferings = { tools: [], resources: [], resourceTemplates: [], prompts: [] }

export const fingerprintOf = (r: McpServerRecord): string =>
  JSON.stringify([r.id, r.transport, r.command, r.args, r.env, r.cwd, r.url, r.headers, r.oauth ?? null])

/** A needs-auth reason: what the server said, and how to sign in. */
const needsAuthReason = (server: string, said: string) => `the server requires authorization (HTTP 401): ${signInHint(server)} (${said})`

const now = () => new Date().toISOString()

/** The health of a registered server the supervisor has not seen yet (or a disabled one). */
export const initialHealth = (record: McpServerRecord): McpServerHealth => ({
  state: record.enabled ? "starting" : "disabled",
  reason: null,
  since: now(),
  restarts: 0,
  pid: null,
  serverInfo: null,
  listedAt: null
})

/** Why a record cannot work as it is (no retry helps): undefined when it can. */
const configProblem = (r: McpServerRecord): string | undefined => {
  if (r.transport === "stdio") return r.command === null || r.command === "" ? "a stdio server needs a command" : undefined
  if (r.url === null || r.url === "") return `an ${r.transport} server needs a url`
  try {
    const url = new URL(r.url)
    return url.protocol === "http:" || url.protocol === "https:" ? undefined : `its url must be http(s), not ${url.protocol}`
  } catch {
    return `its url ${JSON.stringify(r.url)} is not a URL`
  }
}

const messageOf = (e: unknown): string => {
  if (e instanceof Error) return e.message
  try {
    return String(e)
  } catch {
    return "a value without a text form"
  }
}

/** How long a ping that checks a suspect connection may take. */
const CHECK_TIMEOUT_MS = 10_000

export const makeSupervisor = (deps: {
  readonly all: () => ReadonlyArray<McpServerRecord>
  readonly processes: ProcessRecord
  /** Where the connections' fibers run: the layer's scope. */
  readonly scope: Scope.Scope
  /** Told the server's name when its health or offerings changed. */
  readonly changed: (server: string) => void
  /** The OAuth provider of an http or sse server the gateway holds a token for (McpOAuth), else undefined. */
  readonly authProvider?: (record: McpServerRecord) => OAuthClientProvider | undefined
  /** Loads the SDK's side of a connection (`loadConnection`; a test's stand-in). */
  readonly load?: () => Promise<ConnectionModule>
}) => {
  const load = deps.load ?? loadConnection
  const entries = new Map<string, Entry>()
  const lock = Effect.unsafeMakeSemaphore(1)
  let closing = false

  /**
   * Sets the health; a new state is logged and its `since` starts. The reason is scrubbed of the
   * server's secrets: it may quote the server's stderr or an error naming its url.
   */
  const setHealth = (entry: Entry, patch: Partial<McpServerHealth>) =>
    Effect.suspend(() => {
      const before = entry.health.state
      const next = { ...entry.health, ...patch }
      if (typeof patch.reason === "string") next.reason = scrubberOf(entry.record)(patch.reason)
      if (next.state !== before) next.since = now()
      entry.health = next
      deps.changed(entry.record.name)
      if (next.state === before && patch.reason === undefined) return Effect.void
      const text = `MCP server ${entry.record.name}: ${next.state}${next.reason ? ` (${next.reason})` : ""}`
      return logAt(next.state, text)
    })

  const logAt = (state: McpHealthState, text: string) =>
    state === "failed"
      ? Effect.logError(text)
      : state === "restarting" || state === "needs-auth"
        ? Effect.logWarning(text)
        : Effect.logInfo(text)

  /** One connection, from the spawn (or the first request) to its end, which is always a failure. */
  const life = (entry: Entry): Effect.Effect<never, LifeEnded, Scope.Scope> =>
    Effect.gen(function* () {
      const record = entry.record
      let readyAt: number | undefined
      const ended = (reason: string, state: LifeEnded["state"] = "restarting") =>
        new LifeEnded({ reason, state, upMs: readyAt === undefined ? 0 : Date.now() - readyAt })
      const fromMeaning = (m: ErrorMeaning, what: string) =>
        m.kind === "unauthorized" ? ended(needsAuthReason(record.name, m.message), "needs-auth") : ended(`${what}: ${m.message}`)

      const problem = configProblem(record)
      if (problem !== undefined) return yield* Effect.fail(ended(problem, "failed"))
      const sdk = yield* Effect.tryPromise({ try: load, catch: (e) => ended(`the MCP client could not be loaded: ${messageOf(e)}`) })

      let child: StdioProcess | undefined
      if (record.transport === "stdio") {
        const command = record.command as string
        child = yield* Effect.acquireRelease(
          Effect.tryPromise({
            try: () => spawnStdioServer({ command, args: record.args, env: stdioEnv(record.env), cwd: record.cwd ?? undefined }),
            catch: (e) => ended(describeEnd(command, { code: null, signal: null, error: e as Error }, ""), "failed")
          }),
          (c) => Effect.promise(() => stopStdioServer(c)).pipe(Effect.zipRight(Effect.sync(() => deps.processes.remove(c.pid))))
        )
        deps.processes.add(child.pid, child.command)
        yield* setHealth(entry, { pid: child.pid })
      }
      const exitReason = (c: StdioProcess) => describeEnd(record.command as string, c.end() ?? { code: null, signal: null }, c.stderrTail())
      const processEnded = child === undefined ? Effect.never : Effect.promise(() => (child as StdioProcess).ended)

      const conn = yield* Effect.acquireRelease(
        Effect.try({
          try: () => sdk.createConnection(record, child, child === undefined ? deps.authProvider?.(record) : undefined),
          catch: (e) => ended(messageOf(e), "failed")
        }),
        (c) => Effect.promise(() => sdk.closeConnection(c))
      )
      /** Completed when the connection is gone: closed, its process exited, a failed check. */
      const lost = yield* Deferred.make<LifeEnded>()
      conn.client.onclose = () => Deferred.unsafeDone(lost, Exit.succeed(ended("the connection closed")))

      // initialize, within the server's time limit; a process that exits meanwhile says why.
      const limit = record.timeoutMs
      yield* Effect.tryPromise({
        try: (signal) => conn.client.connect(conn.transport, { signal, timeout: limit + 1000 }),
        catch: (e) => e
      }).pipe(
        Effect.timeoutFail({ duration: Duration.millis(limit), onTimeout: () => new Error(`no answer to initialize within ${limit} ms`) }),
        Effect.raceFirst(processEnded.pipe(Effect.zipRight(Effect.fail(new Error("the process exited"))))),
        Effect.mapError((e) => (child?.end() !== undefined ? ended(exitReason(child)) : fromMeaning(sdk.meaningOf(e), "cannot connect")))
      )

      const runFork = yield* FiberSet.makeRuntime<never>()
      const { client } = conn
      // A connection that reports an error (its HTTP event stream dropped, a request failed) is
      // checked with a ping, one at a time; the life ends if the server no longer answers.
      let checking = false
      const suspect = (why: string) => {
        if (checking || record.transport === "stdio") return
        checking = true
        runFork(
          Effect.tryPromise(() => client.ping({ timeout: CHECK_TIMEOUT_MS })).pipe(
            Effect.matchEffect({
              onSuccess: () => Effect.sync(() => void (checking = false)),
              onFailure: (e) => {
                const meaning = sdk.meaningOf(e.error)
                // Any JSON-RPC answer (even an error: a server without ping) means it is there.
                if (meaning.kind === "upstream") return Effect.sync(() => void (checking = false))
                return Effect.logDebug(`MCP server ${record.name}: checked after ${why}`).pipe(
                  Effect.zipRight(Deferred.succeed(lost, fromMeaning(meaning, "the connection failed")))
                )
              }
            })
          )
        )
      }
      client.onerror = (e) => suspect(messageOf(e))

      readyAt = Date.now()
      const info = client.getServerVersion()
      const live: Live = {
        conn,
        sdk,
        suspect,
        unauthorized: (why) => Deferred.unsafeDone(lost, Exit.succeed(fromMeaning({ kind: "unauthorized", message: why }, "")))
      }
      entry.live = live
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          if (entry.live === live) entry.live = undefined
        })
      )
      yield* setHealth(entry, {
        state: "ready",
        reason: null,
        pid: child?.pid ?? null,
        serverInfo: info ? { name: info.name, version: info.version } : null
      })

      // What it offers: listed now, and again (that kind only) on its list_changed notifications.
      // One listing at a time; a notification while the same kind waits to be listed adds nothing.
      const listLock = yield* Effect.makeSemaphore(1)
      const waiting = new Set<ListKind>()
      const list = (kinds: ReadonlyArray<ListKind>) =>
        listLock.withPermits(1)(
          Effect.gen(function* () {
            for (const kind of kinds) {
              waiting.delete(kind)
              const part = yield* Effect.tryPromise(() => sdk.listKind(client, kind, { timeout: limit })).pipe(
                Effect.tapError((e) =>
                  Effect.suspend(() => {
                    if (sdk.meaningOf(e.error).kind === "connection") suspect(messageOf(e.error))
                    return Effect.logWarning(`MCP server ${record.name}: listing its ${kind} failed: ${messageOf(e.error)}`)
                  })
                ),
                Effect.option
              )
              if (part._tag === "Some") entry.offerings = { ...entry.offerings, ...part.value }
            }
            yield* setHealth(entry, { listedAt: now() })
          })
        )
      sdk.onListChanged(client, (kind) => {
        if (waiting.has(kind)) return
        waiting.add(kind)
        runFork(list([kind]))
      })
      yield* list(["tools", "resources", "prompts"])

      const why = yield* Effect.raceFirst(Deferred.await(lost), processEnded.pipe(Effect.as(undefined)))
      return yield* Effect.fail(child?.end() !== undefined ? ended(exitReason(child)) : (why ?? ended("the connection closed")))
    })

  /** Lives, one after another on `restartSchedule`, until one ends for good (failed, needs-auth) or the fiber is interrupted. */
  const supervise = (entry: Entry, restarted: boolean) => {
    let lives = 0
    return Effect.suspend(() => {
      const again = lives++ > 0 || restarted
      return setHealth(entry, again ? { pid: null, restarts: entry.health.restarts + 1 } : { pid: null }).pipe(
        Effect.zipRight(Effect.scoped(life(entry))),
        // A defect (a bug, a throw where none was expected) ends this life like any failure: logged
        // with its cause, said in the health's reason, and the connection begun again on the schedule.
        // Uncaught, it would end the supervision silently, the server shown starting for ever. A
        // life's own end (needs-auth, failed) stays what it was when a finalizer also threw; an
        // interruption (the server stopped, removed, changed) stays one.
        Effect.catchAllCause((cause) => {
          const ended = Cause.failureOption(cause)
          if (Option.isNone(ended) && Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
          const defects = [...Cause.defects(cause)]
          const logged =
            defects.length === 0
              ? Effect.void
              : Effect.logError(`MCP server ${entry.record.name}: its connection ended on an internal error`, cause)
          if (Option.isSome(ended)) return Effect.zipRight(logged, Effect.fail(ended.value))
          const health = entry.health
          const upMs = health.state === "ready" ? Date.now() - Date.parse(health.since) : 0
          const reason = `an internal error: ${messageOf(defects[0])}`
          return Effect.zipRight(logged, Effect.fail(new LifeEnded({ reason, state: "restarting", upMs })))
        })
      )
    }).pipe(
      Effect.tapError((e) =>
        Effect.suspend(() => {
          entry.live = undefined
          return setHealth(entry, { state: e.state, reason: e.reason, pid: null })
        })
      ),
      Effect.retry(restartSchedule),
      Effect.ignore
    )
  }

  const start = (entry: Entry, restarted: boolean) =>
    Effect.gen(function* () {
      yield* setHealth(entry, { state: restarted ? "restarting" : "starting", reason: restarted ? "restarted" : null })
      entry.fiber = yield* Effect.forkIn(supervise(entry, restarted), deps.scope)
    })

  const stop = (entry: Entry) =>
    Effect.gen(function* () {
      const fiber = entry.fiber
      entry.fiber = undefined
      if (fiber !== undefined) yield* Fiber.interrupt(fiber)
      entry.live = undefined
    })

  /** The running connections made to match the registry: added, removed, disabled, changed. */
  const reconcile = lock.withPermits(1)(
    Effect.gen(function* () {
      if (closing) return
      const records = deps.all()
      const names = new Set(records.map((r) => r.name))
      for (const [name, entry] of [...entries]) {
        if (names.has(name)) continue
        yield* stop(entry)
        entries.delete(name)
        yield* Effect.logInfo(`MCP server ${name}: removed, its connection closed`)
        deps.changed(name)
      }
      for (const record of records) {
        const entry = entries.get(record.name)
        const fingerprint = fingerprintOf(record)
        if (entry === undefined) {
          const fresh: Entry = {
            record,
            fingerprint,
            health: initialHealth(record),
            offerings: EMPTY_OFFERINGS,
            live: undefined,
            fiber: undefined
          }
          entries.set(record.name, fresh)
          if (record.enabled) yield* start(fresh, false)
          else deps.changed(record.name)
          continue
        }
        const wasEnabled = entry.record.enabled
        const changedRecord = entry.fingerprint !== fingerprint
        entry.record = record
        entry.fingerprint = fingerprint
        if (!record.enabled) {
          if (!wasEnabled) continue
          yield* stop(entry)
          yield* setHealth(entry, { state: "disabled", reason: null, pid: null })
        } else if (!wasEnabled || changedRecord) {
          yield* stop(entry)
          if (changedRecord) entry.offerings = EMPTY_OFFERINGS
          yield* start(entry, false)
        }
      }
    })
  )

  /** Closes the server's connection and begins a new one now; false when it is not registered and enabled. */
  const restart = (name: string) =>
    lock.withPermits(1)(
      Effect.gen(function* () {
        const entry = entries.get(name)
        if (closing || entry === undefined || !entry.record.enabled) return false
        yield* stop(entry)
        yield* start(entry, true)
        return true
      })
    )

  /** The server's sign-in is lost (its token could not be refreshed): its connection closed, needs-auth with `reason` until one. */
  const needsAuth = (name: string, reason: string) =>
    lock.withPermits(1)(
      Effect.gen(function* () {
        const entry = entries.get(name)
        if (closing || entry === undefined || !entry.record.enabled) return
        yield* stop(entry)
        yield* setHealth(entry, { state: "needs-auth", reason, pid: null })
      })
    )

  /** Every connection closed (the layer's end): processes stopped, nothing started after. */
  const stopAll = lock.withPermits(1)(
    Effect.suspend(() => {
      closing = true
      return Effect.forEach([...entries.values()], stop, { concurrency: "unbounded", discard: true })
    })
  )

  return { entries, reconcile, restart, needsAuth, stopAll }
}
