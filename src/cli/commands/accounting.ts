import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"

const impl = () => import("./accounting.impl.js")

export const quotaOptions = {
  ...remoteOptions,
  apiKeyId: Options.text("key").pipe(Options.withDescription("Only this API key id."), Options.optional),
  teamId: Options.text("team").pipe(Options.withDescription("Only this team (its id or name)."), Options.optional),
  userId: Options.text("user").pipe(Options.withDescription("Only this user (their id or email)."), Options.optional),
  organisation: Options.boolean("organisation").pipe(Options.withDescription("Only the organisation's own limits.")),
  all: Options.boolean("all").pipe(Options.withDescription("The limits of every level (the organisation, teams, users, keys).")),
  json
}
export const cacheOptions = { ...remoteOptions, json }

/** `gateway quota`: budgets and token limits per API key (or of a team, a user, the organisation), as the running server counts them. */
export const quotaCommand = Command.make(
  "quota",
  quotaOptions,
  lazy(impl, (m) => m.quota)
).pipe(
  Command.withDescription(
    "Budgets, token limits and the other limits of API keys, or of a team (--team), a user (--user), the organisation (--organisation) or every level (--all), as the running server counts them."
  )
)

const stats = Command.make(
  "stats",
  cacheOptions,
  lazy(impl, (m) => m.cacheStats)
).pipe(Command.withDescription("Response cache and idempotency statistics."))
const clear = Command.make(
  "clear",
  cacheOptions,
  lazy(impl, (m) => m.cacheClear)
).pipe(Command.withDescription("Empty the response cache and forget idempotency keys."))

/** `gateway cache` (statistics), `gateway cache clear`. */
export const cacheCommand = Command.make(
  "cache",
  cacheOptions,
  lazy(impl, (m) => m.cacheStats)
).pipe(
  Command.withDescription("Response cache statistics of the running server; `cache clear` empties it."),
  Command.withSubcommands([stats, clear])
)
