import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Schema from "effect/Schema"
import { CaptureSourceSchema } from "../../domain/inspector.js"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"
import { intFromText, schemaOption } from "../schema.js"

const impl = () => import("./inspect.impl.js")

/** What `--status` takes: the same words as the API's `status` filter (GET requests?status=). */
export const StatusFilter = Schema.Trim.pipe(
  Schema.filter(
    (s) =>
      /^(in-flight|error|ok|failed|[1-5]xx|[1-5]\d\d)$/.test(s) ||
      "must be in-flight, error, ok, failed, 2xx..5xx or a status code such as 404"
  )
)

/** Which entries: the API's list filters (RequestsQuery), also applied to the live feed. */
const filterOptions = {
  llm: Options.boolean("llm").pipe(Options.withDescription("Only LLM calls.")),
  source: Options.choice("source", CaptureSourceSchema.literals).pipe(
    Options.withDescription("Only entries of this capture source."),
    Options.optional
  ),
  host: Options.text("host").pipe(Options.withDescription("Only this host (and its subdomains)."), Options.optional),
  agent: Options.text("agent").pipe(
    Options.withDescription("Only requests of this agent (claude-code, openai-sdk, ...)."),
    Options.optional
  ),
  status: schemaOption("status", StatusFilter).pipe(
    Options.withDescription("Only this status: in-flight, error, ok, failed, 2xx..5xx or a code."),
    Options.optional
  )
}

const whole = (min: number, message: string) => intFromText(Schema.Int.pipe(Schema.greaterThanOrEqualTo(min, { message: () => message })))

export const tailOptions = {
  ...remoteOptions,
  ...filterOptions,
  last: schemaOption("last", whole(0, "must be a whole number, 0 or more")).pipe(
    Options.withDescription("Print this many of the buffer's latest entries first (default 20)."),
    Options.withDefault(20)
  ),
  inFlight: Options.boolean("in-flight").pipe(
    Options.withDescription("Also print requests as they start (status in-flight), not only when they complete.")
  ),
  count: schemaOption("count", whole(1, "must be a whole number, 1 or more")).pipe(
    Options.withDescription("Exit 0 after printing this many entries."),
    Options.optional
  ),
  json
}

export const exportOptions = {
  ...remoteOptions,
  ...filterOptions,
  har: Options.file("har").pipe(Options.withDescription("Write HAR 1.2 to this file."), Options.optional),
  jsonl: Options.file("jsonl").pipe(
    Options.withDescription("Write the session's JSONL export to this file (with --session)."),
    Options.optional
  ),
  session: Options.text("session").pipe(Options.withDescription("Export this recorded session instead of the buffer."), Options.optional),
  json
}

const exportCommand = Command.make(
  "export",
  exportOptions,
  lazy(impl, (m) => m.exportTraffic)
).pipe(
  Command.withDescription(
    "Write the inspector's buffer (with the filters) or a recorded session (--session) as HAR (--har FILE), or a session as JSONL (--jsonl FILE); prints how many entries were written."
  )
)

/** `gateway inspect`: the traffic inspector's live feed in the terminal; `gateway inspect export`: HAR/JSONL (docs/inspector.md). */
export const inspectCommand = Command.make(
  "inspect",
  tailOptions,
  lazy(impl, (m) => m.tail)
).pipe(
  Command.withDescription(
    "Tail the traffic inspector of the running gateway (loopback only): the buffer's last entries (--last), then each request as it completes, one line each, or one JSON summary a line with --json. Runs until Ctrl-C (exit 0) or --count entries. `inspect export` writes HAR or JSONL."
  ),
  Command.withSubcommands([exportCommand])
)
