import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"

const impl = () => import("./accounting.impl.js")

export const quotaOptions = {
  ...remoteOptions,
  apiKeyId: Options.text("key").pipe(Options.withDescription("Only this API key id."), Options.optional),
  json
}
export const cacheOptions = { ...remoteOptions, json }

/** `gateway quota`: budgets and token limits per API key, as the running server counts them. */
export const quotaCommand = Command.make(
  "quota",
  quotaOptions,
  lazy(impl, (m) => m.quota)
).pipe(Command.withDescription("Budgets and token limits of API keys, as the running server counts them."))

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
