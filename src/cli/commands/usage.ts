import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { oneOf } from "../../domain/parse.js"
import { GROUP_BY, Instant } from "../../domain/usage.js"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"
import { schemaOption } from "../schema.js"

export const usageOptions = {
  ...remoteOptions,
  by: schemaOption("by", oneOf(GROUP_BY, "by")).pipe(
    Options.withDescription(
      "Group by hour, day (default), model, provider, apiKey, connection, endpoint, team or user (a key counts for its owner: a user's key for the user and each of the user's teams, a team's key for the team)."
    ),
    Options.optional
  ),
  from: schemaOption("from", Instant("from")).pipe(
    Options.withDescription("Start of the range: ISO 8601 or epoch ms (default 7 days before --to)."),
    Options.optional
  ),
  to: schemaOption("to", Instant("to")).pipe(Options.withDescription("End of the range (default now)."), Options.optional),
  team: Options.text("team").pipe(Options.withDescription("Only the keys of this team id and of its members."), Options.optional),
  user: Options.text("user").pipe(Options.withDescription("Only the keys of this user id."), Options.optional),
  key: Options.text("key").pipe(Options.withDescription("Only this API key id."), Options.optional),
  provider: Options.text("provider").pipe(Options.withDescription("Only this provider."), Options.optional),
  model: Options.text("model").pipe(Options.withDescription("Only this model (requested or served)."), Options.optional),
  csv: Options.boolean("csv").pipe(
    Options.withDescription("Print CSV (GET /api/usage/export): the groups with --by, else one line per request with its key's owner.")
  ),
  json
}

/** `gateway usage`: requests, tokens and cost of the running server over a range, grouped, as a table, JSON or CSV. */
export const usageCommand = Command.make(
  "usage",
  usageOptions,
  lazy(
    () => import("./usage.impl.js"),
    (m) => m.usage
  )
).pipe(
  Command.withDescription(
    "Usage and cost of the running server over a range (default the last 7 days), grouped --by day, model, team, user, ...; --csv for a spreadsheet."
  )
)
