import type * as Clock from "effect/Clock"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import type { SharedStateShape } from "../../platform/state/SharedState.js"

/**
 * What a key's requests are expected to cost, and what its requests in flight hold: each key's
 * running average of a request's cost and tokens (learnt from its answers, and from the other
 * processes on the `averages` channel), and the holds a request takes on it until it settles, which
 * the budget and token-limit checks count as spent.
 */

/** A request's hold on its key's budget and token limits while it runs. */
export interface Reservation {
  readonly costUsd: number
  readonly tokens: number
  readonly release: () => void
}

/** No hold (a request without an API key). */
export const NO_RESERVATION: Reservation = { costUsd: 0, tokens: 0, release: () => {} }

/** What a key's requests in flight hold together. */
export interface Held {
  costUsd: number
  tokens: number
  count: number
}

/** Weight of the latest request in a key's running average. */
const EWMA_WEIGHT = 0.3

type Average = { costUsd: number; tokens: number }
type AverageChange = { readonly k: string; readonly c: number; readonly t: number }

/**
 * `a` with one more request blended in, updated in place (every settled request learns; a hold
 * copies the numbers it took, so none sees an average change under it); a new one without `a`.
 */
const ewma = (a: Average | undefined, costUsd: number, tokens: number): Average => {
  if (a === undefined) return { costUsd, tokens }
  a.costUsd += EWMA_WEIGHT * (costUsd - a.costUsd)
  a.tokens += EWMA_WEIGHT * (tokens - a.tokens)
  return a
}

/**
 * One request's hold on its key's entry in `held`: a class, so the release every request makes is
 * a method, not a closure made per request.
 */
class Hold implements Reservation {
  private released = false
  constructor(
    readonly costUsd: number,
    readonly tokens: number,
    private readonly held: Map<string, Held>,
    private readonly apiKeyId: string,
    private readonly h: Held
  ) {}
  release(): void {
    if (this.released) return
    this.released = true
    const h = this.h
    h.costUsd -= this.costUsd
    h.tokens -= this.tokens
    if (--h.count <= 0) this.held.delete(this.apiKeyId)
  }
}

/**
 * The averages and holds, made once per layer (the `averages` channel is opened here):
 * `reserve` holds a key's expected cost and tokens for one request, `learn` takes in a settled
 * request's, and `held` is what each key's requests in flight hold now.
 */
export const makeReservations = (deps: { readonly clock: Clock.Clock; readonly shared: SharedStateShape }) => {
  const { clock, shared } = deps
  // Per key: the running average of a request's cost and tokens, and what is held in flight.
  const averages = new BoundedMap<string, Average>({ maxEntries: 10_000 })
  const held = new Map<string, Held>()
  // Every key's requests together: what a key this process has not served yet is expected to
  // cost (without it, a new key's first burst would hold nothing, and with several processes a
  // key another process served would race its budget unheld).
  let overall: Average | undefined
  // With several processes a key's average goes to the others on the `averages` channel: a
  // process that has not served the key yet holds what it really costs (its first request
  // anywhere, then at most once a second per key). A received average is blended in like a request.
  const averagesChannel = shared.channel<AverageChange>("averages", (m) => {
    if (typeof m?.k !== "string" || !Number.isFinite(m.c) || !Number.isFinite(m.t)) return
    averages.set(m.k, ewma(averages.get(m.k), m.c, m.t))
  })
  const publishedAt = new BoundedMap<string, number>({ maxEntries: 10_000 })

  const learn = (apiKeyId: string, costUsd: number, tokens: number) => {
    const a = ewma(averages.get(apiKeyId), costUsd, tokens)
    averages.set(apiKeyId, a)
    overall = ewma(overall, costUsd, tokens)
    if (averagesChannel.shared) {
      const now = clock.unsafeCurrentTimeMillis()
      const last = publishedAt.get(apiKeyId)
      if (last === undefined || now - last >= 1_000) {
        publishedAt.set(apiKeyId, now)
        averagesChannel.publish({ k: apiKeyId, c: a.costUsd, t: a.tokens })
      }
    }
  }

  const reserve = (apiKeyId: string | null): Reservation => {
    if (apiKeyId === null) return NO_RESERVATION
    const a = averages.get(apiKeyId) ?? overall ?? { costUsd: 0, tokens: 0 }
    const h = held.get(apiKeyId) ?? { costUsd: 0, tokens: 0, count: 0 }
    h.costUsd += a.costUsd
    h.tokens += a.tokens
    h.count++
    held.set(apiKeyId, h)
    return new Hold(a.costUsd, a.tokens, held, apiKeyId, h)
  }

  return { held: held as ReadonlyMap<string, Held>, reserve, learn }
}
