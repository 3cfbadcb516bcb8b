import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import { Pricing } from "../../services/accounting/Pricing.js"
import { Compression } from "../../services/context/Compression.js"
import { ContextStore } from "../../services/context/ContextStore.js"
import {
  AnalyticsQuery,
  CompressionAssignments,
  type CompressionComboView,
  CreateCompressionCombo,
  PreviewPayload,
  RtkTestPayload
} from "../../domain/context.js"
import { BadRequest } from "../../domain/errors.js"
import { SettingsPatch } from "../../domain/settings.js"
import { Settings } from "../../platform/settings/Settings.js"
import type { Parsed } from "../handler.js"
import { withLocalGateway } from "../local.js"
import { orDash, printJson, table } from "../output.js"
import { decodeInput, UsageError } from "../schema.js"
import type {
  comboAssignOptions,
  comboCreateOptions,
  comboDeleteOptions,
  comboListOptions,
  previewOptions,
  rtkTestOptions,
  settingsOptions,
  statsOptions
} from "./compression.js"

/** A file's text, or stdin's when no file is given (stdin must be piped). */
export const readInput = (file: Option.Option<string>, what: string, flag = "--file") =>
  Option.match(file, {
    onSome: (f) =>
      Effect.tryPromise({
        try: () => fs.promises.readFile(f, "utf8"),
        catch: (e) => new UsageError({ message: `${flag}: cannot read ${f}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` })
      }),
    onNone: () =>
      process.stdin.isTTY
        ? Effect.fail(new UsageError({ message: `give ${what} with ${flag} <path> or on stdin` }))
        : Effect.promise(async () => {
            const chunks: Array<Buffer> = []
            for await (const c of process.stdin) chunks.push(c as Buffer)
            return Buffer.concat(chunks).toString("utf8")
          })
  })

/**
 * The local database with the Compression service, which the CLI's core layer leaves out (the
 * server builds it beside the HTTP plane): it needs Pricing (for the savings in dollars).
 */
const CompressionLocal = Compression.layer.pipe(Layer.provide(Pricing.layer))
const withCompression = <A, E, R>(effect: Effect.Effect<A, E, R>) => withLocalGateway(Effect.provide(effect, CompressionLocal))

const some = <K extends string, A>(key: K, o: Option.Option<A>): { [P in K]?: A } =>
  Option.isSome(o) ? ({ [key]: o.value } as { [P in K]: A }) : {}

const n = (x: number) => x.toLocaleString("en-US")

// ---------------------------------------------------------------- preview

export const preview = (opts: Parsed<typeof previewOptions>) =>
  withCompression(
    Effect.gen(function* () {
      const text = yield* readInput(opts.file, "the request body (JSON)")
      const body = yield* Effect.try({
        try: () => JSON.parse(text) as unknown,
        catch: () => new UsageError({ message: `${Option.isSome(opts.file) ? opts.file.value : "stdin"}: the request body is not JSON` })
      })
      const payload = yield* decodeInput(PreviewPayload, {
        body: "the request body",
        mode: "--mode",
        model: "--model",
        format: "--format"
      })({
        body,
        ...some("format", opts.format),
        ...some("mode", opts.mode),
        ...some("model", opts.model)
      })
      const result = yield* (yield* Compression).preview(payload)
      if (Option.isSome(opts.output)) {
        const out = opts.output.value
        yield* Effect.tryPromise({
          try: () => fs.promises.writeFile(out, JSON.stringify(result.body, null, 2) + "\n"),
          catch: (e) =>
            new UsageError({ message: `--output: cannot write ${out}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` })
        })
      }
      if (opts.json) return yield* printJson(result)
      const pct = (before: number, after: number) => (before > 0 ? `${(((before - after) / before) * 100).toFixed(1)}%` : "-")
      yield* Console.log(`mode ${result.mode}, tokenizer ${result.tokenizer}`)
      if (result.engines.length > 0)
        yield* Console.log(
          table(
            ["ENGINE", "BEFORE", "AFTER", "SAVED"],
            result.engines.map((e) => [
              e.engine,
              n(e.tokensBefore),
              n(e.tokensAfter),
              `${n(e.tokensSaved)} (${pct(e.tokensBefore, e.tokensAfter)})`
            ])
          )
        )
      else yield* Console.log("no engine changed anything")
      yield* Console.log(
        `total: ${n(result.tokensBefore)} → ${n(result.tokensAfter)} tokens, ${n(result.tokensBefore - result.tokensAfter)} saved (${pct(result.tokensBefore, result.tokensAfter)})`
      )
      if (Option.isSome(opts.output)) yield* Console.log(`compressed body written to ${opts.output.value}`)
    })
  )

// ---------------------------------------------------------------- combos

/** A compression combo by id, then by name (case-insensitive). */
const findCombo = (idOrName: string) =>
  Effect.gen(function* () {
    const store = yield* ContextStore
    const snapshot = yield* store.snapshot
    const c = snapshot.byId.get(idOrName) ?? snapshot.byName.get(idOrName.trim().toLowerCase())
    if (!c)
      return yield* new BadRequest({ message: `no compression combo with the id or name '${idOrName}' (gateway compression combos list)` })
    return yield* store.getCombo(c.id)
  })

