import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as crypto from "node:crypto"
import { BadGateway, BadRequest, Conflict, Forbidden, NotFound } from "../../../domain/errors.js"
import { Capture } from "../../../services/inspector/Capture.js"
import { InspectorError, type ListFilter, select, summaryOf } from "../../../services/inspector/bufferViews.js"
import { Inspector } from "../../../services/inspector/Inspector.js"
import { Tproxy } from "../../../services/inspector/Tproxy.js"
import { ManagementApi } from "../Api.js"

const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value, null, 2))

/** An inspector failure as the API's errors (messages are the inspector's own: no internals). */
const mapped = (e: unknown): BadRequest | NotFound | Conflict | BadGateway => {
  if (e instanceof InspectorError) {
    switch (e.status) {
      case 404:
        return new NotFound({ message: e.message })
      case 409:
        return new Conflict({ message: e.message })
      case 502:
        return new BadGateway({ message: e.message })
      default:
        return new BadRequest({ message: e.message })
    }
  }
  return new BadGateway({ message: "the replay failed" })
}

/** The header the internal ingest route requires (INSPECTOR_INTERNAL_INGEST_TOKEN). */
export const INGEST_TOKEN_HEADER = "x-inspector-ingest-token"

/** `/api/tools/traffic-inspector/*` (docs/inspector.md). */
const inspectorGroup = HttpApiBuilder.group(ManagementApi, "inspector", (handlers) =>
  Effect.gen(function* () {
    const inspector = yield* Inspector
    const capture = yield* Capture
    const core = inspector.core
    /** Entries of a session (recording or saved), or of the buffer. */
    const entriesFor = (q: { readonly sessionId?: string | undefined }) =>
      q.sessionId === undefined
        ? Effect.zipRight(
            inspector.gathered,
            Effect.sync(() => core.entries({}))
          )
        : Effect.mapError(
            Effect.map(inspector.sessions.get(q.sessionId), (s) => s.entries),
            (e) => new NotFound({ message: e.message })
          )
    const filtered = (urlParams: ListFilter) => Effect.map(entriesFor(urlParams), (all) => select(all, urlParams))
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.map(filtered(urlParams), (list) => ({
          requests: list.map(summaryOf),
          total: list.length,
          bufferSize: inspector.config.bufferSize
        }))
      )
      .handle("clear", () =>
        Effect.zipRight(
          inspector.gathered,
          Effect.sync(() => {
            const n = core.entries({}).length
            core.clear()
            return { cleared: n }
          })
        )
      )
      .handle("get", ({ path, urlParams }) =>
        Effect.gen(function* () {
          const show = urlParams.showSecrets === "true"
          if (show && inspector.config.maskSecrets) {
            // Masked before buffering: there is nothing to show.
            return yield* Effect.fail(
              new Forbidden({ message: "secrets were masked before buffering (INSPECTOR_MASK_SECRETS=true): none are kept to show" })
            )
          }
          yield* inspector.gathered
          const e = core.get(path.id, show)
          if (!e) return yield* Effect.fail(new NotFound({ message: `no intercepted request ${path.id} in the buffer` }))
          return e
        })
      )
      .handle("replay", ({ path }) =>
        Effect.zipRight(
          inspector.gathered,
          Effect.mapError(Effect.tryPromise({ try: () => core.replay(path.id), catch: (e) => e }), mapped)
        )
      )
      .handle("annotate", ({ path, payload }) =>
        Effect.zipRight(
          inspector.gathered,
          Effect.suspend(() => {
            const e = core.annotate(path.id, payload.note)
            return e
              ? Effect.succeed(summaryOf(e))
              : Effect.fail(new NotFound({ message: `no intercepted request ${path.id} in the buffer` }))
          })
        )
      )
      .handle("exportHar", ({ urlParams }) => Effect.map(filtered(urlParams), (list) => encode(core.har(list))))
      .handle("hosts", () => capture.hosts.list)
      .handle("addHost", ({ payload }) => capture.hosts.add(payload))
      .handle("removeHost", ({ path }) => Effect.map(capture.hosts.remove(path.host), (removed) => ({ removed })))
      .handle("patchHost", ({ path, payload }) => capture.hosts.patch(path.host, payload.enabled))
      .handle("captureModes", () => capture.modes)
      .handle("httpProxy", ({ payload }) => capture.httpProxy(payload.action))
      .handle("systemProxy", ({ payload }) => capture.systemProxy(payload.action))
      .handle("tlsIntercept", ({ payload }) => capture.tlsIntercept(payload.enabled))
      .handle("sessions", () => Effect.map(inspector.sessions.list, (sessions) => ({ sessions })))
      .handle("startSession", ({ payload }) => inspector.sessions.start(payload.name ?? null))
      .handle("session", ({ path }) =>
        Effect.mapError(
          Effect.map(inspector.sessions.get(path.id), (s) => ({ session: s.meta, requests: s.entries })),
          (e) => new NotFound({ message: e.message })
        )
      )
      .handle("updateSession", ({ path, payload }) =>
        Effect.mapError(
          payload.action === "stop" ? inspector.sessions.stop(path.id) : inspector.sessions.rename(path.id, payload.name ?? null),
          (e) => (e.status === 404 ? new NotFound({ message: e.message }) : new Conflict({ message: e.message }))
        )
      )
      .handle("deleteSession", ({ path }) =>
        Effect.mapError(Effect.as(inspector.sessions.remove(path.id), { deleted: path.id }), (e) => new NotFound({ message: e.message }))
      )
      .handle("sessionHar", ({ path }) =>
        Effect.mapError(
          Effect.map(inspector.sessions.get(path.id), (s) => encode(core.har(s.entries, `session ${s.meta.name ?? s.meta.id}`))),
          (e) => new NotFound({ message: e.message })
        )
      )
      .handle("sessionExport", ({ path, urlParams }) =>
        Effect.mapError(
          Effect.map(inspector.sessions.get(path.id), (s) =>
            urlParams.format === "jsonl"
              ? new TextEncoder().encode(s.entries.map((e) => JSON.stringify(e)).join("\n") + (s.entries.length > 0 ? "\n" : ""))
              : encode(core.har(s.entries, `session ${s.meta.name ?? s.meta.id}`))
          ),
          (e) => new NotFound({ message: e.message })
        )
      )
  })
)

