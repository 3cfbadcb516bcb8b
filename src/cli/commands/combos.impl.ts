import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { CreateCombo, UpdateCombo } from "../../domain/combos.js"
import { comboView, Combos } from "../../services/routing/Combos.js"
import type { Parsed } from "../handler.js"
import { withLocalGateway } from "../local.js"
import { orDash, printJson, table } from "../output.js"
import { decodeInput } from "../schema.js"
import type { createOptions, deleteOptions, listOptions, queueWaitOptions, switchOptions } from "./combos.js"

/** Payload fields and the flags that set them, for errors of rules that span fields. */
const FLAGS = { name: "<name>", strategy: "--strategy", targets: "--target", config: "--config", description: "--description" }

/** The combo's config with its longest quota wait set (0: off, the key removed). */
const withQueueWait = (config: Record<string, unknown>, seconds: number) => {
  const { maxQueueWaitSeconds: _, ...rest } = config
  return seconds > 0 ? { ...rest, maxQueueWaitSeconds: seconds } : rest
}

export const list = (opts: Parsed<typeof listOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const combos = yield* (yield* Combos).list
      if (opts.json) return yield* printJson({ combos: combos.map(comboView) })
      if (combos.length === 0)
        return yield* Console.log(
          "no combos yet: create one with `gateway combo create <name> --strategy priority --target <provider>/<model> ...`"
        )
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

export const create = (opts: Parsed<typeof createOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const input = yield* decodeInput(
        CreateCombo,
        FLAGS
      )({
        name: opts.name,
        strategy: opts.strategy,
        targets: opts.target,
        ...(Option.isSome(opts.config) || Option.isSome(opts.maxQueueWait)
          ? {
              config: Option.match(opts.maxQueueWait, {
                onNone: () => Option.getOrElse(opts.config, () => ({})),
                onSome: (seconds) =>
                  withQueueWait(
                    Option.getOrElse(opts.config, () => ({})),
                    seconds
                  )
              })
            }
          : {}),
        ...Option.match(opts.description, { onNone: () => ({}), onSome: (description) => ({ description }) })
      })
      const created = yield* (yield* Combos).create(input, "cli")
      if (opts.json) return yield* printJson(comboView(created))
      yield* Console.log(`created combo ${created.name} (${created.id}, ${created.strategy}); use it as the model id '${created.name}'`)
    })
  )

export const remove = (opts: Parsed<typeof deleteOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const removed = yield* (yield* Combos).remove(opts.id, "cli")
      if (opts.json) return yield* printJson({ removed: comboView(removed) })
      yield* Console.log(`deleted combo ${removed.name} (${removed.id})`)
    })
  )

export const switchPrimary = (opts: Parsed<typeof switchOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const combos = yield* Combos
      const combo = yield* combos.get(opts.id)
      const target = opts.model
      const existing = combo.targets.find((t) => t.model === target.model)
      const first = existing ? { ...existing, ...(target.weight !== undefined ? { weight: target.weight } : {}) } : target
      const patch = yield* decodeInput(UpdateCombo, FLAGS)({ targets: [first, ...combo.targets.filter((t) => t.model !== target.model)] })
      const updated = yield* combos.update(combo.id, patch, "cli")
      if (opts.json) return yield* printJson(comboView(updated))
      yield* Console.log(`combo ${updated.name}: primary target is now ${first.model}${existing ? "" : " (added)"}`)
    })
  )

export const queueWait = (opts: Parsed<typeof queueWaitOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const combos = yield* Combos
      const combo = yield* combos.get(opts.id)
      const patch = yield* decodeInput(UpdateCombo, FLAGS)({ config: withQueueWait(combo.config, opts.maxQueueWait) })
      const updated = yield* combos.update(combo.id, patch, "cli")
      if (opts.json) return yield* printJson(comboView(updated))
      const seconds = updated.config.maxQueueWaitSeconds
      yield* Console.log(
        `combo ${updated.name}: ${seconds ? `requests wait up to ${seconds} s for a quota to reset` : "requests do not wait for a quota to reset"}`
      )
    })
  )
