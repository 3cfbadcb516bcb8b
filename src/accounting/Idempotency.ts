import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"

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

/** A sweep of expired keys runs every this many new keys (and whenever the map is over `MAX_KEYS`). */
const SWEEP_EVERY = 256

type Slot =
  | {
      readonly state: "pending"
      /** Completes with the response, or with `undefined` when the producer failed or was interrupted. */
      readonly done: Deferred.Deferred<RecordedResponse | undefined>
    }
  | { readonly state: "done"; readonly response: RecordedResponse; readonly expiresAt: number }

/**
 * Request de-duplication (docs: "Idempotency"). In-memory only: the window is seconds long, and
 * a restart forgets everything.
 */
export class Idempotency extends Context.Tag("gateway/Idempotency")<Idempotency, IdempotencyShape>() {
  static readonly layer = Layer.sync(Idempotency, () => {
    /**
     * Insertion order: a completed key is re-inserted at completion, so completed keys are in
     * order of `expiresAt` (the window is constant and the clock does not go back).
     */
    const slots = new Map<string, Slot>()
    let inserts = 0

    /** Drops expired completed keys (they form a prefix among completed keys), then the oldest completed ones over `MAX_KEYS`. */
    const sweep = (now: number) => {
      for (const [key, slot] of slots) {
        if (slot.state === "pending") continue
        if (slot.expiresAt > now) break
        slots.delete(key)
      }
      if (slots.size <= MAX_KEYS) return
      for (const [key, slot] of slots) {
        if (slots.size <= MAX_KEYS) break
        if (slot.state === "done") slots.delete(key)
      }
    }

    type Claim =
      | { readonly kind: "stored"; readonly response: RecordedResponse }
      | { readonly kind: "wait"; readonly done: Deferred.Deferred<RecordedResponse | undefined> }
      | { readonly kind: "produce"; readonly slot: Slot & { state: "pending" } }

    /** Look-up and claim in one synchronous step: no other fiber can run in between. */
    const claim = (key: string, now: number, done: Deferred.Deferred<RecordedResponse | undefined>): Claim => {
      const slot = slots.get(key)
      if (slot?.state === "done") {
        if (slot.expiresAt > now) return { kind: "stored", response: slot.response }
        slots.delete(key)
      } else if (slot?.state === "pending") {
        return { kind: "wait", done: slot.done }
      }
      const mine = { state: "pending" as const, done }
      slots.set(key, mine)
      if (++inserts % SWEEP_EVERY === 0 || slots.size > MAX_KEYS) sweep(now)
      return { kind: "produce", slot: mine }
    }

    const run = <E, R>(key: string, produce: Effect.Effect<RecordedResponse, E, R>) => {
      const attempt: Effect.Effect<{ readonly response: RecordedResponse; readonly duplicate: boolean }, E, R> = Effect.uninterruptibleMask(
        (restore) =>
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
            return yield* restore(produce).pipe(
              Effect.onExit((exit) =>
                Effect.gen(function* () {
                  const owned = slots.get(key) === c.slot
                  if (Exit.isSuccess(exit)) {
                    if (owned) {
                      const completedAt = yield* Clock.currentTimeMillis
                      slots.delete(key)
                      slots.set(key, { state: "done", response: exit.value, expiresAt: completedAt + WINDOW_MS })
                    }
                    yield* Deferred.succeed(done, exit.value)
                  } else {
                    if (owned) slots.delete(key)
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

    const activeAt = (now: number) => {
      sweep(now)
      let n = 0
      for (const slot of slots.values()) if (slot.state === "pending" || slot.expiresAt > now) n++
      return n
    }

    const stats = Effect.map(Clock.currentTimeMillis, (now) => ({ activeKeys: activeAt(now), windowMs: WINDOW_MS }))

    const clear = Effect.map(Clock.currentTimeMillis, (now) => {
      const n = activeAt(now)
      slots.clear()
      return n
    })

    return { run, stats, clear } satisfies IdempotencyShape
  })
}
