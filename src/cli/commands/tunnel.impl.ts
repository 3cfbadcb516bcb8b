import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../domain/errors.js"
import { TUNNEL_KINDS, type TunnelKind, TunnelStatus } from "../../domain/tunnels.js"
import type { Parsed } from "../handler.js"
import { orDash, printJson, table } from "../output.js"
import { adminKeyOf, serverUrl, withHttp } from "../remote.js"
import type { createOptions, listOptions, stopOptions } from "./tunnel.js"

/** A management error body: `{ _tag, message }`. */
const ErrorBody = Schema.Struct({ message: Schema.String })

/** A backend this build does not serve (its route answers 501). */
class NotBuilt extends BadRequest {}
const notBuilt = (path: string) => new NotBuilt({ message: `this tunnel backend is not built in this version (the server answers 501 on ${path})` })

/**
 * One call to the tunnel API of the server at `url`. The HttpApi group declares only the quick
 * tunnel's routes so far, so the request is made by hand and the answer decoded with the spec's
 * status schema; 501 (a backend not built) and the other refusals become one readable line.
 */
const call = (url: string, adminKey: string | undefined, method: "GET" | "POST", path: string, body?: unknown) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    let request = method === "GET" ? HttpClientRequest.get(`${url}${path}`) : HttpClientRequest.post(`${url}${path}`).pipe(HttpClientRequest.bodyUnsafeJson(body ?? {}))
    if (adminKey) request = HttpClientRequest.bearerToken(request, adminKey)
    const response = yield* client.execute(request).pipe(
      Effect.timeout("30 seconds"),
      Effect.mapError(() => new BadRequest({ message: `no gateway answers at ${url} (is it running?)` }))
    )
    if (response.status === 501) return yield* notBuilt(path)
    if (response.status === 401 || response.status === 403)
      return yield* new BadRequest({ message: adminKey ? "the admin key was refused" : "an admin API key is needed: pass --api-key or set GATEWAY_API_KEY" })
    if (response.status >= 400) {
      const detail = yield* HttpClientResponse.schemaBodyJson(ErrorBody)(response).pipe(Effect.option)
      return yield* new BadRequest({ message: `${method} ${path}: HTTP ${response.status}${Option.match(detail, { onNone: () => "", onSome: (d) => `: ${d.message}` })}` })
    }
    return yield* HttpClientResponse.schemaBodyJson(TunnelStatus)(response).pipe(
      Effect.mapError((e) => new BadRequest({ message: `${method} ${path}: unexpected answer (${e.message})` }))
    )
  }).pipe(Effect.scoped)

const row = (kind: TunnelKind, s: TunnelStatus) => [kind, s.phase, orDash(s.publicUrl ?? s.tunnelUrl), orDash(s.apiUrl), orDash(s.lastError)]
const HEADERS = ["KIND", "PHASE", "PUBLIC URL", "API URL", "LAST ERROR"]

export const list = (opts: Parsed<typeof listOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const key = adminKeyOf(opts.apiKey)
    // A backend this build does not serve is listed as such; the others' statuses are still shown.
    const statuses = yield* Effect.forEach(TUNNEL_KINDS, (kind) =>
      Effect.map(
        call(url, key, "GET", `/api/tunnels/${kind}`).pipe(
          Effect.catchIf(
            (e): e is NotBuilt => e instanceof NotBuilt,
            () => Effect.succeed({ phase: "not built" } as unknown as TunnelStatus)
          )
        ),
        (s) => [kind, s] as const
      )
    )
    if (opts.json) return yield* printJson({ tunnels: statuses.map(([kind, s]) => ({ kind, ...s })) })
    yield* Console.log(
      table(
        HEADERS,
        statuses.map(([kind, s]) => row(kind, s))
      )
    )
  }).pipe(withHttp)

export const create = (opts: Parsed<typeof createOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const key = adminKeyOf(opts.apiKey)
    const hostname = Option.getOrUndefined(opts.hostname)
    const port = Option.getOrUndefined(opts.port)
    const authToken = Option.getOrUndefined(opts.authToken)
    const status =
      opts.kind === "mesh"
        ? yield* call(url, key, "POST", "/api/tunnels/mesh/enable", { ...(hostname ? { hostname } : {}), ...(port ? { port } : {}) })
        : yield* call(url, key, "POST", `/api/tunnels/${opts.kind}`, { action: "enable", ...(authToken ? { authToken } : {}) })
    if (opts.json) return yield* printJson({ kind: opts.kind, ...status })
    yield* Console.log(table(HEADERS, [row(opts.kind, status)]))
  }).pipe(withHttp)

export const stop = (opts: Parsed<typeof stopOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const key = adminKeyOf(opts.apiKey)
    const status =
      opts.kind === "mesh" ? yield* call(url, key, "POST", "/api/tunnels/mesh/disable", {}) : yield* call(url, key, "POST", `/api/tunnels/${opts.kind}`, { action: "disable" })
    if (opts.json) return yield* printJson({ kind: opts.kind, ...status })
    yield* Console.log(table(HEADERS, [row(opts.kind, status)]))
  }).pipe(withHttp)
