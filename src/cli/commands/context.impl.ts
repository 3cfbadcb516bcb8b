import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ContextStore } from "../../services/context/ContextStore.js"
import { CreateContextSkill, CreateMemory, type ContextSkillView, type MemoryView } from "../../domain/context.js"
import { NotFound } from "../../domain/errors.js"
import { SkillCatalog } from "../../services/skills/SkillCatalog.js"
import type { Parsed } from "../handler.js"
import { withLocalGateway } from "../local.js"
import { orDash, printJson, table } from "../output.js"
import { decodeInput, UsageError } from "../schema.js"
import { readInput } from "./compression.impl.js"
import type { idOptions, memoryAddOptions, memoryListOptions, skillAddOptions, skillIdOptions, skillListOptions } from "./context.js"

const some = <K extends string, A>(key: K, o: Option.Option<A>): { [P in K]?: A } =>
  Option.isSome(o) ? ({ [key]: o.value } as { [P in K]: A }) : {}

/** The first line of a text, cut to `max` characters. */
const brief = (text: string, max = 60) => {
  const line = text.trim().split("\n")[0] ?? ""
  return line.length > max || text.trim().includes("\n") ? `${line.slice(0, max - 1)}…` : line
}

// ---------------------------------------------------------------- memory

const memoryRows = (entries: ReadonlyArray<MemoryView>) =>
  table(
    ["ID", "SCOPE", "TAGS", "ENABLED", "TOKENS", "TEXT"],
    entries.map((m) => [
      m.id,
      m.scope === "global" ? "global" : `${m.scope}:${m.scopeId}`,
      orDash(m.tags.join(",")),
      m.enabled ? "yes" : "no",
      String(m.tokens),
      brief(m.text)
    ])
  )

export const memoryList = (opts: Parsed<typeof memoryListOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const entries = yield* (yield* ContextStore).listMemory({ ...some("scope", opts.scope), ...some("tag", opts.tag) })
      if (opts.json) return yield* printJson({ entries })
      if (entries.length === 0) return yield* Console.log('no memory entries: add one with `gateway context memory add "<text>"`')
      yield* Console.log(memoryRows(entries))
    })
  )

export const memoryAdd = (opts: Parsed<typeof memoryAddOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const input = yield* decodeInput(CreateMemory, { text: "<text>", scope: "--scope", scopeId: "--scope-id", tags: "--tag" })({
        text: opts.text,
        ...some("scope", opts.scope),
        ...some("scopeId", opts.scopeId),
        tags: opts.tag,
        enabled: !opts.disabled
      })
      const created = yield* Effect.mapError(
        (yield* ContextStore).createMemory(input, "cli"),
        (e) => new UsageError({ message: e.message.replace(/^scopeId:/, "--scope-id:") })
      )
      if (opts.json) return yield* printJson(created)
      yield* Console.log(
        `added memory entry ${created.id} (${created.scope === "global" ? "global" : `${created.scope} ${created.scopeId}`}, ${created.tokens} tokens${created.enabled ? "" : ", disabled"})`
      )
    })
  )

export const memoryRemove = (opts: Parsed<typeof idOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const removed = yield* (yield* ContextStore).removeMemory(opts.id, "cli")
      if (opts.json) return yield* printJson({ removed })
      yield* Console.log(`removed memory entry ${removed.id}`)
    })
  )

const setMemory = (enabled: boolean) => (opts: Parsed<typeof idOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const updated = yield* (yield* ContextStore).updateMemory(opts.id, { enabled }, "cli")
      if (opts.json) return yield* printJson(updated)
      yield* Console.log(`memory entry ${updated.id} ${enabled ? "enabled" : "disabled"}`)
    })
  )
export const memoryEnable = setMemory(true)
export const memoryDisable = setMemory(false)

// ---------------------------------------------------------------- skills

/** A skill by id, then by name (case-insensitive). */
const findSkill = (idOrName: string) =>
  Effect.gen(function* () {
    const skills = yield* (yield* ContextStore).listSkills
    const s = skills.find((k) => k.id === idOrName) ?? skills.find((k) => k.name.toLowerCase() === idOrName.trim().toLowerCase())
    if (!s) return yield* new NotFound({ message: `no skill with the id or name '${idOrName}' (gateway context skills list)` })
    return s
  })

const triggerText = (s: ContextSkillView) =>
  [s.trigger.always ? "always" : "", ...s.trigger.keywords.map((k) => `keyword:${k}`), ...s.trigger.models.map((m) => `model:${m}`)]
    .filter((x) => x !== "")
    .join(", ") || "(never)"

export const skillList = (opts: Parsed<typeof skillListOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const skills = yield* (yield* ContextStore).listSkills
      if (opts.json) return yield* printJson({ skills })
      if (skills.length === 0)
        return yield* Console.log("no skills: add one with `gateway context skills add <name> --catalog <id> --always`")
      yield* Console.log(
        table(
          ["NAME", "ID", "SOURCE", "TRIGGER", "ENABLED", "TOKENS"],
          skills.map((s) => [
            s.name,
            s.id,
            s.source === "catalog" ? `catalog:${s.catalogId}` : "custom",
            triggerText(s),
            s.enabled ? "yes" : "no",
            String(s.tokens)
          ])
        )
      )
    })
  )

export const skillAdd = (opts: Parsed<typeof skillAddOptions>) =>
  withLocalGateway(
    Effect.provide(
      Effect.gen(function* () {
        const sources = [opts.catalog, opts.text, opts.file].filter(Option.isSome).length
        if (sources !== 1)
          return yield* new UsageError({ message: "give exactly one of --catalog <skill id>, --text <instructions>, --file <path>" })
        const text = Option.isSome(opts.file) ? Option.some(yield* readInput(opts.file, "the skill")) : opts.text
        const input = yield* decodeInput(CreateContextSkill, {
          name: "<name>",
          catalogId: "--catalog",
          text: Option.isSome(opts.file) ? "--file" : "--text",
          trigger: "trigger"
        })({
          name: opts.name,
          ...some("catalogId", opts.catalog),
          ...some("text", text),
          trigger: { always: opts.always, keywords: opts.keyword, models: opts.model },
          enabled: !opts.disabled
        })
        const catalog = yield* SkillCatalog
        const catalogText = (id: string) =>
          Effect.map(catalog.get(id), (found) => (Option.isSome(found) ? found.value.markdown : undefined))
        const created = yield* (yield* ContextStore).createSkill(input, catalogText, "cli")
        if (opts.json) return yield* printJson(created)
        yield* Console.log(
          `added skill ${created.name} (${created.id}, ${created.tokens} tokens), injected on ${triggerText(created)}${created.enabled ? "" : " (disabled)"}`
        )
      }),
      SkillCatalog.layer
    )
  )

export const skillRemove = (opts: Parsed<typeof skillIdOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const skill = yield* findSkill(opts.id)
      const removed = yield* (yield* ContextStore).removeSkill(skill.id, "cli")
      if (opts.json) return yield* printJson({ removed })
      yield* Console.log(`removed skill ${removed.name} (${removed.id})`)
    })
  )

const setSkill = (enabled: boolean) => (opts: Parsed<typeof skillIdOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const skill = yield* findSkill(opts.id)
      const updated = yield* (yield* ContextStore).updateSkill(skill.id, { enabled }, "cli")
      if (opts.json) return yield* printJson(updated)
      yield* Console.log(`skill ${updated.name} ${enabled ? "enabled" : "disabled"}`)
    })
  )
export const skillEnable = setSkill(true)
export const skillDisable = setSkill(false)
