import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { AppConfig } from "../../config/AppConfig.js"
import { ManagementApi } from "../../management/Api.js"
import { cliConfig } from "../local.js"
import { exitWith, printJson } from "../output.js"

/** A client for the running server, derived from the same HttpApi the server implements. */
export const managementClient = (baseUrl: string, adminKey: string | undefined) =>
  HttpApiClient.make(ManagementApi, {
    baseUrl,
    transformClient: (client) =>
      adminKey ? HttpClient.mapRequest(client, HttpClientRequest.bearerToken(adminKey)) : client
  })

export const statusCommand = Command.make(
  "status",
  {
    url: Options.text("url").pipe(Options.withDescription("Server address (default http://127.0.0.1:<port>)."), Options.optional),
    apiKey: Options.text("api-key").pipe(
      Options.withDescription("Admin API key for details (default GATEWAY_API_KEY)."),
      Options.optional
    ),
    json: Options.boolean("json").pipe(Options.withDescription("Print JSON."))
  },
  (opts) =>
    Effect.gen(function* () {
      const config = yield* Effect.provide(AppConfig, AppConfig.layer(yield* cliConfig))
      const connectHost = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host
      const url = Option.getOrElse(opts.url, () => `http://${connectHost.includes(":") ? `[${connectHost}]` : connectHost}:${config.port}`)
      const adminKey = Option.getOrUndefined(opts.apiKey) ?? (process.env.GATEWAY_API_KEY?.trim() || undefined)
      const client = yield* managementClient(url, adminKey)
      const ping = yield* client.health.ping().pipe(Effect.timeout("3 seconds"), Effect.option)
      if (Option.isNone(ping)) {
        if (opts.json) yield* printJson({ running: false, url })
        else yield* Console.log(`gateway is not running at ${url}`)
        return yield* exitWith(1)
      }
      const details = adminKey
        ? yield* Effect.all({
            providers: client.providers.list().pipe(Effect.map((r) => r.connections)),
            keys: client.keys.list().pipe(Effect.map((r) => r.keys)),
            flags: client.featureFlags.list().pipe(Effect.map((r) => r.summary))
          }).pipe(Effect.option)
        : Option.none()
      if (opts.json) {
        return yield* printJson({
          running: true,
          url,
          version: ping.value.version,
          uptimeSeconds: ping.value.uptimeSeconds,
          ...(Option.isSome(details)
            ? {
                providers: details.value.providers.map((p) => ({ name: p.name, provider: p.provider, enabled: p.enabled, testStatus: p.testStatus })),
                keys: details.value.keys.length,
                featureFlags: details.value.flags
              }
            : {})
        })
      }
      yield* Console.log(`gateway ${ping.value.version} running at ${url}, up ${ping.value.uptimeSeconds}s`)
      if (Option.isSome(details)) {
        const d = details.value
        yield* Console.log(`providers: ${d.providers.length} (${d.providers.filter((p) => p.enabled).length} enabled)${d.providers.length ? ": " + d.providers.map((p) => p.name).join(", ") : ""}`)
        yield* Console.log(`API keys: ${d.keys.length}`)
        yield* Console.log(`feature flags: ${d.flags.active} active, ${d.flags.overriddenByDb} overridden in the database, ${d.flags.overriddenByEnv} by the environment`)
      } else if (adminKey) {
        yield* Console.log("details unavailable: the admin key was refused")
      } else {
        yield* Console.log("(set GATEWAY_API_KEY or pass --api-key with an admin key for details)")
      }
    }).pipe(Effect.provide(FetchHttpClient.layer))
).pipe(Command.withDescription("Is the server running? Version, uptime, and with an admin key its providers and keys."))
