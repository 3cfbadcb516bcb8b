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
import { exitWith, orDash, printJson, table } from "../output.js"
import { adminKeyOf, serverUrl, withHttp } from "../remote.js"
import type { createOptions, listOptions, stopOptions } from "./tunnel.js"

/** A management error body: `{ _tag, message }`. */
const ErrorBody = Schema.Struct({ message: Schema.String })

/**
 * One call to the tunnel API of the server at `url`, the answer decoded with the spec's status
 * schema; the refusals become one readable line (a server older than this client answers 501 for
 * a backend it does not serve).
 */
const call = (url: string, adminKey: string | undefined, method: "GET" | "POST", path: string, body?: unknown) =>
  Effect.gen(function* () {
    const client = yield* HttpClient.HttpClient
    let request =
      method === "GET"
        ? HttpClientRequest.get(`${url}${path}`)
        : HttpClientRequest.post(`${url}${path}`).pipe(HttpClientRequest.bodyUnsafeJson(body ?? {}))
    if (adminKey) request = HttpClientRequest.bearerToken(request, adminKey)
    const response = yield* client.execute(request).pipe(
      Effect.timeout("60 seconds"),
      Effect.mapError(() => new BadRequest({ message: `no gateway answers at ${url} (is it running?)` }))
    )
    if (response.status === 501)
      return yield* new BadRequest({ message: `the server at ${url} does not serve ${path} (501: a version without this tunnel backend)` })
    if (response.status === 401 || response.status === 403)
      return yield* new BadRequest({
        message: adminKey ? "the admin key was refused" : "an admin API key is needed: pass --api-key or set GATEWAY_API_KEY"
      })
    if (response.status >= 400) {
      const detail = yield* HttpClientResponse.schemaBodyJson(ErrorBody)(response).pipe(Effect.option)
      return yield* new BadRequest({
        message: `${method} ${path}: HTTP ${response.status}${Option.match(detail, { onNone: () => "", onSome: (d) => `: ${d.message}` })}`
      })
    }
    return yield* HttpClientResponse.schemaBodyJson(MeshStatusLoose)(response).pipe(
      Effect.mapError((e) => new BadRequest({ message: `${method} ${path}: unexpected answer (${e.message})` }))
    )
  }).pipe(Effect.scoped)

/** A status as any backend answers it (the mesh's with its extra fields). */
const MeshStatusLoose = Schema.extend(
  TunnelStatus,
  Schema.Struct({
    funnelNotEnabled: Schema.optional(Schema.Boolean),
    enableUrl: Schema.optional(Schema.String),
    error: Schema.optional(Schema.String)
  })
)
type Status = typeof MeshStatusLoose.Type

/** Reads the sudo password from stdin (one line), for `--sudo-password-stdin`. */
const passwordFromStdin = Effect.promise(
  () =>
    new Promise<string>((resolve) => {
      let text = ""
      process.stdin.setEncoding("utf8")
      process.stdin.on("data", (c: string) => (text += c))
      process.stdin.once("end", () => resolve(text.split(/\r?\n/)[0] ?? ""))
    })
)

/** Polls the status until it is no longer `starting` (at most `seconds`). */
const waitSettled = (url: string, key: string | undefined, kind: TunnelKind, first: Status, seconds: number) =>
  Effect.gen(function* () {
    let status = first
    const end = Date.now() + seconds * 1000
    while (status.phase === "starting" && Date.now() < end) {
      yield* Effect.sleep("500 millis")
      status = yield* call(url, key, "GET", `/api/tunnels/${kind}`)
    }
    return status
  })

/** A tunnel that did not come up: its reason (and where to allow the funnel) on stderr, exit 1. */
const reportFailure = (status: Status) =>
  Effect.gen(function* () {
    if (status.phase !== "error" && status.phase !== "needs_auth") return
    yield* Console.error(
      `error: ${status.lastError ?? status.phase}${status.enableUrl ? ` (allow the funnel at ${status.enableUrl})` : ""}`
    )
    yield* exitWith(1)
  })

const row = (kind: TunnelKind, s: Status) => [kind, s.phase, orDash(s.publicUrl ?? s.tunnelUrl), orDash(s.apiUrl), orDash(s.lastError)]
const HEADERS = ["KIND", "PHASE", "PUBLIC URL", "API URL", "LAST ERROR"]

export const list = (opts: Parsed<typeof listOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const key = adminKeyOf(opts.apiKey)
    const statuses = yield* Effect.forEach(TUNNEL_KINDS, (kind) =>
      Effect.map(call(url, key, "GET", `/api/tunnels/${kind}`), (s) => [kind, s] as const)
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
    const sudoPassword = opts.sudoPasswordStdin ? yield* passwordFromStdin : undefined
    const answered =
      opts.kind === "mesh"
        ? yield* call(url, key, "POST", "/api/tunnels/mesh/enable", {
            ...(hostname ? { hostname } : {}),
            ...(port ? { port } : {}),
            ...(sudoPassword ? { sudoPassword } : {})
          })
        : yield* call(url, key, "POST", `/api/tunnels/${opts.kind}`, { action: "enable", ...(authToken ? { authToken } : {}) })
    // The address is shown once the tunnel is registered: wait for it (or for the reason it is not).
    const status = yield* waitSettled(url, key, opts.kind, answered, opts.wait)
    if (opts.json) yield* printJson({ kind: opts.kind, ...status })
    else yield* Console.log(table(HEADERS, [row(opts.kind, status)]))
    yield* reportFailure(status)
  }).pipe(withHttp)

export const stop = (opts: Parsed<typeof stopOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const key = adminKeyOf(opts.apiKey)
    const status =
      opts.kind === "mesh"
        ? yield* call(
            url,
            key,
            "POST",
            "/api/tunnels/mesh/disable",
            opts.sudoPasswordStdin ? { sudoPassword: yield* passwordFromStdin } : {}
          )
        : yield* call(url, key, "POST", `/api/tunnels/${opts.kind}`, { action: "disable" })
    if (opts.json) return yield* printJson({ kind: opts.kind, ...status })
    yield* Console.log(table(HEADERS, [row(opts.kind, status)]))
  }).pipe(withHttp)
