import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { BadRequest } from "../../../domain/errors.js"
import type { MeshStatus, TunnelStatus } from "../../../domain/tunnels.js"
import { Tunnels, type TunnelView } from "../../../services/tunnels/Tunnels.js"
import { ManagementApi } from "../Api.js"

const sse = (event: string, data: unknown) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

/** The spec's status object and nothing else (a backend's extra fields are the mesh's alone). */
const common = (s: TunnelView): TunnelStatus => ({
  phase: s.phase,
  running: s.running ?? s.phase === "running",
  publicUrl: s.publicUrl ?? null,
  apiUrl: s.apiUrl ?? null,
  targetUrl: s.targetUrl ?? null,
  lastError: s.lastError ?? null
})
const mesh = (s: TunnelView): MeshStatus => ({
  ...common(s),
  tunnelUrl: s.publicUrl ?? null,
  ...(s["funnelNotEnabled"] === true ? { funnelNotEnabled: true } : {}),
  ...(typeof s["enableUrl"] === "string" ? { enableUrl: s["enableUrl"] } : {}),
  ...(typeof s["error"] === "string" ? { error: s["error"] } : {})
})

/** Tunnels (docs/tunnels.md). */
export const layer = HttpApiBuilder.group(ManagementApi, "tunnels", (handlers) =>
  Effect.map(Tunnels, (tunnels) =>
    handlers
      .handle("quickStatus", () => Effect.map(tunnels.status("quick"), common))
      .handle("quick", ({ payload }) =>
        payload.authToken !== undefined
          ? Effect.fail(
              new BadRequest({ message: "authToken is for the token tunnel (POST /api/tunnels/token); the quick tunnel needs none" })
            )
          : Effect.map(tunnels.quick(payload.action), common)
      )
      .handle("tokenStatus", () => Effect.map(tunnels.status("token"), common))
      .handle("token", ({ payload }) => Effect.map(tunnels.token(payload.action, payload.authToken), common))
      .handle("meshStatus", () => Effect.map(tunnels.status("mesh"), mesh))
      .handle("meshCheck", () => tunnels.mesh.check)
      .handle("meshInstall", ({ payload }) =>
        Effect.sync(() => {
          // The install runs to its end even if the page that asked goes away; its lines stream while it runs.
          const events = Stream.async<string>((emit) => {
            void emit.single(sse("progress", { line: "starting the install" }))
            Effect.runPromise(tunnels.mesh.install(payload.sudoPassword, (line) => void emit.single(sse("progress", { line })))).then(
              (r) => {
                void emit.single(sse("done", r))
                void emit.end()
              },
              (e: unknown) => {
                void emit.single(
                  sse("done", { ok: false, error: `the install could not run: ${e instanceof Error ? e.message : String(e)}` })
                )
                void emit.end()
              }
            )
          })
          return HttpServerResponse.stream(Stream.encodeText(events), {
            contentType: "text/event-stream",
            headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
          })
        })
      )
      .handle("meshStartDaemon", ({ payload }) => tunnels.mesh.startDaemon(payload.sudoPassword))
      .handle("meshLogin", ({ payload }) => tunnels.mesh.login(payload.hostname))
      .handle("meshEnable", ({ payload }) => Effect.map(tunnels.mesh.enable(payload), mesh))
      .handle("meshDisable", ({ payload }) => Effect.map(tunnels.mesh.disable(payload.sudoPassword), mesh))
  )
)
