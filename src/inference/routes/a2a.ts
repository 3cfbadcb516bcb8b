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
  A2A_VERSIONS,
  AGENT_CARD_PATH,
  agentCard,
  capabilitiesResult,
  readSend,
  requestedVersion,
  RpcCode,
  rpcError,
  rpcResult,
  skillsTable
} from "../a2a/protocol.js"
import type { InferenceAccess } from "../../platform/config/AppConfig.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { requestOrigin, trimmedHeader } from "../../platform/http/request.js"
import { jsonTooDeep, TOO_DEEP_MESSAGE } from "../../kernel/untrusted.js"
import type { SkillCatalogShape } from "../../services/skills/SkillCatalog.js"
import { readBody, type HttpRequestContext, sendJson } from "../io.js"
import type { RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

/** A2A bodies are one small JSON-RPC request. */
const MAX_A2A_BODY_BYTES = 1024 * 1024

const originOf = (deps: RouteDeps, ctx: HttpRequestContext) =>
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
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const buf = ctx.body ?? (yield* readBody(ctx.req, MAX_A2A_BODY_BYTES))
    const asked = trimmedHeader(ctx.req, "a2a-version")
    const version = requestedVersion(asked)
    // The answer says which version it is in (1.0 clients send and read the header).
    if (version !== undefined) ctx.responseHeaders["a2a-version"] = version
    const parsed = parse(buf.toString("utf8"))
    if (!parsed.ok) return sendJson(ctx, 200, rpcError(null, { code: RpcCode.parseError, message: parsed.message }))
    const request = readSend(parsed.value)
    if ("error" in request) return sendJson(ctx, 200, rpcError(request.id, request.error))
    if (version === undefined) {
      return sendJson(
        ctx,
        200,
        rpcError(request.id, {
          code: RpcCode.versionNotSupported,
          message: `A2A-Version ${JSON.stringify(asked!.slice(0, 50))} is not supported; this agent speaks ${A2A_VERSIONS.join(" and ")}`,
          data: { supportedVersions: [...A2A_VERSIONS] }
        })
      )
    }
    const skills = yield* catalog.list({}, yield* originOf(deps, ctx))
    const result = capabilitiesResult(
      version,
      skillsTable(skills),
      skills.length,
      `task_${crypto.randomUUID().replace(/-/g, "")}`,
      new Date()
    )
    sendJson(ctx, 200, rpcResult(request.id, result))
  })

const card = (deps: RouteDeps, access: InferenceAccess) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext) {
    const origin = yield* originOf(deps, ctx)
    const keyRequired = access.keyRequiredByBind || (yield* deps.flag("REQUIRE_API_KEY"))
    sendJson(ctx, 200, agentCard(origin, keyRequired))
  })

export const a2aRoutes = (deps: RouteDeps, catalog: SkillCatalogShape, access: InferenceAccess): ReadonlyArray<RouteDef> => [
  {
    method: "POST",
    path: A2A_PATH,
    format: openAiChat,
    summary:
      "A2A JSON-RPC 2.0, versions 0.3 and 1.0 (the `A2A-Version` header; none means 0.3): `message/send` or `SendMessage` with `params.skill` `list-capabilities` and `params.messages` (`role`, `content`) or an A2A `params.message`; the result is a completed task (0.3: the task, its first artifact's `content` a markdown table of every skill with its raw URL; 1.0: `{task}` with the table as a text part). JSON-RPC errors (-32700, -32600, -32601, -32602, -32009 for an unsupported version) come with status 200.",
    handle: send(deps, catalog)
  },
  {
    method: "GET",
    path: AGENT_CARD_PATH,
    format: openAiChat,
    public: true,
    summary:
      "The A2A agent card for 0.3 and 1.0 clients: name, description, the JSON-RPC endpoint (`url` and `preferredTransport` for 0.3, `supportedInterfaces` for both), version, capabilities, skills (`list-capabilities`), security schemes in both shapes.",
    handle: card(deps, access)
  }
]
