/**
 * The changes to the MCP server registry: a server created, updated or removed, checked for what
 * the schemas cannot see (a stdio server needs a command and takes no url, an http or sse server
 * needs an http(s) url and takes no command; env and header names), then the registry read again,
 * its listeners told and the change audited.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import {
  MCP_DEFAULT_TIMEOUT_MS,
  MCP_SERVER_NAME_PATTERN,
  type McpServerOAuthClient,
  type McpServerOAuthConfig,
  type McpServerRecord,
  type McpServerTransport
} from "../../domain/mcpServers.js"
import { maskSecret } from "../../kernel/redact.js"
import type { BatchWriterShape } from "../../platform/store/BatchWriter.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"
import { sealMap, sealOAuthClient } from "./mcpServerRows.js"
import { maskUrl, unmaskArgs, unmaskUrl } from "./mcpServerSecrets.js"
import { unmaskValues } from "./mcpServerViews.js"
import { McpServerRefused } from "./McpServerRefused.js"
import type { McpServersShape } from "./McpServers.js"

/** The fields of a server the transport rules read. */
interface Connection {
  readonly transport: McpServerTransport
  readonly command: string | null
  readonly args: ReadonlyArray<string>
  readonly env: Readonly<Record<string, string>>
  readonly cwd: string | null
  readonly url: string | null
  readonly headers: Readonly<Record<string, string>>
  /** http and sse: the configured OAuth client. */
  readonly oauth?: McpServerOAuthClient | null
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
// RFC 9110's token.
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** What is wrong with a server's connection fields, as `field: problem`, or undefined. */
export const connectionProblem = (c: Connection): string | undefined => {
  if (c.transport === "stdio") {
    if (c.command === null || c.command.trim() === "") return "command: a stdio server needs a command (the program to run)"
    if (c.url !== null) return "url: a stdio server takes no url (the gateway runs its command)"
    if (Object.keys(c.headers).length > 0) return "headers: a stdio server takes no headers (pass values to its process with env)"
    if (c.oauth != null)
      return "oauth: a stdio server takes no oauth (it gets its credentials from its env, as the MCP authorization spec says)"
  } else {
    if (c.url === null) return `url: an ${c.transport} server needs a url (http:// or https://)`
    if (c.command !== null) return `command: an ${c.transport} server takes no command (it is reached at its url)`
    if (c.args.length > 0) return `args: an ${c.transport} server takes no args (they go with a stdio server's command)`
    if (Object.keys(c.env).length > 0) return `env: an ${c.transport} server takes no env (send values as headers)`
    if (c.cwd !== null) return `cwd: an ${c.transport} server takes no cwd`
    let url: URL
    try {
      url = new URL(c.url)
    } catch {
      return `url: ${JSON.stringify(c.url)} is not a URL`
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return `url: must be an http:// or https:// address (got ${url.protocol})`
    if (c.oauth != null && c.oauth.clientSecret !== null && c.oauth.clientId === null)
      return "oauth.clientSecret: needs oauth.clientId (a secret goes with the client it was issued to)"
  }
  for (const k of Object.keys(c.env)) if (!ENV_NAME.test(k)) return `env: ${JSON.stringify(k)} is not a variable name`
  for (const [k, v] of Object.entries(c.env)) if (v.includes("\0")) return `env.${k}: a value cannot hold a NUL character`
  for (const k of Object.keys(c.headers)) if (!HEADER_NAME.test(k)) return `headers: ${JSON.stringify(k)} is not a header name`
  for (const [k, v] of Object.entries(c.headers))
    if (/[\r\n\0]/.test(v)) return `headers.${k}: a header value cannot hold a line break or NUL`
  return undefined
}

/**
 * The OAuth client given in a create or update as the gateway holds it: a `clientSecret` that is
 * the masked form of the stored one (a listing sent back) keeps the stored secret.
 */
export const oauthClientOf = (given: McpServerOAuthConfig, stored: McpServerOAuthClient | null | undefined): McpServerOAuthClient => {
  const old = stored?.clientSecret ?? null
  const secret = given.clientSecret ?? null
  return {
    clientId: given.clientId ?? null,
    clientSecret: secret !== null && old !== null && secret === maskSecret(old) ? old : secret,
    scopes: given.scopes ?? []
  }
}

const refused = (status: 400 | 404 | 409, message: string) => new McpServerRefused({ status, message })

const nameTaken =
  (name: string) =>
  <A, R>(effect: Effect.Effect<A, SqlError, R>): Effect.Effect<A, McpServerRefused, R> =>
    Effect.catchAll(effect, (e) =>
      isUniqueViolation(e) ? Effect.fail(refused(409, `an MCP server named '${name}' already exists`)) : Effect.die(e)
    )

export interface McpServerWritesDeps {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly writer: BatchWriterShape | undefined
  /** The server in memory by name. */
  readonly byName: (name: string) => McpServerRecord | undefined
  /** After a write: the registry read again and its listeners told. */
  readonly reload: Effect.Effect<void>
}

/** `create`, `update` and `remove`. */
export const makeMcpServerWrites = ({ sql, secrets, writer, byName, reload }: McpServerWritesDeps) => {
  const audit = (actor: string, action: string, target: string) =>
    writer?.append("audit_log", { ts: Date.now(), actor, action, target, detail: null })

  const check = (c: Connection) => {
    const problem = connectionProblem(c)
    return problem === undefined ? Effect.void : Effect.fail(refused(400, problem))
  }

  const stored = (name: string) =>
    Effect.suspend(() => {
      const r = byName(name)
      return r === undefined ? Effect.fail(refused(404, `no MCP server named '${name}'`)) : Effect.succeed(r)
    })

  const create: McpServersShape["create"] = (input, actor = "system") =>
    Effect.gen(function* () {
      if (!MCP_SERVER_NAME_PATTERN.test(input.name))
        return yield* refused(400, `name: must match ${MCP_SERVER_NAME_PATTERN.source} (got ${JSON.stringify(input.name)})`)
      const c: Connection = {
        transport: input.transport,
        command: input.command ?? null,
        args: input.args ?? [],
        env: input.env ?? {},
        cwd: input.cwd ?? null,
        url: input.url ?? null,
        headers: input.headers ?? {},
        oauth: input.oauth === undefined ? null : oauthClientOf(input.oauth, null)
      }
      yield* check(c)
      if (byName(input.name) !== undefined) return yield* refused(409, `an MCP server named '${input.name}' already exists`)
      const id = "mcp_" + crypto.randomBytes(8).toString("hex")
      const t = Date.now()
      yield* sql`INSERT INTO mcp_servers ${sql.insert({
        id,
        name: input.name,
        transport: c.transport,
        command: c.command,
        args: JSON.stringify(c.args),
        env_enc: sealMap(secrets, c.env),
        cwd: c.cwd,
        url: c.url,
        headers_enc: sealMap(secrets, c.headers),
        oauth_enc: sealOAuthClient(secrets, c.oauth),
        allowed_tools: JSON.stringify(input.allowedTools ?? []),
        timeout_ms: input.timeoutMs ?? MCP_DEFAULT_TIMEOUT_MS,
        rpm: input.rpm ?? null,
        enabled: 1,
        created_at: t,
        updated_at: t
      })}`.pipe(nameTaken(input.name))
      yield* reload
      audit(actor, "mcp_server.create", input.name)
      yield* Effect.logInfo(`MCP server created: ${input.name} (${c.transport} ${c.transport === "stdio" ? c.command : maskUrl(c.url)})`)
      return yield* stored(input.name).pipe(Effect.orDie)
    })

  const update: McpServersShape["update"] = (name, patch, actor = "system") =>
    Effect.gen(function* () {
      const r = yield* stored(name)
      const transport = patch.transport ?? r.transport
      // A change of transport drops the other transport's fields the patch does not set.
      const switched = transport !== r.transport
      const keep = <A>(given: A | undefined, old: A, empty: A, ofStdio: boolean): A =>
        given !== undefined ? given : switched && ofStdio !== (transport === "stdio") ? empty : old
      const env = patch.env === undefined ? keep(undefined, r.env, {}, true) : unmaskValues(patch.env, r.env)
      const headers = patch.headers === undefined ? keep(undefined, r.headers, {}, false) : unmaskValues(patch.headers, r.headers)
      const c: Connection = {
        transport,
        command: keep(patch.command, r.command, null, true),
        args: keep(patch.args === undefined ? undefined : unmaskArgs(patch.args, r.args), r.args, [], true),
        env,
        cwd: keep(patch.cwd, r.cwd, null, true),
        url: keep(patch.url === undefined ? undefined : unmaskUrl(patch.url, r.url), r.url, null, false),
        headers,
        oauth:
          patch.oauth === undefined
            ? keep(undefined, r.oauth ?? null, null, false)
            : patch.oauth === null
              ? null
              : oauthClientOf(patch.oauth, r.oauth)
      }
      yield* check(c)
      const fields: Record<string, string | number | null> = {
        transport: c.transport,
        command: c.command,
        args: JSON.stringify(c.args),
        cwd: c.cwd,
        url: c.url,
        updated_at: Math.max(Date.now(), r.updatedAt + 1)
      }
      // Sealed again only when they change: a value this storage key cannot open stays as stored.
      if (patch.env !== undefined || (switched && env !== r.env)) fields["env_enc"] = sealMap(secrets, env)
      if (patch.headers !== undefined || (switched && headers !== r.headers)) fields["headers_enc"] = sealMap(secrets, headers)
      if (patch.oauth !== undefined || (switched && c.oauth !== (r.oauth ?? null))) fields["oauth_enc"] = sealOAuthClient(secrets, c.oauth)
      if (patch.allowedTools !== undefined) fields["allowed_tools"] = JSON.stringify(patch.allowedTools)
      if (patch.timeoutMs !== undefined) fields["timeout_ms"] = patch.timeoutMs
      if (patch.rpm !== undefined) fields["rpm"] = patch.rpm
      if (patch.enabled !== undefined) fields["enabled"] = patch.enabled ? 1 : 0
      yield* sql`UPDATE mcp_servers SET ${sql.update(fields)} WHERE id = ${r.id}`.pipe(Effect.orDie)
      yield* reload
      audit(actor, "mcp_server.update", name)
      return yield* stored(name).pipe(Effect.orDie)
    })

  const remove: McpServersShape["remove"] = (name, actor = "system") =>
    Effect.gen(function* () {
      const r = yield* stored(name)
      yield* sql`DELETE FROM mcp_servers WHERE id = ${r.id}`.pipe(Effect.orDie)
      // Its sign-in (tokens, registered client) goes with it.
      yield* sql`DELETE FROM mcp_oauth WHERE server_id = ${r.id}`.pipe(Effect.orDie)
      yield* reload
      audit(actor, "mcp_server.remove", name)
      yield* Effect.logInfo(`MCP server removed: ${name}`)
    })

  return { create, update, remove }
}
