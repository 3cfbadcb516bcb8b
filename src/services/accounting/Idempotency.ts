import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { randomUUID } from "node:crypto"
import { type Codec, SharedState } from "../../platform/state/SharedState.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"

/** The de-duplication window after a response completed (spec "Limits": 5 s). */
export const WINDOW_MS = 5000

/** At most this many keys are remembered; beyond it the oldest completed ones are dropped. */
export const MAX_KEYS = 10_000

/** A whole response as sent to the client. Shared between duplicates: treat as immutable. */
export interface RecordedResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: Buffer
}

export interface IdempotencyStats {
  /** Keys in flight or within their window. */
  readonly activeKeys: number
  readonly windowMs: number
}

export interface IdempotencyShape {
  /**
   * De-duplicates by `key`. The first caller runs `produce`; callers arriving while it runs wait
   * for it, callers arriving within `WINDOW_MS` after it completed get its response at once; both
   * with `duplicate: true`. A failed or interrupted `produce` is not shared and not stored: one
   * waiting caller runs its own `produce` instead (and the rest wait for that one).
   */
  readonly run: <E, R>(
    key: string,
    produce: Effect.Effect<RecordedResponse, E, R>
  ) => Effect.Effect<{ readonly response: RecordedResponse; readonly duplicate: boolean }, E, R>
  readonly stats: Effect.Effect<IdempotencyStats>
  /** Forgets every key; answers how many were active. In-flight calls finish but store nothing. */
  readonly clear: Effect.Effect<number>
}

/**
 * The key the pipeline builds: scoped to the API key, method and path, so two clients (or two
 * endpoints) sending the same `Idempotency-Key` / `X-Request-Id` never share a response.
 */
export const idempotencyKey = (parts: {
  readonly apiKeyId: string | null
  readonly method: string
  readonly path: string
  readonly clientKey: string
}): string => JSON.stringify([parts.apiKeyId ?? "", parts.method.toUpperCase(), parts.path, parts.clientKey])

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): a completed response (the
 * body as base64 on the wire), so that a duplicate arriving at another process within the
 * window gets it too; or an operator's clear. A request still in flight is not announced: a
 * duplicate sent to another process while the first runs is produced there again.
 */
export type IdempotencyChange =
  | { readonly op: "done"; readonly key: string; readonly response: RecordedResponse; readonly at: number }
  | { readonly op: "clear" }

const changeCodec: Codec<IdempotencyChange> = {
  encode: (c) =>
    JSON.stringify(
      c.op === "done"
        ? { ...c, response: { status: c.response.status, headers: c.response.headers, body: c.response.body.toString("base64") } }
        : c
    ),
  decode: (text) => {
    const c = JSON.parse(text)
    return c.op === "done"
      ? { ...c, response: { status: c.response.status, headers: c.response.headers, body: Buffer.from(c.response.body, "base64") } }
      : c
  }
}

/** How long a process's claim on a key lasts without being renewed (renewed every third of it while the request runs). */
export const CLAIM_TTL_MS = 30_000
/** How often a duplicate waiting for another process's answer looks for it. */
const POLL_MS = 25
/** A claim's value while its request runs (`p:<owner>`), and once answered (`a:<encoded response>`). */
const IN_FLIGHT = "p:"
const ANSWER = "a:"

const encodeResponse = (r: RecordedResponse) => JSON.stringify({ status: r.status, headers: r.headers, body: r.body.toString("base64") })
const decodeResponse = (text: string): RecordedResponse | undefined => {
  try {
    const r = JSON.parse(text)
    return { status: r.status, headers: r.headers, body: Buffer.from(r.body, "base64") }
  } catch {
    return undefined
  }
}

/** This process's turn on a key across processes: produce (holding the claim, or alone), or another process's answer. */
type Turn =
  | { readonly kind: "claimed"; readonly owner: string }
  | { readonly kind: "local" }
  | { readonly kind: "answered"; readonly response: RecordedResponse }
const LOCAL_TURN: Turn = { kind: "local" }

/** A key whose first request is running: completes with the response, or `undefined` when it failed or was interrupted. */
interface Pending {
  readonly done: Deferred.Deferred<RecordedResponse | undefined>
}

/**
 * Request de-duplication (docs: "Idempotency"). In memory: the window is seconds long, and a
 * restart forgets everything. Completed responses also go to the other gateway processes on the
 * `idempotency` channel (`SharedState`).
 */
