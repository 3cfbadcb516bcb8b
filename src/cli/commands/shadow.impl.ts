import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ShadowReport } from "../../domain/shadow.js"
import type { Parsed } from "../handler.js"
import { printJson, table } from "../output.js"
import { explain, remote, withHttp } from "../remote.js"
import { UsageError } from "../schema.js"
import type { reportOptions } from "./shadow.js"

const pct = (x: number | null) => (x === null ? "-" : `${(x * 100).toFixed(1)}%`)
const interval = (i: { mean: number; low: number; high: number } | null, digits: number, unit: string) =>
  i === null ? "-" : `${i.mean.toFixed(digits)}${unit} [${i.low.toFixed(digits)}, ${i.high.toFixed(digits)}]`

export const print = (r: ShadowReport) =>
  Effect.gen(function* () {
    const replay = r.scope.startsWith("replay:")
    yield* Console.log(
      replay
        ? `replay report for ${r.scope.slice("replay:".length)}: spent $${r.spentTodayUsd.toFixed(6)} of $${r.budgetUsdPerDay}`
        : `shadow report for ${r.scope}${r.since ? ` since ${r.since}` : ""}: spent today $${r.spentTodayUsd.toFixed(6)} of $${r.budgetUsdPerDay}`
    )
    const skipped = Object.entries(r.skipped)
    if (skipped.length > 0) yield* Console.log(`skipped: ${skipped.map(([k, v]) => `${k} ${v}`).join(", ")}`)
    if (r.targets.length === 0)
      return yield* Console.log(
        replay ? "no pairs: nothing in the source could be replayed" : "no pairs yet: set config.shadow on the combo and send it traffic"
      )
    yield* Console.log(
      table(
        [
          replay ? "CANDIDATE" : "SHADOW MODEL",
          "PAIRS",
          "FAILED",
          "EXACT",
          "NORMALIZED",
          "TOOLS",
          "WIN/TIE/LOSS",
          "COST Δ (USD, 95%)",
          "LATENCY Δ (ms, 95%)"
        ],
        r.targets.map((t) => [
          t.shadowModel,
          String(t.pairs),
          String(t.failed),
          pct(t.exactAgreement),
          pct(t.normalizedAgreement),
          pct(t.toolAgreement),
          t.judge.judged === 0 ? "-" : `${t.judge.wins}/${t.judge.ties}/${t.judge.losses}`,
          interval(t.costDeltaUsd, 6, ""),
          interval(t.latencyDeltaMs, 0, "")
        ])
      )
    )
    for (const t of r.targets) {
      if (t.worst.length === 0) continue
      yield* Console.log(`\nworst disagreements, ${t.shadowModel}:`)
      for (const w of t.worst) {
        yield* Console.log(`- ${w.requestId} (similarity ${w.similarity.toFixed(2)}${w.judge ? `, judge: ${w.judge}` : ""})`)
        yield* Console.log(`  primary: ${w.primary.replace(/\s+/g, " ").slice(0, 160)}`)
        yield* Console.log(`  shadow:  ${w.shadow.replace(/\s+/g, " ").slice(0, 160)}`)
      }
    }
  })

export const report = (opts: Parsed<typeof reportOptions>) =>
  Effect.gen(function* () {
    const days = Option.getOrUndefined(opts.days)
    if (days !== undefined && (days < 1 || days > 3650)) return yield* new UsageError({ message: "--days must be between 1 and 3650" })
    const { url, client } = yield* remote(opts)
    const r = yield* client.shadow
      .report({ urlParams: { combo: opts.combo, ...(days !== undefined ? { days } : {}) } })
      .pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(r)
    yield* print(r)
  }).pipe(withHttp)
