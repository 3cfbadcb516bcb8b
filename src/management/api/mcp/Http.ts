import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { BadGateway, BadRequest, Conflict, NotFound, ServiceUnavailable } from "../../../domain/errors.js"
import type { AllowMcpTools, McpServerRecord } from "../../../domain/mcpServers.js"
import { McpOAuth, type McpOAuthRefused } from "../../../services/mcp/McpOAuth.js"
import { initialHealth, type McpServerRefused, McpServers, offeringsOf, viewOf } from "../../../services/mcp/McpServers.js"
import { McpUpstreams, type McpUpstreamError } from "../../../services/mcp/McpUpstreams.js"
import { McpHttp } from "../../mcp/McpHttp.js"
import { ManagementApi } from "../Api.js"
import { makeCallbackBase } from "../callbackBase.js"
import { actor } from "../Principal.js"

const status = HttpApiBuilder.group(ManagementApi, "mcp", (handlers) =>
  Effect.map(McpHttp, (mcp) => handlers.handle("status", () => mcp.status).handle("restart", () => mcp.restart))
)

/** The registry's refusals as the API answers them (a create has no 404, an update no 409: a name does not change). */
const createRefused = (e: McpServerRefused) =>
  e.status === 409 ? new Conflict({ message: e.message }) : new BadRequest({ message: e.message })
const updateRefused = (e: McpServerRefused) =>
  e.status === 404 ? new NotFound({ message: e.message }) : new BadRequest({ message: e.message })

/** A failed call as the API answers it: 503 while the server cannot be reached, 502 for what went wrong there. */
const callFailed = (e: McpUpstreamError) =>
  e.reason === "unavailable" || e.reason === "unknown_server"
    ? new ServiceUnavailable({ message: e.message })
    : new BadGateway({ message: e.message })

/** A sign-in refused as the API answers it. */
const oauthRefused = (e: McpOAuthRefused) =>
  e.status === 404
    ? new NotFound({ message: e.message })
    : e.status === 502
      ? new BadGateway({ message: e.message })
      : new BadRequest({ message: e.message })

/** `POST /api/mcp/servers/{name}/allow` as the tools it leaves allowed. */
const allowedBy = (r: McpServerRecord, body: AllowMcpTools): ReadonlyArray<string> | string => {
  if (body.all === true && body.tools !== undefined) return "all: give all: true or tools, not both"
  if (body.all === true) return ["*"]
  if (body.tools === undefined) return "tools: give the names to allow, or all: true"
  if (body.add !== true) return [...new Set(body.tools)]
  return r.allowedTools.includes("*") ? ["*"] : [...new Set([...r.allowedTools, ...body.tools])]
}

/**
 * `/api/mcp/servers` (docs/mcp.md, "MCP servers behind the gateway"). The connections (McpUpstreams)
 * may not run in this gateway: a server then shows `starting` (or `disabled`) with nothing listed,
 * and a call is a 503.
 */
const servers = HttpApiBuilder.group(ManagementApi, "mcpServers", (handlers) =>
  Effect.gen(function* () {
    const registry = yield* McpServers
    const oauth = yield* McpOAuth
    const upstreams = Option.getOrUndefined(yield* Effect.serviceOption(McpUpstreams))
    const callbackBase = yield* makeCallbackBase

    const view = (r: McpServerRecord) => {
      const o = upstreams?.offerings(r.name)
      const health = upstreams?.health(r.name) ?? initialHealth(r)
      return viewOf(r, {
        health,
        tools: o?.tools.length ?? 0,
        resources: (o?.resources.length ?? 0) + (o?.resourceTemplates.length ?? 0),
        prompts: o?.prompts.length ?? 0,
        oauth: oauth.view(r, health)
      })
    }
    /** The server by name, the store read first if it changed. */
    const find = (name: string) =>
      Effect.flatMap(registry.refresh, () => {
        const r = registry.byName(name)
        return r === undefined ? Effect.fail(new NotFound({ message: `no MCP server named '${name}'` })) : Effect.succeed(r)
      })

    return handlers
      .handle("list", () => Effect.map(registry.refresh, () => ({ servers: registry.all().map(view) })))
      .handle("create", ({ payload }) =>
        Effect.flatMap(actor, (a) => registry.create(payload, a)).pipe(Effect.map(view), Effect.mapError(createRefused))
      )
      .handle("get", ({ path }) => Effect.map(find(path.name), view))
      .handle("update", ({ path, payload }) =>
        Effect.flatMap(actor, (a) => registry.update(path.name, payload, a)).pipe(Effect.map(view), Effect.mapError(updateRefused))
      )
      .handle("remove", ({ path }) =>
        Effect.gen(function* () {
          const removed = view(yield* find(path.name))
          yield* Effect.flatMap(actor, (a) => registry.remove(path.name, a)).pipe(
            Effect.mapError((e) => new NotFound({ message: e.message }))
          )
          return { removed }
        })
      )
      .handle("allow", ({ path, payload }) =>
        Effect.gen(function* () {
          const r = yield* find(path.name)
          const allowedTools = allowedBy(r, payload)
          if (typeof allowedTools === "string") return yield* new BadRequest({ message: allowedTools })
          const a = yield* actor
          return view(yield* registry.update(path.name, { allowedTools }, a).pipe(Effect.mapError(updateRefused)))
        })
      )
      .handle("tools", ({ path }) =>
        Effect.map(find(path.name), (r) => ({ offerings: upstreams === undefined ? [] : offeringsOf(r, upstreams.offerings(r.name)) }))
      )
      .handle("call", ({ path, payload }) =>
        Effect.gen(function* () {
          const r = yield* find(path.name)
          if (upstreams === undefined)
            return yield* new ServiceUnavailable({
              message: `MCP server '${r.name}' is not connected: this gateway runs no connections to MCP servers`
            })
          const result = yield* upstreams.callTool(r.name, payload.tool, payload.arguments).pipe(Effect.mapError(callFailed))
          return { ...result, content: result.content ?? [] }
        })
      )
      .handle("oauthStart", ({ path }) =>
        Effect.flatMap(callbackBase, (base) => oauth.start(path.name, base)).pipe(Effect.mapError(oauthRefused))
      )
      .handle("oauthLogout", ({ path }) =>
        Effect.gen(function* () {
          yield* oauth.logout(path.name).pipe(Effect.mapError((e) => new NotFound({ message: e.message })))
          return view(yield* find(path.name))
        })
      )
  })
)

/** The browser's redirect after a sign-in: no management credentials, the sign-in's one-time state instead. */
const oauthCallback = HttpApiBuilder.group(ManagementApi, "mcpOAuthCallback", (handlers) =>
  Effect.map(McpOAuth, (oauth) =>
    handlers.handle("callback", ({ urlParams }) => oauth.complete(urlParams).pipe(Effect.mapError(oauthRefused)))
  )
)

/** The MCP area's handlers: the MCP server's state, the registry of upstream servers and their sign-ins' callback. */
export const layer = Layer.mergeAll(status, servers, oauthCallback)
