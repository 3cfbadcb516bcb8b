/**
 * Which database the store runs on: the embedded SQLite file in DATA_DIR (the default) or the
 * PostgreSQL server of `DATABASE_URL` (docs/scale-out.md, "PostgreSQL"). `Db.layer` provides it
 * next to the SqlClient; what depends on the database itself (StoreVersion, backups, `gateway
 * doctor`, applying a configuration bundle) reads it. No PostgreSQL code is loaded here: the
 * driver is imported only when DATABASE_URL is set.
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

export type StoreKindShape =
  | { readonly _tag: "sqlite"; readonly file: string }
  | {
      readonly _tag: "postgres"
      /** The connection URL, password and all: never printed. */
      readonly url: Redacted.Redacted<string>
      /** The URL with its password masked: what logs, errors and `doctor` show. */
      readonly display: string
    }

export class StoreKind extends Context.Tag("gateway/StoreKind")<StoreKind, StoreKindShape>() {}

/** `postgres://user:***@host:5432/db`: the URL with any password (and query string) masked. */
export const maskUrl = (raw: string): string => {
  try {
    const u = new URL(raw)
    if (u.password !== "") u.password = "***"
    u.search = u.search === "" ? "" : "?***"
    return u.toString()
  } catch {
    return "(not a URL)"
  }
}

/**
 * A PostgreSQL connection URL as given to the gateway: `postgres://` or `postgresql://`, with a
 * host. Answers the reason it cannot be used (never echoing a password), or the URL.
 */
export const parseDatabaseUrl = (raw: string): Either.Either<string, string> => {
  const value = raw.trim()
  let u: URL
  try {
    u = new URL(value)
  } catch {
    return Either.left("DATABASE_URL is not a URL: expected postgres://user:password@host:5432/database")
  }
  if (u.protocol !== "postgres:" && u.protocol !== "postgresql:") {
    return Either.left(
      `DATABASE_URL must start with postgres:// or postgresql:// (got ${u.protocol}//…); unset it to use the embedded SQLite database`
    )
  }
  if (u.hostname === "" && !u.searchParams.has("host")) return Either.left(`DATABASE_URL names no host: ${maskUrl(value)}`)
  return Either.right(value)
}

/**
 * `DATABASE_URL` from the configuration: none (SQLite), or a checked PostgreSQL URL. A bad value
 * stops the start with a message that names the variable and masks the password.
 */
export const DatabaseUrl: Config.Config<Option.Option<Redacted.Redacted<string>>> = Config.string("DATABASE_URL").pipe(
  Config.option,
  Config.mapOrFail((raw) => {
    if (Option.isNone(raw) || raw.value.trim() === "") return Either.right(Option.none())
    return Either.match(parseDatabaseUrl(raw.value), {
      onLeft: (reason) => Either.left(ConfigError.InvalidData([], reason)),
      onRight: (url) => Either.right(Option.some(Redacted.make(url)))
    })
  })
)
