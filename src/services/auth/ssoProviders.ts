/**
 * The OpenID Connect providers single sign-on may use (docs/sso.md, "Configuring a provider"): the
 * ones an admin made through the API (`oidc_providers`, migration 0027, the client secret sealed
 * with the storage key) and the read-only ones of `GATEWAY_OIDC_PROVIDERS`. Read from the store at
 * each use: sign-ins and their configuration are not the request path, and every process sees a
 * change at once.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import { BadRequest, Conflict, Forbidden, NotFound } from "../../domain/errors.js"
import { describeParseError } from "../../domain/parse.js"
import { CreateOidcProvider, type OidcMapping, type OidcProviderView, type PatchOidcProvider } from "../../domain/sso.js"
import { maskSecret } from "../../kernel/redact.js"
import { isLoopbackHost } from "../../platform/config/AppConfig.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import { toIso } from "../../platform/store/Db.js"
import type { SecretsShape } from "../../platform/store/Secrets.js"

export interface OidcProviderRecord {
  readonly id: string
  readonly name: string
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string | null
  readonly scopes: ReadonlyArray<string>
  readonly groupsClaim: string
  readonly mappings: ReadonlyArray<OidcMapping>
  readonly source: "api" | "env"
  readonly createdAt: number | null
  readonly updatedAt: number | null
}

interface ProviderRow {
  readonly id: string
  readonly name: string
  readonly issuer: string
  readonly client_id: string
  readonly client_secret_enc: string | null
  readonly scopes: string
  readonly groups_claim: string
  readonly mappings: string
  readonly created_at: number | string
  readonly updated_at: number | string
}

/** A provider as the admin API shows it: the secret masked. */
export const providerView = (p: OidcProviderRecord): OidcProviderView => ({
  id: p.id,
  name: p.name,
  issuer: p.issuer,
  clientId: p.clientId,
  clientSecret: p.clientSecret === null ? null : maskSecret(p.clientSecret),
  scopes: [...p.scopes],
  groupsClaim: p.groupsClaim,
  mappings: [...p.mappings],
  source: p.source,
  createdAt: toIso(p.createdAt),
  updatedAt: toIso(p.updatedAt)
})

/**
 * An issuer the gateway will talk to: https, or http on this machine only (a provider run beside
 * the gateway, as the tests do); anything else would carry the code and the client secret in clear.
 */
export const issuerProblem = (issuer: string): string | undefined => {
  const u = new URL(issuer)
  if (u.protocol === "https:") return undefined
  return isLoopbackHost(u.hostname.replace(/^\[|\]$/g, ""))
    ? undefined
    : `issuer: ${issuer} is not https; plain http is accepted only for a provider on this machine (127.0.0.1, ::1, localhost)`
}

const withOpenid = (scopes: ReadonlyArray<string>) => (scopes.includes("openid") ? [...scopes] : ["openid", ...scopes])

/** `GATEWAY_OIDC_PROVIDERS`: a JSON array of providers (the API's create body); invalid entries are skipped with a warning. */
export const envProviders = (text: string | undefined): Effect.Effect<ReadonlyArray<OidcProviderRecord>> =>
  Effect.gen(function* () {
    if (text === undefined || text.trim() === "") return []
    let list: unknown
    try {
      list = JSON.parse(text)
    } catch (e) {
      yield* Effect.logWarning(`GATEWAY_OIDC_PROVIDERS is not JSON (${(e as Error).message}): no provider read from it`)
      return []
    }
    if (!Array.isArray(list)) {
      yield* Effect.logWarning("GATEWAY_OIDC_PROVIDERS must be a JSON array of providers: no provider read from it")
      return []
    }
    const out: Array<OidcProviderRecord> = []
    for (const [i, entry] of list.entries()) {
      const decoded = Schema.decodeUnknownEither(CreateOidcProvider)(entry)
      if (Either.isLeft(decoded)) {
        yield* Effect.logWarning(`GATEWAY_OIDC_PROVIDERS[${i}] skipped: ${describeParseError(decoded.left)}`)
        continue
      }
      const p = decoded.right
      const problem = issuerProblem(p.issuer)
      if (problem !== undefined || out.some((o) => o.id === p.id)) {
        yield* Effect.logWarning(`GATEWAY_OIDC_PROVIDERS[${i}] skipped: ${problem ?? `id '${p.id}' is listed twice`}`)
        continue
      }
      out.push({ ...p, scopes: withOpenid(p.scopes), source: "env", createdAt: null, updatedAt: null })
    }
    return out
  })

