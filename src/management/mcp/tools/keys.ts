import * as Effect from "effect/Effect"
import type { ApiKeysShape } from "../../../services/auth/ApiKeys.js"
import { Forbidden } from "../../../domain/errors.js"
import { CreateApiKey } from "../../../domain/keys.js"
import { KeyRevokeArgs, NoArgs } from "../../../domain/mcp.js"
import { MCP_NAME_SEPARATOR } from "../../../domain/mcpServers.js"
import { patternCovers } from "../../../inference/mcp/access.js"
import { actorOf, describeCaller } from "../caller.js"
import { type McpTool, tool } from "../tool.js"

/**
 * Whether an `mcp.allow` pattern asks for no more than `ceiling` allows: `*` only under `*`, a whole
 * server (`<server>`, `<server>__*`) under the server or `*`, one tool under a pattern covering it
 * (a pattern with `*` inside only under itself, a whole server or `*`).
 */
export const patternWithin = (pattern: string, ceiling: ReadonlyArray<string>): boolean =>
  ceiling.some((c) => {
    if (c === "*" || c === pattern) return true
    if (pattern === "*") return false
    const at = pattern.indexOf(MCP_NAME_SEPARATOR)
    const server = at < 0 ? pattern : pattern.slice(0, at)
    const rest = at < 0 ? "*" : pattern.slice(at + MCP_NAME_SEPARATOR.length)
    if (c === server || c === `${server}${MCP_NAME_SEPARATOR}*`) return true
    return !rest.includes("*") && patternCovers(c, server, rest)
  })

/**
 * Gateway API keys over MCP. A caller that is not an admin (a key carrying `write:keys`, a
 * narrowed stdio operator) cannot raise itself: it creates keys only with scopes it holds
 * (plus `inference`), never past its own MCP ceiling (`mcp.allow`: a key it creates without one
 * gets its creator's), and revokes no admin key, while scopes are enforced.
 */
export const keyTools = (keys: ApiKeysShape): ReadonlyArray<McpTool> => [
  tool({
    name: "gateway_keys_list",
    title: "List API keys",
    scope: "read:keys",
    description: "Lists the gateway's API keys, masked: id, name, scopes, enabled, created, expiry, last use and per-minute limits.",
    args: NoArgs,
    readOnly: true,
    run: () => Effect.map(keys.list, (list) => ({ keys: list }))
  }),
  tool({
    name: "gateway_keys_create",
    title: "Create an API key",
    scope: "write:keys",
    description:
      "Creates a gateway API key and returns it with its secret, which is shown only this once. " +
      "scopes: inference (the default: model routes), admin (the management API and every MCP tool) or MCP scopes such as read:usage; " +
      "rpm and tpm limit requests and tokens per minute; expiresAt is an ISO 8601 date.",
    args: CreateApiKey,
    readOnly: false,
    run: (args, { caller, enforce }) =>
      Effect.gen(function* () {
        if (enforce && !caller.admin) {
          const beyond = (args.scopes ?? ["inference"]).filter((s) => s !== "inference" && (s === "admin" || !caller.scopes.has(s)))
          if (beyond.length > 0) {
            return yield* new Forbidden({
              message: `${describeCaller(caller)} may create keys only with scopes it holds (inference, ${[...caller.scopes].join(", ")}); asked for ${beyond.join(", ")}`
            })
          }
        }
        // The creator's own MCP ceiling bounds the key's: without one the key would reach every exposed tool.
        const ceiling = enforce && !caller.admin && caller.kind === "api-key" ? ((yield* keys.byId(caller.id))?.mcpAllow ?? null) : null
        if (ceiling !== null) {
          const beyond = (args.mcp?.allow ?? []).filter((p) => !patternWithin(p, ceiling))
          if (beyond.length > 0) {
            return yield* new Forbidden({
              message: `${describeCaller(caller)} may create keys only within its own mcp.allow (${ceiling.join(", ")}); asked for ${beyond.join(", ")}`
            })
          }
          if (args.mcp == null) return { ...(yield* keys.create({ ...args, mcp: { allow: ceiling } }, { actor: actorOf(caller) })) }
        }
        return { ...(yield* keys.create(args, { actor: actorOf(caller) })) }
      })
  }),
  tool({
    name: "gateway_keys_revoke",
    title: "Revoke an API key",
    scope: "write:keys",
    description:
      "Revokes (deletes) an API key by id or name; clients using it are refused from then on. A name shared by several keys must be given as an id.",
    args: KeyRevokeArgs,
    readOnly: false,
    destructive: true,
    run: (args, { caller, enforce }) =>
      Effect.gen(function* () {
        const key = args.key.trim()
        if (enforce && !caller.admin) {
          const named = (yield* keys.list).filter((k) => k.id === key || k.name === key)
          if (named.some((k) => k.scopes.includes("admin"))) {
            return yield* new Forbidden({ message: `'${key}' names an admin key, which only an admin may revoke` })
          }
        }
        return { revoked: yield* keys.remove(key, actorOf(caller)) }
      })
  })
]
