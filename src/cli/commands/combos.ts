import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Schema from "effect/Schema"
import { ComboConfig, ComboName, ComboTarget, StrategyName } from "../../domain/combos.js"
import { STRATEGY_NAMES } from "../../services/routing/types.js"
import { MaxQueueWaitSeconds } from "../../domain/quotaQueue.js"
import { lazy } from "../handler.js"
import { json } from "../options.js"
import { intFromText, schemaArg, schemaOption, schemaOptions } from "../schema.js"

const impl = () => import("./combos.impl.js")

/** `model` or `model=weight`, then the API's target schema. */
const TargetText = Schema.compose(
  Schema.transform(Schema.String, Schema.Struct({ model: Schema.String, weight: Schema.optional(Schema.Number) }), {
    strict: true,
    decode: (raw) => {
      const eq = raw.lastIndexOf("=")
      const weight = eq > 0 ? Number(raw.slice(eq + 1)) : NaN
      return Number.isFinite(weight) ? { model: raw.slice(0, eq), weight } : { model: raw }
    },
    encode: (t) => (t.weight !== undefined ? `${t.model}=${t.weight}` : t.model)
  }),
  ComboTarget
)

/** `--max-queue-wait <seconds>` (0: off), kept as the combo's `config.maxQueueWaitSeconds`. */
const maxQueueWait = schemaOption("max-queue-wait", intFromText(MaxQueueWaitSeconds)).pipe(
  Options.withDescription(
    'Longest wait, in seconds, for an upstream\'s quota to reset when every target is out of it; 0: off (docs/resilience.md, "Waiting out a quota").'
  )
)

export const listOptions = { json }
export const createOptions = {
  name: schemaArg("name", ComboName),
  strategy: schemaOption("strategy", StrategyName).pipe(Options.withDescription(`Routing strategy: ${STRATEGY_NAMES.join(", ")}.`)),
  target: schemaOptions("target", TargetText).pipe(
    Options.withDescription("A target `<provider>/<model>`, optionally `=<weight>`; repeat in priority order.")
  ),
  config: schemaOption("config", Schema.parseJson(ComboConfig)).pipe(
    Options.withDescription("Strategy configuration as JSON (judgeModel, fusionTuning, routerStrategy, auto, ...)."),
    Options.optional
  ),
  description: Options.text("description").pipe(Options.optional),
  maxQueueWait: maxQueueWait.pipe(Options.optional),
  json
}
export const deleteOptions = { id: Args.text({ name: "id-or-name" }), json }
export const queueWaitOptions = { id: Args.text({ name: "id-or-name" }), maxQueueWait, json }
export const switchOptions = { id: Args.text({ name: "id-or-name" }), model: schemaArg("model", TargetText), json }

const list = Command.make(
  "list",
  listOptions,
  lazy(impl, (m) => m.list)
).pipe(Command.withDescription("List routing combos."))
const create = Command.make(
  "create",
  createOptions,
  lazy(impl, (m) => m.create)
).pipe(Command.withDescription("Create a routing combo."))
const remove = Command.make(
  "delete",
  deleteOptions,
  lazy(impl, (m) => m.remove)
).pipe(Command.withDescription("Delete a routing combo."))
const queueWait = Command.make(
  "queue-wait",
  queueWaitOptions,
  lazy(impl, (m) => m.queueWait)
).pipe(Command.withDescription("Set how long the combo's requests may wait for a quota to reset (--max-queue-wait 0: off)."))
const switchPrimary = Command.make(
  "switch",
  switchOptions,
  lazy(impl, (m) => m.switchPrimary)
).pipe(Command.withDescription("Make a model the combo's primary (first) target, adding it when missing."))

export const comboCommand = Command.make("combo").pipe(
  Command.withDescription("Manage routing combos in the local database (a running server sees changes within a second)."),
  Command.withSubcommands([list, create, remove, switchPrimary, queueWait])
)
