import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { orDash, printJson, table } from "../output.js"
import { explain, remote, remoteOptions } from "../remote.js"

const json = Options.boolean("json").pipe(Options.withDescription("Print JSON."))
const price = (p: { readonly input: number; readonly output: number }) => `$${p.input}/$${p.output}`

/** `gateway models [provider]`: the running server's model catalog (`GET /api/models/catalog`). */
export const modelsCommand = Command.make(
  "models",
  {
    ...remoteOptions,
    provider: Args.text({ name: "provider" }).pipe(Args.withDescription("A provider id, node id or connection name."), Args.optional),
    connected: Options.boolean("connected").pipe(Options.withDescription("Only what the connections serve now.")),
    json
  },
  (opts) =>
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
          res.models.map((m) => [m.id, m.kind, m.contextWindow ? String(m.contextWindow) : "-", m.maxOutput ? String(m.maxOutput) : "-", price(m.price), m.custom ? "yes" : orDash(null)])
        )
      )
    }).pipe(Effect.provide(FetchHttpClient.layer))
).pipe(Command.withDescription("Models of the running server's catalog (custom models and provider nodes included)."))

const list = Command.make("list", { ...remoteOptions, json }, (opts) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const res = yield* client.providers.list().pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(res)
    if (res.connections.length === 0) return yield* Console.log("no provider connections (add one with `gateway provider add`)")
    yield* Console.log(
      table(
        ["NAME", "PROVIDER", "BASE URL", "API KEY", "ENABLED", "STATUS"],
        res.connections.map((c) => [c.name, c.provider, orDash(c.effectiveBaseUrl), orDash(c.apiKey), c.enabled ? "yes" : "no", orDash(c.testStatus)])
      )
    )
  }).pipe(Effect.provide(FetchHttpClient.layer))
).pipe(Command.withDescription("Provider connections of the running server (keys masked)."))

const add = Command.make(
  "add",
  {
    url: remoteOptions.url,
    // `--api-key` is the upstream's key here (the spec's flag); the admin key comes from GATEWAY_API_KEY or --admin-key.
    adminKey: Options.text("admin-key").pipe(Options.withDescription("Admin API key (default GATEWAY_API_KEY)."), Options.optional),
    provider: Options.text("provider").pipe(Options.withDescription("A provider id (`gateway providers available`) or a provider node id.")),
    name: Options.text("name").pipe(Options.withDescription("Connection name, the model prefix (default: the provider id, or the node's prefix)."), Options.optional),
    providerApiKey: Options.text("api-key").pipe(Options.withDescription("The upstream's API key (never printed; listed masked)."), Options.optional),
    baseUrl: Options.text("base-url").pipe(Options.withDescription("The upstream's base URL, when not the provider's."), Options.optional),
    json
  },
  (opts) =>
    Effect.gen(function* () {
      const { url, client } = yield* remote({ url: opts.url, apiKey: opts.adminKey })
      const apiKey = Option.getOrUndefined(opts.providerApiKey)
      const name = Option.getOrUndefined(opts.name)
      const baseUrl = Option.getOrUndefined(opts.baseUrl)
      const c = yield* client.providers
        .create({ payload: { provider: opts.provider, ...(name ? { name } : {}), ...(apiKey ? { apiKey } : {}), ...(baseUrl ? { baseUrl } : {}) } })
        .pipe(Effect.mapError(explain(url)))
      if (opts.json) return yield* printJson(c)
      yield* Console.log(`added ${c.name} (${c.provider}, ${c.id})${c.apiKey ? `, key ${c.apiKey}` : ""}; models are <${c.name}>/<model>`)
    }).pipe(Effect.provide(FetchHttpClient.layer))
).pipe(Command.withDescription("Add a provider connection to the running server."))

/** `gateway provider list|add`: connections of a running server (`gateway providers` reads the local database). */
export const providerCommand = Command.make("provider").pipe(
  Command.withDescription("Provider connections of the running server: list, add."),
  Command.withSubcommands([list, add])
)
