import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Parsed } from "../handler.js"
import { printJson, table } from "../output.js"
import { explain, remote, withHttp } from "../remote.js"
import type { usageOptions } from "./usage.js"

const usd = (n: number) => `$${n.toFixed(4)}`

/** What a group without a key is called: requests of keys without an owner, or without a key. */
const NONE: Record<string, string> = { team: "(no team)", user: "(no user)", apiKey: "(no key)" }

export const usage = (opts: Parsed<typeof usageOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const query = {
      from: Option.getOrUndefined(opts.from),
      to: Option.getOrUndefined(opts.to),
      groupBy: Option.getOrUndefined(opts.by),
      teamId: Option.getOrUndefined(opts.team),
      userId: Option.getOrUndefined(opts.user),
      apiKeyId: Option.getOrUndefined(opts.key),
      provider: Option.getOrUndefined(opts.provider),
      model: Option.getOrUndefined(opts.model)
    }
    const urlParams = Object.fromEntries(Object.entries(query).filter(([, v]) => v !== undefined)) as typeof query
    if (opts.csv) {
      const text = yield* client.usage.export({ urlParams }).pipe(Effect.mapError(explain(url)))
      return yield* Console.log(text.replace(/\r\n$/, ""))
    }
    const h = yield* client.usage.history({ urlParams }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(h)
    yield* Console.log(`usage from ${h.from} to ${h.to}, by ${h.groupBy}`)
    const named = h.groupBy === "apiKey" || h.groupBy === "team" || h.groupBy === "user"
    const line = (r: (typeof h.rows)[number], label: string, name: string | null | undefined) => [
      label,
      ...(named ? [name ?? "-"] : []),
      String(r.requests),
      String(r.errors),
      String(r.tokensIn),
      String(r.tokensOut),
      usd(r.costUsd),
      r.avgLatencyMs === null ? "-" : `${r.avgLatencyMs} ms`
    ]
    yield* Console.log(
      table(
        [h.groupBy.toUpperCase(), ...(named ? ["NAME"] : []), "REQUESTS", "ERRORS", "TOKENS IN", "TOKENS OUT", "COST", "AVG LATENCY"],
        [
          ...[...h.rows]
            .sort((a, b) => (named ? b.costUsd - a.costUsd || b.requests - a.requests : 0))
            .map((r) => line(r, r.key ?? NONE[h.groupBy] ?? "-", r.name)),
          line(h.totals, "total", "")
        ]
      )
    )
    if (h.groupBy === "team" && h.rows.reduce((n, r) => n + r.requests, 0) > h.totals.requests)
      yield* Console.log("(a user's key counts for each of the user's teams: the teams add up to more than the total)")
  }).pipe(withHttp)