const stepText = (c: CompressionComboView) =>
  c.engines.map((s) => (s.config && Object.keys(s.config).length > 0 ? `${s.engine}:${JSON.stringify(s.config)}` : s.engine)).join(" → ")

export const comboList = (opts: Parsed<typeof comboListOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const combos = yield* (yield* ContextStore).listCombos
      if (opts.json) return yield* printJson({ combos })
      if (combos.length === 0)
        return yield* Console.log(
          "no compression combos yet: create one with `gateway compression combos create <name> --engine rtk --engine caveman ...`"
        )
      yield* Console.log(
        table(
          ["NAME", "ID", "ENGINES", "ASSIGNED TO", "DESCRIPTION"],
          combos.map((c) => [
            c.name,
            c.id,
            stepText(c),
            orDash([...c.assignments.routingCombos.map((r) => `combo:${r}`), ...c.assignments.models].join(", ")),
            orDash(c.description)
          ])
        )
      )
    })
  )

export const comboCreate = (opts: Parsed<typeof comboCreateOptions>) =>
  withCompression(
    Effect.gen(function* () {
      const input = yield* decodeInput(CreateCompressionCombo, { name: "<name>", engines: "--engine", description: "--description" })({
        name: opts.name,
        engines: opts.engine,
        ...some("description", opts.description)
      })
      // "engines[1].config: ..." names the second --engine.
      yield* Effect.mapError(
        (yield* Compression).checkSteps(input.engines),
        (e) =>
          new UsageError({
            message: e.message.replace(
              /^engines\[(\d+)\](\.config)?/,
              (_, i: string) => `--engine ${input.engines[Number(i)]?.engine ?? ""} (step ${Number(i) + 1})`
            )
          })
      )
      const created = yield* (yield* ContextStore).createCombo(input, "cli")
      if (opts.json) return yield* printJson(created)
      yield* Console.log(
        `created compression combo ${created.name} (${created.id}): ${stepText(created)}; use it with x-gateway-compression: ${created.name}`
      )
    })
  )

export const comboDelete = (opts: Parsed<typeof comboDeleteOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const combo = yield* findCombo(opts.id)
      const removed = yield* (yield* ContextStore).removeCombo(combo.id, "cli")
      if (opts.json) return yield* printJson({ removed })
      yield* Console.log(`deleted compression combo ${removed.name} (${removed.id})`)
    })
  )

export const comboAssign = (opts: Parsed<typeof comboAssignOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const store = yield* ContextStore
      const combo = yield* findCombo(opts.id)
      const given = opts.routingCombo.length > 0 || opts.model.length > 0
      if (given && opts.clear) return yield* new UsageError({ message: "--clear takes no --routing-combo or --model" })
      const assignments =
        given || opts.clear
          ? yield* store.setAssignments(
              combo.id,
              yield* decodeInput(CompressionAssignments, { routingCombos: "--routing-combo", models: "--model" })({
                routingCombos: opts.routingCombo,
                models: opts.model
              }),
              "cli"
            )
          : yield* store.getAssignments(combo.id)
      if (opts.json) return yield* printJson({ id: combo.id, name: combo.name, ...assignments })
      const none = assignments.routingCombos.length === 0 && assignments.models.length === 0
      yield* Console.log(
        none
          ? `compression combo ${combo.name} is assigned to nothing`
          : `compression combo ${combo.name} applies to${assignments.routingCombos.length > 0 ? ` routing combos ${assignments.routingCombos.join(", ")}` : ""}${assignments.routingCombos.length > 0 && assignments.models.length > 0 ? " and" : ""}${assignments.models.length > 0 ? ` models ${assignments.models.join(", ")}` : ""}`
      )
    })
  )

// ---------------------------------------------------------------- settings

export const settings = (opts: Parsed<typeof settingsOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      if (opts.enable && opts.disable) return yield* new UsageError({ message: "--enable and --disable contradict each other" })
      if (opts.noActiveProfile && Option.isSome(opts.activeProfile))
        return yield* new UsageError({ message: "--active-profile and --no-active-profile contradict each other" })
      const autoTrigger = {
        ...some("enabled", opts.autoTrigger),
        ...some("thresholdTokens", opts.autoTriggerTokens),
        ...some("windowShare", opts.windowShare)
      }
      const compression = {
        ...(opts.enable ? { enabled: true } : opts.disable ? { enabled: false } : {}),
        ...(opts.noActiveProfile ? { activeProfile: null } : some("activeProfile", opts.activeProfile)),
        ...Option.match(opts.defaultCombo, {
          onNone: () => ({}),
          onSome: (d) => ({ defaultCombo: d.trim().toLowerCase() === "builtin" ? null : d })
        }),
        ...some("compressByDefault", opts.compressByDefault),
        ...some("injectionMaxTokens", opts.injectionMaxTokens),
        ...(Object.keys(autoTrigger).length > 0 ? { autoTrigger } : {})
      }
      const service = yield* Settings
      let doc = yield* service.get
      if (Object.keys(compression).length > 0) {
        const patch = yield* decodeSettingsPatch({ compression })
        doc = yield* service.patch(patch, "cli")
      }
      const s = doc.compression
      if (opts.json) return yield* printJson(s)
      yield* Console.log(
        table(
          ["SETTING", "VALUE"],
          [
            ["enabled", String(s.enabled)],
            ["active profile", s.activeProfile ?? "(none)"],
            ["default combo", s.defaultCombo ?? "(built-in)"],
            ["compress by default", String(s.compressByDefault)],
            ["auto-trigger", String(s.autoTrigger.enabled)],
            ["auto-trigger tokens", s.autoTrigger.thresholdTokens === null ? "off" : String(s.autoTrigger.thresholdTokens)],
            ["window share", s.autoTrigger.windowShare === null ? "off" : String(s.autoTrigger.windowShare)],
            ["injection max tokens", String(s.injectionMaxTokens)]
          ]
        )
      )
    })
  )

