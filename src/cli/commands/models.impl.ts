import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Parsed } from "../handler.js"
import { orDash, printJson, table } from "../output.js"
import { explain, remote, withHttp } from "../remote.js"
import type { modelsOptions, providerAddOptions, providerListOptions } from "./models.js"

const price = (p: { readonly input: number; readonly output: number }) => `$${p.input}/$${p.output}`

export const models = (opts: Parsed<typeof modelsOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const provider = Option.getOrUndefined(opts.provider)
    const res = yield* client.models
      .catalog({ urlParams: { ...(provider ? { provider } : {}), ...(opts.connected ? { scope: "connected" as const } : {}) } })
      .pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(res)
    if (res.models.length === 0) return yield* Console.log(provider ? `no models for '${provider}'` : "no models")
    yield* Console.log(
      table(
        ["ID", "KIND", "CONTEXT", "MAX OUT", "PRICE IN/OUT (1M)", "CUSTOM"],
        res.models.map((m) => [
          m.id,
          m.kind,
          m.contextWindow ? String(m.contextWindow) : "-",
          m.maxOutput ? String(m.maxOutput) : "-",
          price(m.price),
          m.custom ? "yes" : orDash(null)
        ])
      )
    )
  }).pipe(withHttp)

export const providerList = (opts: Parsed<typeof providerListOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const res = yield* client.providers.list().pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(res)
    if (res.connections.length === 0) return yield* Console.log("no provider connections (add one with `gateway provider add`)")
    yield* Console.log(
      table(
        ["NAME", "PROVIDER", "BASE URL", "API KEY", "ENABLED", "STATUS"],
        res.connections.map((c) => [
          c.name,
          c.provider,
          orDash(c.effectiveBaseUrl),
          orDash(c.apiKey),
          c.enabled ? "yes" : "no",
          orDash(c.testStatus)
        ])
      )
    )
  }).pipe(withHttp)

export const providerAdd = (opts: Parsed<typeof providerAddOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote({ url: opts.url, apiKey: opts.adminKey })
    const apiKey = Option.getOrUndefined(opts.providerApiKey)
    const name = Option.getOrUndefined(opts.name)
    const baseUrl = Option.getOrUndefined(opts.baseUrl)
    const c = yield* client.providers
      .create({
        payload: { provider: opts.provider, ...(name ? { name } : {}), ...(apiKey ? { apiKey } : {}), ...(baseUrl ? { baseUrl } : {}) }
      })
      .pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(c)
    yield* Console.log(`added ${c.name} (${c.provider}, ${c.id})${c.apiKey ? `, key ${c.apiKey}` : ""}; models are <${c.name}>/<model>`)
  }).pipe(withHttp)
