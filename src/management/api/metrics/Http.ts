import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { safeEqual } from "../../../services/auth/password.js"
import { bearerToken } from "../../../platform/http/request.js"
import { GatewayMetrics } from "../../../services/observability/GatewayMetrics.js"
import { ManagementApi, ManagementAuth } from "../Api.js"
import { MetricsAuth } from "./Api.js"

/** The metrics token if one is set, else the management API's own authentication. */
const MetricsAuthLive = Layer.effect(
  MetricsAuth,
  Effect.gen(function* () {
    const management = yield* ManagementAuth
    const token = Option.filter(
      yield* Effect.orDie(Config.option(Config.redacted("GATEWAY_METRICS_TOKEN"))),
      (t) => Redacted.value(t).trim() !== ""
    )
    return Effect.gen(function* () {
      const req = yield* HttpServerRequest.HttpServerRequest
      const presented = bearerToken(req.headers["authorization"])
      if (Option.isSome(token) && presented !== undefined && safeEqual(presented, Redacted.value(token.value).trim())) return
      yield* management
    })
  })
)

/** `GET /metrics`: the Prometheus text exposition of this process's metrics. */
export const layer = HttpApiBuilder.group(ManagementApi, "metrics", (handlers) =>
  handlers.handle("scrape", () => Effect.flatMap(GatewayMetrics, (m) => m.scrape))
).pipe(Layer.provide(MetricsAuthLive))