export const makeProviderStore = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly secrets: SecretsShape
  readonly fromEnv: ReadonlyArray<OidcProviderRecord>
}) => {
  const { sql, secrets, fromEnv } = deps

  const recordOf = (row: ProviderRow): Effect.Effect<OidcProviderRecord> =>
    Effect.gen(function* () {
      const secret =
        row.client_secret_enc === null
          ? null
          : yield* secrets.decrypt(row.client_secret_enc).pipe(
              Effect.map(Redacted.value),
              // A secret sealed with another storage key reads as none: the sign-in then fails at the provider, saying so.
              Effect.orElseSucceed(() => null)
            )
      return {
        id: row.id,
        name: row.name,
        issuer: row.issuer,
        clientId: row.client_id,
        clientSecret: secret,
        scopes: JSON.parse(row.scopes) as Array<string>,
        groupsClaim: row.groups_claim,
        mappings: JSON.parse(row.mappings) as Array<OidcMapping>,
        source: "api" as const,
        createdAt: Number(row.created_at),
        updatedAt: Number(row.updated_at)
      }
    })

  /** Every provider: the environment's first, then the API's by name. */
  const all = Effect.gen(function* () {
    const rows = yield* sql<ProviderRow>`SELECT * FROM oidc_providers ORDER BY name, id`.pipe(Effect.orDie)
    const stored = yield* Effect.forEach(rows, recordOf)
    return [...fromEnv, ...stored.filter((p) => !fromEnv.some((e) => e.id === p.id))]
  })

  const get = (id: string) =>
    Effect.flatMap(all, (list) => {
      const p = list.find((x) => x.id === id)
      return p === undefined
        ? Effect.fail(new NotFound({ message: `no single sign-on provider '${id}' (GET /api/auth/oidc/providers lists them)` }))
        : Effect.succeed(p)
    })

  const rowOf = (p: OidcProviderRecord) => ({
    id: p.id,
    name: p.name,
    issuer: p.issuer.replace(/\/+$/, ""),
    client_id: p.clientId,
    client_secret_enc: p.clientSecret === null || p.clientSecret === "" ? null : secrets.encrypt(p.clientSecret),
    scopes: JSON.stringify(withOpenid(p.scopes)),
    groups_claim: p.groupsClaim,
    mappings: JSON.stringify(p.mappings),
    created_at: p.createdAt ?? Date.now(),
    updated_at: p.updatedAt ?? Date.now()
  })

  const create = (input: CreateOidcProvider): Effect.Effect<OidcProviderRecord, BadRequest | Conflict> =>
    Effect.gen(function* () {
      const problem = issuerProblem(input.issuer)
      if (problem !== undefined) return yield* new BadRequest({ message: problem })
      if (fromEnv.some((e) => e.id === input.id))
        return yield* new Conflict({ message: `a provider '${input.id}' is configured in GATEWAY_OIDC_PROVIDERS` })
      const t = Date.now()
      const record: OidcProviderRecord = { ...input, scopes: withOpenid(input.scopes), source: "api", createdAt: t, updatedAt: t }
      yield* sql`INSERT INTO oidc_providers ${sql.insert(rowOf(record))}`.pipe(
        Effect.catchAll((e) =>
          isUniqueViolation(e) ? Effect.fail(new Conflict({ message: `a provider '${input.id}' exists already` })) : Effect.die(e)
        )
      )
      return record
    })

  const readOnly = (p: OidcProviderRecord) =>
    p.source === "env"
      ? Effect.fail(
          new Forbidden({ message: `provider '${p.id}' comes from GATEWAY_OIDC_PROVIDERS and is read-only here: change the environment` })
        )
      : Effect.void

  const update = (id: string, patch: PatchOidcProvider): Effect.Effect<OidcProviderRecord, BadRequest | NotFound | Forbidden> =>
    Effect.gen(function* () {
      const current = yield* get(id)
      yield* readOnly(current)
      if (patch.issuer !== undefined) {
        const problem = issuerProblem(patch.issuer)
        if (problem !== undefined) return yield* new BadRequest({ message: problem })
      }
      // The masked secret a listing showed, sent back, keeps the stored one.
      const keepSecret =
        patch.clientSecret === undefined ||
        (patch.clientSecret !== null && current.clientSecret !== null && patch.clientSecret === maskSecret(current.clientSecret))
      const next: OidcProviderRecord = {
        ...current,
        ...(patch.name !== undefined ? { name: patch.name } : {}),
        ...(patch.issuer !== undefined ? { issuer: patch.issuer } : {}),
        ...(patch.clientId !== undefined ? { clientId: patch.clientId } : {}),
        ...(patch.scopes !== undefined ? { scopes: withOpenid(patch.scopes) } : {}),
        ...(patch.groupsClaim !== undefined ? { groupsClaim: patch.groupsClaim } : {}),
        ...(patch.mappings !== undefined ? { mappings: patch.mappings } : {}),
        clientSecret: keepSecret ? current.clientSecret : (patch.clientSecret ?? null),
        updatedAt: Date.now()
      }
      const row = rowOf(next)
      yield* sql`UPDATE oidc_providers SET name = ${row.name}, issuer = ${row.issuer}, client_id = ${row.client_id},
        client_secret_enc = ${row.client_secret_enc}, scopes = ${row.scopes}, groups_claim = ${row.groups_claim},
        mappings = ${row.mappings}, updated_at = ${row.updated_at} WHERE id = ${id}`.pipe(Effect.orDie)
      return next
    })

  const remove = (id: string): Effect.Effect<OidcProviderRecord, NotFound | Forbidden> =>
    Effect.gen(function* () {
      const current = yield* get(id)
      yield* readOnly(current)
      yield* sql`DELETE FROM oidc_providers WHERE id = ${id}`.pipe(Effect.orDie)
      return current
    })

  return { all, get, create, update, remove }
}

export type ProviderStore = ReturnType<typeof makeProviderStore>