/** The CA certificate and the ingest route (no admin credentials; loopback-only like the rest). */
const inspectorOpenGroup = HttpApiBuilder.group(ManagementApi, "inspectorOpen", (handlers) =>
  Effect.gen(function* () {
    const inspector = yield* Inspector
    const capture = yield* Capture
    const token = inspector.config.ingestToken
    const expected = token === undefined ? undefined : crypto.createHash("sha256").update(token).digest()
    return handlers
      .handle("caPem", () => Effect.map(capture.caPem, (pem) => new TextEncoder().encode(pem)))
      .handle("ingest", ({ payload }) =>
        Effect.gen(function* () {
          if (expected === undefined)
            return yield* Effect.fail(new Forbidden({ message: "the ingest route is off: set INSPECTOR_INTERNAL_INGEST_TOKEN to use it" }))
          const req = yield* HttpServerRequest.HttpServerRequest
          const presented = req.headers[INGEST_TOKEN_HEADER]
          const given = crypto
            .createHash("sha256")
            .update(presented ?? "")
            .digest()
          if (presented === undefined || !crypto.timingSafeEqual(given, expected)) {
            return yield* Effect.fail(new Forbidden({ message: `missing or wrong ${INGEST_TOKEN_HEADER} header` }))
          }
          let url: URL
          try {
            url = new URL(payload.url)
          } catch {
            return yield* Effect.fail(new BadRequest({ message: "url must be an absolute http(s) URL" }))
          }
          if (url.protocol !== "http:" && url.protocol !== "https:")
            return yield* Effect.fail(new BadRequest({ message: "url must be an absolute http(s) URL" }))
          const source = payload.source ?? "agent-bridge"
          const id = inspector.core.sink.begin({
            source,
            method: payload.method,
            url: payload.url,
            headers: payload.requestHeaders ?? {},
            ...(payload.requestBody !== undefined ? { body: Buffer.from(payload.requestBody) } : {})
          })
          if (payload.status === "error" || (payload.status === undefined && payload.error !== undefined))
            inspector.core.sink.fail(id, payload.error ?? "failed")
          else if (payload.status !== undefined)
            inspector.core.sink.end(id, {
              status: payload.status,
              headers: payload.responseHeaders ?? {},
              ...(payload.responseBody !== undefined ? { body: Buffer.from(payload.responseBody) } : {}),
              ...(payload.durationMs !== undefined ? { ttfbMs: payload.durationMs } : {})
            })
          return { id }
        })
      )
  })
)

/** `/api/tools/agent-bridge/tproxy` (docs/capture.md). */
const tproxyGroup = HttpApiBuilder.group(ManagementApi, "tproxy", (handlers) =>
  Effect.map(Tproxy, (tproxy) =>
    handlers
      .handle("status", () => tproxy.status)
      .handle("start", ({ payload }) => tproxy.start(payload))
      .handle("stop", () => tproxy.stop)
  )
)

/** The area's groups: the inspector, its open routes, transparent capture (TPROXY). */
export const layer = Layer.mergeAll(inspectorGroup, inspectorOpenGroup, tproxyGroup)