export class Idempotency extends Context.Tag("gateway/Idempotency")<Idempotency, IdempotencyShape>() {
  static readonly layer = Layer.effect(
    Idempotency,
    Effect.map(SharedState.orLocal, (shared) => {
      /** Keys in flight: as many as requests running, so not bounded apart from them. */
      const pending = new Map<string, Pending>()
      /** Completed responses for `WINDOW_MS`, at most `MAX_KEYS` of them (the oldest dropped first). */
      const completed = new BoundedMap<string, RecordedResponse>({ maxEntries: MAX_KEYS, ttlMs: WINDOW_MS })

      const channel = shared.channel<IdempotencyChange>(
        "idempotency",
        (c) => {
          if (c.op === "done") completed.set(c.key, c.response, c.at)
          else {
            pending.clear()
            completed.clear()
          }
        },
        changeCodec
      )

      const keys = shared.keys

      /** Ends this process's slot with another process's answer (or with none: its waiters start over). */
      const settle = (key: string, slot: Pending, response: RecordedResponse | undefined) =>
        Effect.gen(function* () {
          const owned = pending.get(key) === slot
          if (owned) pending.delete(key)
          if (owned && response !== undefined) completed.set(key, response, yield* Clock.currentTimeMillis)
          yield* Deferred.succeed(slot.done, response)
        })

      /**
       * The key across processes (`SharedState.keys`): claimed here (this process produces), or
       * answered by the process holding the claim (polled every 25 ms, or sooner through the
       * channel's "done"). A claim that disappears unanswered (its producer failed) is taken over;
       * Redis unreachable: produced here.
       */
      const remoteTurn = (key: string): Effect.Effect<Turn> =>
        Effect.gen(function* () {
          const owner = IN_FLIGHT + randomUUID()
          for (;;) {
            const now = yield* Clock.currentTimeMillis
            const local = completed.get(key, now)
            if (local !== undefined) return { kind: "answered", response: local } as const
            const claimed = yield* keys.claim(key, owner, CLAIM_TTL_MS)
            if (claimed === undefined) return LOCAL_TURN
            if (claimed) return { kind: "claimed", owner } as const
            const value = yield* keys.get(key)
            if (value?.startsWith(ANSWER)) {
              const response = decodeResponse(value.slice(ANSWER.length))
              if (response !== undefined) return { kind: "answered", response } as const
            }
            // In flight elsewhere (or just gone: claim again).
            if (value !== undefined) yield* Effect.sleep(POLL_MS)
          }
        })

      /** Keeps this process's claim alive while its request runs (a process that died lets go within `CLAIM_TTL_MS`). */
      const keepAlive = (key: string, owner: string) =>
        Effect.repeat(keys.replace(key, owner, owner, CLAIM_TTL_MS), Schedule.spaced(Duration.millis(CLAIM_TTL_MS / 3))).pipe(
          Effect.delay(Duration.millis(CLAIM_TTL_MS / 3))
        )

      type Claim =
        | { readonly kind: "stored"; readonly response: RecordedResponse }
        | { readonly kind: "wait"; readonly done: Deferred.Deferred<RecordedResponse | undefined> }
        | { readonly kind: "produce"; readonly slot: Pending }

      /** Look-up and claim in one synchronous step: no other fiber can run in between. */
      const claim = (key: string, now: number, done: Deferred.Deferred<RecordedResponse | undefined>): Claim => {
        const response = completed.get(key, now)
        if (response !== undefined) return { kind: "stored", response }
        const slot = pending.get(key)
        if (slot !== undefined) return { kind: "wait", done: slot.done }
        const mine: Pending = { done }
        pending.set(key, mine)
        return { kind: "produce", slot: mine }
      }

      const run = <E, R>(key: string, produce: Effect.Effect<RecordedResponse, E, R>) => {
        const attempt: Effect.Effect<{ readonly response: RecordedResponse; readonly duplicate: boolean }, E, R> =
          Effect.uninterruptibleMask((restore) =>
            Effect.gen(function* () {
              const done = yield* Deferred.make<RecordedResponse | undefined>()
              const now = yield* Clock.currentTimeMillis
              const c = claim(key, now, done)
              if (c.kind === "stored") return { response: c.response, duplicate: true }
              if (c.kind === "wait") {
                const response = yield* restore(Deferred.await(c.done))
                // The producer failed or was interrupted: start over (one waiter becomes the producer).
                return response === undefined ? yield* restore(attempt) : { response, duplicate: true }
              }
              // Several processes (Redis): the key is claimed there too; another process's claim means
              // its answer is awaited instead of produced here (this process's duplicates wait for it).
              const turn: Turn = keys.exact
                ? yield* restore(remoteTurn(key)).pipe(Effect.onInterrupt(() => settle(key, c.slot, undefined)))
                : LOCAL_TURN
              if (turn.kind === "answered") {
                yield* settle(key, c.slot, turn.response)
                return { response: turn.response, duplicate: true }
              }
              const owner = turn.kind === "claimed" ? turn.owner : undefined
              return yield* restore(
                owner === undefined ? produce : Effect.raceFirst(produce, Effect.zipRight(keepAlive(key, owner), Effect.never))
              ).pipe(
                Effect.onExit((exit) =>
                  Effect.gen(function* () {
                    // Not ours any more after a clear: the answer is not kept.
                    const owned = pending.get(key) === c.slot
                    if (owned) pending.delete(key)
                    if (Exit.isSuccess(exit)) {
                      if (owned) {
                        const completedAt = yield* Clock.currentTimeMillis
                        completed.set(key, exit.value, completedAt)
                        if (channel.shared) channel.publish({ op: "done", key, response: exit.value, at: completedAt })
                        if (owner !== undefined) yield* keys.replace(key, owner, ANSWER + encodeResponse(exit.value), WINDOW_MS)
                      } else if (owner !== undefined) yield* keys.release(key, owner)
                      yield* Deferred.succeed(done, exit.value)
                    } else {
                      if (owner !== undefined) yield* keys.release(key, owner)
                      yield* Deferred.succeed(done, undefined)
                    }
                  })
                ),
                Effect.map((response) => ({ response, duplicate: false }))
              )
            })
          )
        return attempt
      }

      /** Keys in flight or within their window at `now` (expired ones are dropped on the way). */
      const activeAt = (now: number) => {
        let n = pending.size
        for (const key of [...completed.keys()]) if (completed.peek(key, now) !== undefined) n++
        return n
      }

      const stats = Effect.map(Clock.currentTimeMillis, (now) => ({ activeKeys: activeAt(now), windowMs: WINDOW_MS }))

      const clear = Effect.map(Clock.currentTimeMillis, (now) => {
        const n = activeAt(now)
        pending.clear()
        completed.clear()
        if (channel.shared) channel.publish({ op: "clear" })
        return n
      })

      return { run, stats, clear } satisfies IdempotencyShape
    })
  )
}
