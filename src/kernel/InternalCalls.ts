import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as crypto from "node:crypto"
import { clusterSecret } from "./clusterSecret.js"

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

/** This process's credential: its primary's when it is a cluster worker given one (src/kernel/clusterSecret.ts), else 32 random bytes. */
const secretOfProcess = (): string => clusterSecret() ?? crypto.randomBytes(32).toString("hex")

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
