import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { CreateCombo } from "../../domain/combos.js"
import { BadRequest } from "../../domain/errors.js"
import { decodeOrBadRequest } from "../../domain/parse.js"
import { comboView, Combos, switchPrimary } from "../../routing/Combos.js"
import { STRATEGY_NAMES } from "../../routing/types.js"
import { withLocalGateway } from "../local.js"
import { orDash, printJson, table } from "../output.js"

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON."))

/** `model` or `model=weight`. */
const parseTarget = (raw: string): { model: string; weight?: number } => {
  const eq = raw.lastIndexOf("=")
  if (eq <= 0) return { model: raw }
  const weight = Number(raw.slice(eq + 1))
  return Number.isFinite(weight) ? { model: raw.slice(0, eq), weight } : { model: raw }
}

const decode = <A, I>(schema: Schema.Schema<A, I>, input: unknown) => decodeOrBadRequest(schema)(input)

const list = Command.make("list", { json }, (opts) =>
  withLocalGateway(
    Effect.gen(function* () {
      const combos = yield* (yield* Combos).list
      if (opts.json) return yield* printJson({ combos: combos.map(comboView) })
      if (combos.length === 0) return yield* Console.log("no combos yet: create one with `gateway combo create <name> --strategy priority --target <provider>/<model> ...`")
      yield* Console.log(
        table(
          ["NAME", "STRATEGY", "TARGETS", "ENABLED", "DESCRIPTION"],
          combos.map((c) => [
            c.name,
            c.strategy,
            c.targets.map((t) => (t.weight !== undefined ? `${t.model}=${t.weight}` : t.model)).join(", ") || "(all connected)",
            c.enabled ? "yes" : "no",
            orDash(c.description)
          ])
        )
      )
    })
  )
).pipe(Command.withDescription("List routing combos."))

const create = Command.make(
  "create",
  {
    name: Args.text({ name: "name" }),
    strategy: Options.choice("strategy", STRATEGY_NAMES).pipe(Options.withDescription("Routing strategy.")),
    target: Options.text("target").pipe(Options.withDescription("A target `<provider>/<model>`, optionally `=<weight>`; repeat in priority order."), Options.repeated),
    config: Options.text("config").pipe(Options.withDescription("Strategy configuration as JSON (judgeModel, fusionTuning, routerStrategy, auto, ...)."), Options.optional),
    description: Options.text("description").pipe(Options.optional),
    json
  },
  (opts) =>
    withLocalGateway(
      Effect.gen(function* () {
        const rawConfig = Option.getOrUndefined(opts.config)
        const config =
          rawConfig !== undefined
            ? yield* Effect.try({ try: () => JSON.parse(rawConfig) as unknown, catch: (e) => new BadRequest({ message: `--config is not valid JSON: ${(e as Error).message}` }) })
            : undefined
        const input = yield* decode(CreateCombo, {
          name: opts.name,
          strategy: opts.strategy,
          targets: opts.target.map(parseTarget),
          ...(config !== undefined ? { config } : {}),
          ...Option.match(opts.description, { onNone: () => ({}), onSome: (description) => ({ description }) })
        })
        const created = yield* (yield* Combos).create(input, "cli")
        if (opts.json) return yield* printJson(comboView(created))
        yield* Console.log(`created combo ${created.name} (${created.id}, ${created.strategy}); use it as the model id '${created.name}'`)
      })
    )
).pipe(Command.withDescription("Create a routing combo."))

const remove = Command.make("delete", { id: Args.text({ name: "id-or-name" }), json }, (opts) =>
  withLocalGateway(
    Effect.gen(function* () {
      const removed = yield* (yield* Combos).remove(opts.id, "cli")
      if (opts.json) return yield* printJson({ removed: comboView(removed) })
      yield* Console.log(`deleted combo ${removed.name} (${removed.id})`)
    })
  )
).pipe(Command.withDescription("Delete a routing combo."))

const switchCommand = Command.make("switch", { id: Args.text({ name: "id-or-name" }), model: Args.text({ name: "model" }), json }, (opts) =>
  withLocalGateway(
    Effect.gen(function* () {
      const switched = yield* switchPrimary(yield* Combos, opts.id, parseTarget(opts.model), "cli")
      if (opts.json) return yield* printJson(comboView(switched.combo))
      yield* Console.log(`combo ${switched.combo.name}: primary target is now ${switched.primary.model}${switched.added ? " (added)" : ""}`)
    })
  )
).pipe(Command.withDescription("Make a model the combo's primary (first) target, adding it when missing."))

export const comboCommand = Command.make("combo").pipe(
  Command.withDescription("Manage routing combos in the local database (a running server sees changes within a second)."),
  Command.withSubcommands([list, create, remove, switchCommand])
)
