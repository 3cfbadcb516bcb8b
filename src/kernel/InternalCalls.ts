import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as crypto from "node:crypto"

/** The header carrying the process's internal credential. */
export const INTERNAL_HEADER = "x-gateway-internal"
/** With the credential: the API key id the request is made for. */
export const ON_BEHALF_HEADER = "x-gateway-on-behalf-of"
/** With the credential: the request id to use (a batch line's `<batch>_<line>`). */
export const INTERNAL_REQUEST_ID_HEADER = "x-gateway-internal-request-id"

/**
 * The process's credential for its own loopback calls: random per start (one for all the workers
 * of `--workers N`), never written anywhere; with it the dispatcher takes the caller's identity
 * from the request.
 */
export interface InternalCallsShape {
  readonly secret: string
  /** Whether `presented` is this process's secret (constant time). */
  readonly check: (presented: string) => boolean
}

/**
 * The variable through which the primary of `gateway --workers N` gives every worker one
 * credential (src/server/workers.ts): an own-route call goes to the shared port, and node's cluster
 * may hand it to another worker, which then takes it as its own. Read only by a cluster worker (one
 * with a channel to its primary), and removed from the environment as it is read, so nothing the
 * worker starts inherits it.
 */
export const CLUSTER_SECRET_ENV = "GATEWAY_CLUSTER_INTERNAL_SECRET"

/** This process's credential: its primary's when it is a cluster worker given one, else 32 random bytes. */
const secretOfProcess = (): string => {
  const given = process.env[CLUSTER_SECRET_ENV]
  delete process.env[CLUSTER_SECRET_ENV]
  const worker = process.env.GATEWAY_WORKER_ID !== undefined && typeof process.send === "function"
  return worker && given !== undefined && /^[0-9a-f]{64}$/.test(given) ? given : crypto.randomBytes(32).toString("hex")
}

export class InternalCalls extends Context.Tag("gateway/InternalCalls")<InternalCalls, InternalCallsShape>() {
  static readonly layer = Layer.sync(InternalCalls, () => {
    const secret = secretOfProcess()
    const expected = Buffer.from(secret)
    return {
      secret,
      check: (presented) => {
        const p = Buffer.from(presented)
        return p.length === expected.length && crypto.timingSafeEqual(p, expected)
      }
    }
  })
}
