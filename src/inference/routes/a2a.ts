/**
 * A2A (docs/skills.md, "A2A"): `POST /a2a`, JSON-RPC 2.0, authenticated like every inference
 * route (a gateway key when the gateway requires one); the agent card, public, at
 * `/.well-known/agent-card.json`. JSON-RPC errors are answered with status 200 and an `error`
 * member, as JSON-RPC over HTTP does; only what happens before JSON-RPC (authentication, a body
 * too large) is an HTTP error.
 */
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import {
  A2A_PATH,
  AGENT_CARD_PATH,
  agentCard,
  capabilitiesTask,
  readSend,
  RpcCode,
  rpcError,
  rpcResult,
  skillsTable
} from "../../a2a/protocol.js"
import type { InferenceAccess } from "../../config/AppConfig.js"
import { openAiChat } from "../../formats/openai-chat.js"
import { requestOrigin } from "../../http/request.js"
import { jsonTooDeep, TOO_DEEP_MESSAGE } from "../../http/untrusted.js"
import type { SkillCatalogShape } from "../../skills/SkillCatalog.js"
import { readBody, type RequestContext, sendJson } from "../io.js"
import type { RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

/** A2A bodies are one small JSON-RPC request. */
const MAX_A2A_BODY_BYTES = 1024 * 1024

const originOf = (deps: RouteDeps, ctx: RequestContext) =>
  Effect.map(deps.flag("GATEWAY_TRUST_PROXY_HEADERS"), (trust) => requestOrigin(ctx.req, trust))

const parse = (text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly message: string } => {
  if (text.trim() === "") return { ok: false, message: "the request body is empty; expected a JSON-RPC 2.0 request" }
  if (jsonTooDeep(text)) return { ok: false, message: `the request body is ${TOO_DEEP_MESSAGE}` }
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (e) {
    return { ok: false, message: `the request body is not valid JSON: ${(e as Error).message}` }
  }
}

const send = (deps: RouteDeps, catalog: SkillCatalogShape) =>
  Effect.fnUntraced(function* (ctx: RequestContext) {
    const buf = ctx.body ?? (yield* readBody(ctx.req, MAX_A2A_BODY_BYTES))
    const parsed = parse(buf.toString("utf8"))
    if (!parsed.ok) return sendJson(ctx, 200, rpcError(null, { code: RpcCode.parseError, message: parsed.message }))
    const request = readSend(parsed.value)
    if ("error" in request) return sendJson(ctx, 200, rpcError(request.id, request.error))
    const skills = yield* catalog.list({}, yield* originOf(deps, ctx))
    const task = capabilitiesTask(skillsTable(skills), skills.length, `task_${crypto.randomUUID().replace(/-/g, "")}`, new Date())
    sendJson(ctx, 200, rpcResult(request.id, task))
  })

const card = (deps: RouteDeps, access: InferenceAccess) =>
  Effect.fnUntraced(function* (ctx: RequestContext) {
    const origin = yield* originOf(deps, ctx)
    const keyRequired = access.keyRequiredByBind || (yield* deps.flag("REQUIRE_API_KEY"))
    sendJson(ctx, 200, agentCard(origin, keyRequired))
  })

export const a2aRoutes = (deps: RouteDeps, catalog: SkillCatalogShape, access: InferenceAccess): ReadonlyArray<RouteDef> => [
  {
    method: "POST",
    path: A2A_PATH,
    format: openAiChat,
    summary: "A2A JSON-RPC 2.0: `message/send` or `SendMessage` with `params.skill` `list-capabilities` and `params.messages` (`role`, `content`); the result's first artifact `content` is a markdown table of every skill with its raw URL. JSON-RPC errors (-32700, -32600, -32601, -32602) come with status 200.",
    handle: send(deps, catalog)
  },
  {
    method: "GET",
    path: AGENT_CARD_PATH,
    format: openAiChat,
    public: true,
    summary: "The A2A agent card: name, description, `url` of the JSON-RPC endpoint, version, capabilities, skills (`list-capabilities`), protocol version.",
    handle: card(deps, access)
  }
]
