import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { EngineStep, FormatIdSchema } from "../../domain/context.js"
import { ENGINE_IDS } from "../../services/context/types.js"
import { lazy } from "../handler.js"
import { json } from "../options.js"
import { schemaOption, schemaOptions } from "../schema.js"

const impl = () => import("./compression.impl.js")

/** `<engine>` or `<engine>:<json settings>`, then the API's step schema. */
const StepText = Schema.compose(
  Schema.transformOrFail(Schema.String, Schema.Struct({ engine: Schema.String, config: Schema.optional(Schema.Unknown) }), {
    strict: true,
    decode: (raw, _, ast) => {
      const colon = raw.indexOf(":")
      if (colon < 0) return ParseResult.succeed({ engine: raw.trim() })
      try {
        return ParseResult.succeed({ engine: raw.slice(0, colon).trim(), config: JSON.parse(raw.slice(colon + 1)) as unknown })
      } catch {
        return ParseResult.fail(new ParseResult.Type(ast, raw, `the settings after '${raw.slice(0, colon)}:' are not JSON`))
      }
    },
    encode: (s) => ParseResult.succeed(s.config === undefined ? s.engine : `${s.engine}:${JSON.stringify(s.config)}`)
  }),
  EngineStep
)

/** `true` or `false`. */
const BoolText = Schema.transformOrFail(Schema.String, Schema.Boolean, {
  strict: true,
  decode: (s, _, ast) =>
    s === "true"
      ? ParseResult.succeed(true)
      : s === "false"
        ? ParseResult.succeed(false)
        : ParseResult.fail(new ParseResult.Type(ast, s, "must be true or false")),
  encode: (b) => ParseResult.succeed(String(b))
})

/** A number, or `off` (null: that test of the auto-trigger is off). */
const NumberOrOff = Schema.Union(
  Schema.transform(Schema.Literal("off"), Schema.Null, { strict: true, decode: () => null, encode: () => "off" as const }),
  Schema.NumberFromString
)

export const previewOptions = {
  file: Options.text("file").pipe(Options.withDescription("The request body (JSON); default: read from stdin."), Options.optional),
  format: schemaOption("format", FormatIdSchema).pipe(
    Options.withDescription("The body's wire format: openai-chat (default), openai-responses, anthropic, gemini, ollama."),
    Options.optional
  ),
  mode: Options.text("mode").pipe(
    Options.withDescription("As x-gateway-compression: default, off, engine:<id>, or a compression combo's name or id (default: default)."),
    Options.optional
  ),
  model: Options.text("model").pipe(
    Options.withDescription("The target `<provider>/<model>` (names the tokenizer family)."),
    Options.optional
  ),
  output: Options.text("output").pipe(Options.withDescription("Write the compressed body (JSON) to this file."), Options.optional),
  json
}

export const comboListOptions = { json }
export const comboCreateOptions = {
  name: Args.text({ name: "name" }),
  engine: schemaOptions("engine", StepText).pipe(
    Options.withDescription(`An engine step, \`<id>\` or \`<id>:<json settings>\`, repeat in order; ids: ${ENGINE_IDS.join(", ")}.`)
  ),
  description: Options.text("description").pipe(Options.optional),
  json
}
export const comboDeleteOptions = { id: Args.text({ name: "id-or-name" }), json }
export const comboAssignOptions = {
  id: Args.text({ name: "id-or-name" }),
  routingCombo: Options.text("routing-combo").pipe(
    Options.repeated,
    Options.withDescription("A routing combo whose requests use this compression combo; repeat.")
  ),
  model: Options.text("model").pipe(
    Options.repeated,
    Options.withDescription("A model (`<provider>/<model>` or a model id) whose requests use it; repeat.")
  ),
  clear: Options.boolean("clear").pipe(Options.withDescription("Remove every assignment.")),
  json
}