/** The settings flags, by the patch's field path. */
const SETTINGS_FLAGS: Record<string, string> = {
  "compression.enabled": "--enable/--disable",
  "compression.activeProfile": "--active-profile",
  "compression.defaultCombo": "--default-combo",
  "compression.compressByDefault": "--compress-by-default",
  "compression.injectionMaxTokens": "--injection-max-tokens",
  "compression.autoTrigger.enabled": "--auto-trigger",
  "compression.autoTrigger.thresholdTokens": "--auto-trigger-tokens",
  "compression.autoTrigger.windowShare": "--window-share"
}
const decodeSettingsPatch = (input: unknown) =>
  Effect.mapError(decodeInput(SettingsPatch)(input), (e) => {
    // "compression.autoTrigger.windowShare: windowShare must be ..." → "--window-share: windowShare must be ..."
    let message = e.message
    for (const [p, flag] of Object.entries(SETTINGS_FLAGS).sort((a, b) => b[0].length - a[0].length))
      message = message.split(`${p}:`).join(`${flag}:`)
    return new UsageError({ message })
  })

// ---------------------------------------------------------------- stats

const money = (usd: number) => `$${usd.toFixed(usd > 0 && usd < 0.01 ? 4 : 2)}`

export const stats = (opts: Parsed<typeof statsOptions>) =>
  withCompression(
    Effect.gen(function* () {
      const q = yield* decodeInput(AnalyticsQuery, { from: "--from", to: "--to" })({ ...some("from", opts.from), ...some("to", opts.to) })
      const a = yield* (yield* Compression).analytics(q)
      if (opts.json) return yield* printJson(a)
      yield* Console.log(`compression ${a.from} to ${a.to}`)
      if (a.totals.requests === 0) return yield* Console.log("nothing compressed or injected in this period")
      type Row = {
        readonly requests: number
        readonly tokensBefore: number
        readonly tokensAfter: number
        readonly tokensSaved: number
        readonly savedUsd: number
        readonly injectedTokens: number
      }
      const cells = (r: Row) => [
        n(r.requests),
        n(r.tokensBefore),
        n(r.tokensAfter),
        n(r.tokensSaved),
        money(r.savedUsd),
        n(r.injectedTokens)
      ]
      const head = ["REQUESTS", "BEFORE", "AFTER", "SAVED", "SAVED USD", "INJECTED"]
      yield* Console.log(
        "\n" +
          table(
            ["ENGINE", ...head],
            a.byEngine.map((r) => [r.engine, ...cells(r)])
          )
      )
      yield* Console.log(
        "\n" +
          table(
            ["COMBO", ...head],
            a.byCombo.map((r) => [r.combo, ...cells(r)])
          )
      )
      yield* Console.log(
        "\n" +
          table(
            ["MODEL", ...head],
            a.byModel.map((r) => [r.model, ...cells(r)])
          )
      )
      yield* Console.log(
        `\ntotal: ${n(a.totals.requests)} requests, ${n(a.totals.tokensSaved)} tokens saved (${n(a.totals.tokensBefore)} → ${n(a.totals.tokensAfter)}), ${money(a.totals.savedUsd)} saved, ${n(a.totals.injectedTokens)} tokens injected`
      )
    })
  )

// ---------------------------------------------------------------- rtk

export const rtkTest = (opts: Parsed<typeof rtkTestOptions>) =>
  withCompression(
    Effect.gen(function* () {
      const text = yield* readInput(opts.file, "the command output")
      const payload = yield* decodeInput(RtkTestPayload, { text: Option.isSome(opts.file) ? "--file" : "stdin", command: "--command" })({
        text,
        ...some("command", opts.command)
      })
      const r = yield* (yield* Compression).rtkTest(payload)
      if (opts.json) return yield* printJson(r)
      yield* Console.log(r.output)
      yield* Console.error(
        `rtk: filter ${r.filter ?? "(none)"}; ${n(r.linesBefore)} → ${n(r.linesAfter)} lines, ${n(r.tokensBefore)} → ${n(r.tokensAfter)} tokens${r.steps.length > 0 ? `; steps: ${r.steps.join(", ")}` : ""}`
      )
    })
  )
