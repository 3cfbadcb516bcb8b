import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { GatewayServer } from "./GatewayServer.js"
import { INTERNAL_HEADER, INTERNAL_REQUEST_ID_HEADER, InternalCalls, ON_BEHALF_HEADER } from "./InternalCalls.js"

/** One call to an own route. */
export interface OwnRouteRequest {
  /** `POST` unless said. */
  readonly method?: string
  /** The JSON body: a string as it is, a `FormData` as multipart, anything else serialised. */
  readonly body?: unknown
  /** The API key id the call is made for (its budget, limits and usage rows); none: the gateway's own. */
  readonly onBehalfOf?: string | null
  /** The request id the call gets (`[A-Za-z0-9_-]{1,100}`); none: a new one. */
  readonly requestId?: string
  /** More request headers (`x-gateway-compression: off`, ...). */
  readonly headers?: Readonly<Record<string, string>>
  readonly signal?: AbortSignal
}

export interface OwnRoutesShape {
  /** The loopback base URL of this process's server (`http://127.0.0.1:20128`). */
  readonly base: string
  /** Sends one request to `path` (`/v1/chat/completions`) of this process's server. */
  readonly fetch: (path: string, request?: OwnRouteRequest) => Promise<Response>
}

/** The loopback host to reach a server bound to `host` (an unspecified address answers on 127.0.0.1). */
export const loopbackHost = (host: string): string =>
  host === "0.0.0.0" || host === "::" || host === "" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host

export class OwnRoutes extends Context.Tag("gateway/OwnRoutes")<OwnRoutes, OwnRoutesShape>() {
  static readonly layer = Layer.effect(
    OwnRoutes,
    Effect.gen(function* () {
      const server = yield* GatewayServer
      const internal = yield* InternalCalls
      const base = `http://${loopbackHost(server.host)}:${server.port}`
      return {
        base,
        fetch: (path, request = {}) => {
          const form = request.body instanceof FormData
          return fetch(`${base}${path}`, {
            method: request.method ?? "POST",
            headers: {
              // A form's content type (its multipart boundary) is fetch's to set.
              ...(form ? {} : { "content-type": "application/json" }),
              ...request.headers,
              [INTERNAL_HEADER]: internal.secret,
              ...(request.onBehalfOf ? { [ON_BEHALF_HEADER]: request.onBehalfOf } : {}),
              ...(request.requestId !== undefined ? { [INTERNAL_REQUEST_ID_HEADER]: request.requestId } : {})
            },
            ...(request.body === undefined
              ? {}
              : {
                  body: form ? (request.body as FormData) : typeof request.body === "string" ? request.body : JSON.stringify(request.body)
                }),
            ...(request.signal ? { signal: request.signal } : {})
          })
        }
      }
    })
  )
}

/** A service the management API reads, built before the server listens, that calls the own routes once it does. */
export interface TakesOwnRoutes {
  readonly setOwnRoutes: (own: OwnRoutesShape | undefined) => void
}

/** Gives `tag`'s service the gateway's own routes once the server listens, and takes them back when it stops. */
export const bindOwnRoutes = <I, S extends TakesOwnRoutes>(tag: Context.Tag<I, S>): Layer.Layer<never, never, I | OwnRoutes> =>
  Layer.scopedDiscard(
    Effect.flatMap(Effect.zip(tag, OwnRoutes), ([service, own]) =>
      Effect.zipRight(
        Effect.sync(() => service.setOwnRoutes(own)),
        Effect.addFinalizer(() => Effect.sync(() => service.setOwnRoutes(undefined)))
      )
    )
  )