export const settingsOptions = {
  enable: Options.boolean("enable").pipe(Options.withDescription("Turn compression on (the global switch).")),
  disable: Options.boolean("disable").pipe(
    Options.withDescription("Turn compression off: nothing compresses, whatever the request header says.")
  ),
  activeProfile: Options.text("active-profile").pipe(
    Options.withDescription(
      "The profile every request uses unless the header or an assignment says otherwise: a combo's name or id, or engine:<id>."
    ),
    Options.optional
  ),
  noActiveProfile: Options.boolean("no-active-profile").pipe(Options.withDescription("No active profile.")),
  defaultCombo: Options.text("default-combo").pipe(
    Options.withDescription("What `default` means: a combo's name or id, engine:<id>, or `builtin` for the built-in default."),
    Options.optional
  ),
  compressByDefault: schemaOption("compress-by-default", BoolText).pipe(
    Options.withDescription("true: compress every eligible request with the default combo when nothing else chose."),
    Options.optional
  ),
  autoTrigger: schemaOption("auto-trigger", BoolText).pipe(
    Options.withDescription("true: compress when the prompt passes --auto-trigger-tokens or --window-share."),
    Options.optional
  ),
  autoTriggerTokens: schemaOption("auto-trigger-tokens", NumberOrOff).pipe(
    Options.withDescription("The auto-trigger's threshold in estimated prompt tokens, or off."),
    Options.optional
  ),
  windowShare: schemaOption("window-share", NumberOrOff).pipe(
    Options.withDescription("Or this share (0.05 to 1) of the target model's context window, or off."),
    Options.optional
  ),
  injectionMaxTokens: Options.integer("injection-max-tokens").pipe(
    Options.withDescription("At most this many tokens of memory and skills added to a request (0: none)."),
    Options.optional
  ),
  json
}

export const statsOptions = {
  from: Options.text("from").pipe(Options.withDescription("First day, YYYY-MM-DD (UTC; default 30 days ago)."), Options.optional),
  to: Options.text("to").pipe(Options.withDescription("Last day, YYYY-MM-DD (default today)."), Options.optional),
  json
}

export const rtkTestOptions = {
  command: Options.text("command").pipe(
    Options.withDescription("The command line that printed the text (picks the filter: git status, npm test, ...)."),
    Options.optional
  ),
  file: Options.text("file").pipe(Options.withDescription("The text; default: read from stdin."), Options.optional),
  json
}

const preview = Command.make(
  "preview",
  previewOptions,
  lazy(impl, (m) => m.preview)
).pipe(
  Command.withDescription(
    "Compress a request body as a request would be: tokens before and after, per engine and in total (the body with --json or --output)."
  )
)
const comboList = Command.make(
  "list",
  comboListOptions,
  lazy(impl, (m) => m.comboList)
).pipe(Command.withDescription("List compression combos and their assignments."))
const comboCreate = Command.make(
  "create",
  comboCreateOptions,
  lazy(impl, (m) => m.comboCreate)
).pipe(Command.withDescription("Create a compression combo: engines run in the order given."))
const comboDelete = Command.make(
  "delete",
  comboDeleteOptions,
  lazy(impl, (m) => m.comboDelete)
).pipe(Command.withDescription("Delete a compression combo."))
const comboAssign = Command.make(
  "assign",
  comboAssignOptions,
  lazy(impl, (m) => m.comboAssign)
).pipe(Command.withDescription("Set where a compression combo applies (replaces its assignments; none given: print them)."))
const combos = Command.make("combos").pipe(
  Command.withDescription("Compression combos: ordered engines with settings."),
  Command.withSubcommands([comboList, comboCreate, comboDelete, comboAssign])
)
const settings = Command.make(
  "settings",
  settingsOptions,
  lazy(impl, (m) => m.settings)
).pipe(Command.withDescription("Print the compression settings; with options, change them first."))
const stats = Command.make(
  "stats",
  statsOptions,
  lazy(impl, (m) => m.stats)
).pipe(Command.withDescription("Tokens and cost saved by engine, combo and model; tokens injected by memory and skills."))
const rtkTest = Command.make(
  "rtk-test",
  rtkTestOptions,
  lazy(impl, (m) => m.rtkTest)
).pipe(Command.withDescription("Run rtk over a command's output as over a tool result."))

export const compressionCommand = Command.make("compression").pipe(
  Command.withDescription("Prompt compression in the local database (a running server sees changes within a second)."),
  Command.withSubcommands([preview, combos, settings, stats, rtkTest])
)
