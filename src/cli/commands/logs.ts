import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Schema from "effect/Schema"
import { lazy } from "../handler.js"
import { json } from "../options.js"
import { intFromText, schemaOption } from "../schema.js"

export const logsOptions = {
  json,
  search: Options.text("search").pipe(Options.withDescription("Only lines containing this text (case-insensitive)."), Options.optional),
  follow: Options.boolean("follow").pipe(
    Options.withAlias("f"),
    Options.withDescription("Keep printing new lines as they are written, until Ctrl-C (exit 0).")
  ),
  lines: schemaOption(
    "lines",
    intFromText(Schema.Int.pipe(Schema.nonNegative({ message: () => "must be a whole number, 0 or more" })))
  ).pipe(Options.withAlias("n"), Options.withDescription("At most this many of the latest lines (default all)."), Options.optional)
}

export const logsCommand = Command.make(
  "logs",
  logsOptions,
  lazy(
    () => import("./logs.impl.js"),
    (m) => m.logs
  )
).pipe(
  Command.withDescription(
    "Read the server's log file (DATA_DIR/logs/gateway.log and its rotated files): pretty or --json (the lines as written), --search, --follow."
  )
)
