import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { AppConfig, throughTunnel } from "../../platform/config/AppConfig.js"

/**
 * Where this gateway is reached from a browser, for OAuth callbacks (a provider's sign-in, an MCP
 * server's): NEXT_PUBLIC_BASE_URL (the spec's setting for a tunnel's public host), else
 * GATEWAY_PUBLIC_URL, else the request's Host (https when the request came through a tunnel, whose
 * edge serves only https). Read once, when a handler group is built: the effect it gives reads the request.
 */
export const makeCallbackBase = Effect.gen(function* () {
  const app = yield* AppConfig
  const legacyUrl = yield* Config.option(Config.string("GATEWAY_PUBLIC_URL")).pipe(Effect.orDie)
  const configured = Option.orElse(Option.fromNullable(app.publicBaseUrl), () => legacyUrl)
  return Effect.map(HttpServerRequest.HttpServerRequest, (req) =>
    Option.isSome(configured)
      ? configured.value.replace(/\/+$/, "")
      : `${throughTunnel(req.headers) ? "https" : "http"}://${req.headers["host"] ?? "127.0.0.1:20128"}`
  )
})
