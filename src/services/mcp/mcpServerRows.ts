/**
 * The `mcp_servers` table as the registry keeps it: a row read into a record (env and headers
 * decrypted) and the sealed form of those maps.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Redacted from "effect/Redacted"
import {
  MCP_DEFAULT_TIMEOUT_MS,
  MCP_SERVER_TRANSPORTS,
  type McpServerOAuthClient,
  type McpServerRecord,
  type McpServerTransport
} from "../../domain/mcpServers.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"

export interface McpServerRow {
  readonly id: string
  readonly name: string
  readonly transport: string
  readonly command: string | null
  readonly args: string
  readonly env_enc: string | null
  readonly cwd: string | null
  readonly url: string | null
  readonly headers_enc: string | null
  readonly allowed_tools: string
  readonly timeout_ms: number | string
  readonly rpm: number | string | null
  readonly enabled: number | string
  /** The configured OAuth client, sealed (migration 0024; absent in a database before it). */
  readonly oauth_enc?: string | null
  readonly created_at: number | string
  readonly updated_at: number | string
}

type StringMap = Readonly<Record<string, string>>

const strings = (text: string | null): ReadonlyArray<string> => {
  if (text === null) return []
  try {
    const v: unknown = JSON.parse(text)
    return Array.isArray(v) ? v.filter((s): s is string => typeof s === "string") : []
  } catch {
    return []
  }
}

const stringMap = (text: string): StringMap => {
  const v: unknown = JSON.parse(text)
  if (v === null || typeof v !== "object" || Array.isArray(v)) return {}
  return Object.fromEntries(Object.entries(v).filter((e): e is [string, string] => typeof e[1] === "string"))
}

/** A map sealed with the storage key, or null when empty. */
export const sealMap = (secrets: SecretsShape, map: StringMap): string | null =>
  Object.keys(map).length === 0 ? null : secrets.encrypt(JSON.stringify(map))

/** A sealed map opened; one that does not open with this storage key reads as empty, with a warning naming the server. */
const openMap = (secrets: SecretsShape, sealed: string | null, server: string, column: string): Effect.Effect<StringMap> =>
  sealed === null
    ? Effect.succeed({})
    : secrets.decrypt(sealed).pipe(
        Effect.flatMap((plain) => Effect.try(() => stringMap(Redacted.value(plain)))),
        Effect.catchAll(() =>
          Effect.as(
            Effect.logWarning(
              `MCP server '${server}': its ${column} does not decrypt with this storage key; read as empty until set again`
            ),
            {}
          )
        )
      )

/** The configured OAuth client sealed, or null when there is none. */
export const sealOAuthClient = (secrets: SecretsShape, client: McpServerOAuthClient | null | undefined): string | null =>
  client == null ? null : secrets.encrypt(JSON.stringify(client))

/** The configured OAuth client opened; one that does not open reads as none, with a warning naming the server. */
const openOAuthClient = (
  secrets: SecretsShape,
  sealed: string | null | undefined,
  server: string
): Effect.Effect<McpServerOAuthClient | null> =>
  sealed == null
    ? Effect.succeed(null)
    : secrets.decrypt(sealed).pipe(
        Effect.flatMap((plain) =>
          Effect.try(() => {
            const v = JSON.parse(Redacted.value(plain)) as Record<string, unknown>
            const text = (x: unknown) => (typeof x === "string" && x !== "" ? x : null)
            return {
              clientId: text(v["clientId"]),
              clientSecret: text(v["clientSecret"]),
              scopes: Array.isArray(v["scopes"]) ? v["scopes"].filter((s): s is string => typeof s === "string") : []
            }
          })
        ),
        Effect.catchAll(() =>
          Effect.as(
            Effect.logWarning(
              `MCP server '${server}': its OAuth client does not decrypt with this storage key; read as none until set again`
            ),
            null
          )
        )
      )

const transportOf = (t: string): McpServerTransport =>
  (MCP_SERVER_TRANSPORTS as ReadonlyArray<string>).includes(t) ? (t as McpServerTransport) : "stdio"

/** A row as the registry holds it, secrets in the clear. */
export const toRecord = (secrets: SecretsShape, row: McpServerRow): Effect.Effect<McpServerRecord> =>
  Effect.gen(function* () {
    const env = yield* openMap(secrets, row.env_enc, row.name, "env")
    const headers = yield* openMap(secrets, row.headers_enc, row.name, "headers")
    const oauth = yield* openOAuthClient(secrets, row.oauth_enc, row.name)
    const timeoutMs = Number(row.timeout_ms)
    return {
      id: row.id,
      name: row.name,
      transport: transportOf(row.transport),
      command: row.command,
      args: strings(row.args),
      env,
      cwd: row.cwd,
      url: row.url,
      headers,
      allowedTools: strings(row.allowed_tools),
      timeoutMs: Number.isFinite(timeoutMs) && timeoutMs > 0 ? timeoutMs : MCP_DEFAULT_TIMEOUT_MS,
      rpm: row.rpm === null ? null : Number(row.rpm),
      enabled: Number(row.enabled) === 1,
      oauth,
      createdAt: Number(row.created_at),
      updatedAt: Number(row.updated_at)
    }
  })

/** Every row, by name. */
export const readRows = (sql: SqlClient.SqlClient) => sql<McpServerRow>`SELECT * FROM mcp_servers ORDER BY name`.pipe(Effect.orDie)

/** The rows as the registry holds them. */
export const toRecords = (secrets: SecretsShape, rows: ReadonlyArray<McpServerRow>) => Effect.forEach(rows, (row) => toRecord(secrets, row))
