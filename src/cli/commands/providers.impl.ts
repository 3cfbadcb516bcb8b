import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ConnectionTestResult } from "../../domain/connections.js"
import { PROVIDERS, searchProviders } from "../../domain/catalog/catalog.js"
import { type Connection, Connections, connectionView } from "../../upstream/providers/Connections.js"
import { ProviderChecks } from "../../upstream/providers/ProviderChecks.js"
import { checkProviderUrl } from "../../upstream/providers/urlPolicy.js"
import type { Parsed } from "../handler.js"
import { withLocalGateway } from "../local.js"
import { exitWith, orDash, printJson, table } from "../output.js"
import type { availableOptions, listOptions, testAllOptions, testOptions, validateOptions } from "./providers.js"

export const available = (opts: Parsed<typeof availableOptions>) =>
  Effect.gen(function* () {
    const found = searchProviders({ search: Option.getOrUndefined(opts.search), category: Option.getOrUndefined(opts.category) })
    if (opts.json) return yield* printJson({ providers: found })
    yield* Console.log(
      table(
        ["ID", "NAME", "FORMAT", "CATEGORY", "MODELS", "BASE URL"],
        found.map((p) => [p.id, p.name, p.format, p.category, String(p.models.length), p.baseUrl ?? "(you supply it)"])
      )
    )
    if (!opts.search && !opts.category) yield* Console.log(`\n${PROVIDERS.length} providers`)
  })

export const list = (opts: Parsed<typeof listOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const connections = (yield* (yield* Connections).list).map(connectionView)
      if (opts.json) return yield* printJson({ connections })
      if (connections.length === 0) return yield* Console.log("no provider connections yet: add one with `gateway setup`")
      yield* Console.log(
        table(
          ["ID", "NAME", "PROVIDER", "BASE URL", "API KEY", "DEFAULT MODEL", "ENABLED", "STATUS"],
          connections.map((c) => [
            c.id,
            c.name,
            c.provider,
            orDash(c.effectiveBaseUrl),
            orDash(c.apiKey),
            orDash(c.defaultModel),
            c.enabled ? "yes" : "no",
            orDash(c.testStatus)
          ])
        )
      )
    })
  )

const printTests = (results: ReadonlyArray<ConnectionTestResult>, asJson: boolean) =>
  Effect.gen(function* () {
    if (asJson) yield* printJson(results.length === 1 ? results[0] : { results })
    else
      yield* Console.log(
        table(
          ["NAME", "PROVIDER", "RESULT", "STATUS", "LATENCY", "MODELS", "ERROR"],
          results.map((r) => [
            r.name,
            r.provider,
            r.ok ? "ok" : "FAILED",
            orDash(r.status),
            `${r.latencyMs}ms`,
            orDash(r.modelCount),
            orDash(r.error)
          ])
        )
      )
    if (results.some((r) => !r.ok)) yield* exitWith(1)
  })

export const test = (opts: Parsed<typeof testOptions>) =>
  withLocalGateway(Effect.flatMap(ProviderChecks, (c) => c.test(opts.id)).pipe(Effect.flatMap((r) => printTests([r], opts.json))))

export const testAll = (opts: Parsed<typeof testAllOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const checks = yield* ProviderChecks
      const all = yield* (yield* Connections).list
      const results = yield* Effect.forEach(all, (c) => checks.test(c.id), { concurrency: 4 })
      if (results.length === 0) return yield* opts.json ? printJson({ results: [] }) : Console.log("no provider connections to test")
      yield* printTests(results, opts.json)
    })
  )

/** Static checks of a stored connection: nothing is sent upstream. */
const problemsOf = (c: Connection, policy: Parameters<typeof checkProviderUrl>[1]): ReadonlyArray<string> => {
  const problems: Array<string> = []
  if (c.provider.id === "unknown" || !PROVIDERS.some((p) => p.id === c.provider.id)) problems.push(`unknown provider '${c.provider.id}'`)
  if (c.keyError) problems.push(c.keyError)
  if (c.provider.requiresApiKey && !c.apiKey && !c.keyError) problems.push("no API key")
  if (!c.effectiveBaseUrl) problems.push("no base URL")
  else {
    const verdict = checkProviderUrl(c.effectiveBaseUrl, policy)
    if (!verdict.ok) problems.push(verdict.reason)
  }
  if (c.provider.models.length === 0 && !c.defaultModel && c.models.length === 0) problems.push("no models: set a default model")
  return problems
}

export const validate = (opts: Parsed<typeof validateOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const connections = yield* Connections
      const policy = yield* connections.urlPolicy
      const results = (yield* connections.list).map((c) => ({
        id: c.id,
        name: c.name,
        provider: c.provider.id,
        problems: problemsOf(c, policy)
      }))
      if (opts.json) yield* printJson({ valid: results.every((r) => r.problems.length === 0), connections: results })
      else if (results.length === 0) yield* Console.log("no provider connections to validate")
      else
        yield* Console.log(
          table(
            ["NAME", "PROVIDER", "RESULT", "PROBLEMS"],
            results.map((r) => [r.name, r.provider, r.problems.length === 0 ? "ok" : "INVALID", r.problems.join("; ") || "-"])
          )
        )
      if (results.some((r) => r.problems.length > 0)) yield* exitWith(1)
    })
  )
