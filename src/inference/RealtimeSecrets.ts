/**
 * Ephemeral client secrets for realtime sessions (`POST /v1/realtime/client_secrets`, as OpenAI's
 * API has them): minted by the gateway for the calling key, accepted in place of that key on
 * `/v1/realtime` until they expire (default 60 s, at most 10 min). Kept in this process's memory,
 * hashed; a restart forgets them (docs/realtime.md).
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as crypto from "node:crypto"

export const SECRET_PREFIX = "ek_"
export const DEFAULT_TTL_SECONDS = 60
export const MAX_TTL_SECONDS = 600
/** Live secrets kept at most (the oldest are dropped first). */
const MAX_SECRETS = 10_000

export interface MintedSecret {
  readonly value: string
  /** Epoch seconds. */
  readonly expiresAt: number
}

export interface RealtimeSecretsShape {
  /**
   * A new secret bound to `apiKeyId` (null: a gateway without keys), valid for `ttlSeconds`;
   * `session`: the session configuration it was minted with, applied to the sessions it opens.
   */
  readonly mint: (apiKeyId: string | null, ttlSeconds: number, session?: Readonly<Record<string, unknown>>) => MintedSecret
  /** Whether a presented credential is shaped like a client secret. */
  readonly isSecret: (presented: string) => boolean
  /** The key a live secret is bound to; undefined when it is unknown or expired. */
  readonly redeem: (presented: string) => string | null | undefined
  /** The session configuration a live secret was minted with (undefined: none, or not live). */
  readonly sessionOf: (presented: string) => Readonly<Record<string, unknown>> | undefined
}

const hash = (s: string): string => crypto.createHash("sha256").update(s).digest("base64url")

export const makeRealtimeSecrets = (now: () => number = Date.now): RealtimeSecretsShape => {
  const live = new Map<
    string,
    { readonly apiKeyId: string | null; readonly expiresAtMs: number; readonly session: Readonly<Record<string, unknown>> | undefined }
  >()
  const sweep = () => {
    const t = now()
    for (const [k, v] of live) if (v.expiresAtMs <= t) live.delete(k)
    while (live.size >= MAX_SECRETS) {
      const oldest = live.keys().next()
      if (oldest.done) break
      live.delete(oldest.value)
    }
  }
  return {
    mint: (apiKeyId, ttlSeconds, session) => {
      sweep()
      const value = `${SECRET_PREFIX}${crypto.randomBytes(32).toString("base64url")}`
      const expiresAtMs = now() + ttlSeconds * 1000
      live.set(hash(value), { apiKeyId, expiresAtMs, session })
      return { value, expiresAt: Math.floor(expiresAtMs / 1000) }
    },
    isSecret: (presented) => presented.startsWith(SECRET_PREFIX),
    redeem: (presented) => {
      const entry = live.get(hash(presented))
      if (entry === undefined) return undefined
      if (entry.expiresAtMs <= now()) {
        live.delete(hash(presented))
        return undefined
      }
      return entry.apiKeyId
    },
    sessionOf: (presented) => {
      const entry = live.get(hash(presented))
      return entry === undefined || entry.expiresAtMs <= now() ? undefined : entry.session
    }
  }
}

export class RealtimeSecrets extends Context.Tag("gateway/RealtimeSecrets")<RealtimeSecrets, RealtimeSecretsShape>() {
  static readonly layer = Layer.sync(RealtimeSecrets, () => makeRealtimeSecrets())
  static readonly layerTest = (now: () => number) => Layer.succeed(RealtimeSecrets, makeRealtimeSecrets(now))
}
