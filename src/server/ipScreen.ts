/**
 * The inbound IP filter at the server's door (docs/operations.md, "Settings"): before anything
 * else, on every route and on WebSocket upgrades. With both lists empty it is one boolean read
 * per request.
 */
import * as Effect from "effect/Effect"
import type * as http from "node:http"
import { gatewayHeaders } from "../inference/io.js"
import { newRequestId } from "../kernel/ids.js"
import type { FeatureFlagsShape } from "../platform/flags/FeatureFlags.js"
import { clientAddress } from "../platform/http/request.js"
import { ipRefusal } from "../platform/settings/ipFilter.js"
import type { SettingsShape } from "../platform/settings/Settings.js"
import type { Planes, Run } from "./requestHandler.js"

/** Whether the client's address is read from forwarded headers (a flag). */
export const TRUST_PROXY_FLAG = "GATEWAY_TRUST_PROXY_HEADERS" as const

export interface IpScreen {
  /** Serves the request, or answers 403 when the filter refuses its client. */
  readonly screened: (req: http.IncomingMessage, res: http.ServerResponse) => void
  /** The refusal of an upgrade's client (its message), or undefined to let it in. */
  readonly upgradeRefusal: (req: http.IncomingMessage) => string | undefined
}

export interface IpScreenDeps {
  readonly flags: FeatureFlagsShape
  readonly settings: SettingsShape
  readonly run: Run
  /** The trust flag as read when the server started; kept up to date by each screened request. */
  readonly trustProxy: boolean
  readonly serve: Planes["serve"]
  readonly failed: Planes["failed"]
  /** A refused request's answer is written: no longer one of the answers in flight (`ServerTraffic.open`). */
  readonly answered: (res: http.ServerResponse) => void
}

/** The IP screen: a request refused by the filter is answered 403 (`ip_not_allowed`), any other goes on to `serve`. */
export const makeIpScreen = (deps: IpScreenDeps): IpScreen => {
  const { flags, settings, run, serve, failed, answered } = deps
  let trustProxy = deps.trustProxy
  /** The filter's verdict for `req`; undefined lets it in. */
  const refusal = (req: http.IncomingMessage, trust: boolean) => {
    const verdict = settings.ipFilter().check(clientAddress(req, trust))
    return verdict && ipRefusal(verdict)
  }
  const refuse = (req: http.IncomingMessage, res: http.ServerResponse, message: string) => {
    const requestId = newRequestId()
    const body = JSON.stringify({ error: { message, type: "forbidden", code: "ip_not_allowed", param: null } })
    res.writeHead(403, { ...gatewayHeaders(requestId), "content-type": "application/json", "content-length": Buffer.byteLength(body) })
    res.end(body)
    req.resume()
    answered(res)
  }
  const screened = (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!settings.ipFilter().active) return serve(req, res)
    const trust = flags.peekEnabled(TRUST_PROXY_FLAG)
    if (trust !== undefined) {
      trustProxy = trust
      const refused = refusal(req, trust)
      return refused ? refuse(req, res, refused) : serve(req, res)
    }
    // The flag is not known fresh: read it, then decide (the request waits a moment).
    run(
      Effect.map(flags.enabled(TRUST_PROXY_FLAG), (t) => {
        trustProxy = t
        try {
          const refused = refusal(req, t)
          return refused ? refuse(req, res, refused) : serve(req, res)
        } catch (e) {
          failed(req, res, e)
        }
      })
    )
  }
  const upgradeRefusal = (req: http.IncomingMessage) =>
    settings.ipFilter().active ? refusal(req, flags.peekEnabled(TRUST_PROXY_FLAG) ?? trustProxy) : undefined
  return { screened, upgradeRefusal }
}
