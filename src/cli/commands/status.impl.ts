import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { Parsed } from "../handler.js"
import { colourOn, exitWith, green, printJson, red, table, yellow } from "../output.js"
import { adminKeyOf, explain, managementClient, remote, serverUrl, withHttp } from "../remote.js"
import type { healthOptions, statusOptions } from "./status.js"

export const status = (opts: Parsed<typeof statusOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const adminKey = adminKeyOf(opts.apiKey)
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
              providers: details.value.providers.map((p) => ({
                name: p.name,
                provider: p.provider,
                enabled: p.enabled,
                testStatus: p.testStatus
              })),
              keys: details.value.keys.length,
              featureFlags: details.value.flags
            }
          : {})
      })
    }
    yield* Console.log(`gateway ${ping.value.version} running at ${url}, up ${ping.value.uptimeSeconds}s`)
    if (Option.isSome(details)) {
      const d = details.value
      yield* Console.log(
        `providers: ${d.providers.length} (${d.providers.filter((p) => p.enabled).length} enabled)${d.providers.length ? ": " + d.providers.map((p) => p.name).join(", ") : ""}`
      )
      yield* Console.log(`API keys: ${d.keys.length}`)
      yield* Console.log(
        `feature flags: ${d.flags.active} active, ${d.flags.overriddenByDb} overridden in the database, ${d.flags.overriddenByEnv} by the environment`
      )
    } else if (adminKey) {
      yield* Console.log("details unavailable: the admin key was refused")
    } else {
      yield* Console.log("(set GATEWAY_API_KEY or pass --api-key with an admin key for details)")
    }
  }).pipe(withHttp)

export const health = (opts: Parsed<typeof healthOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const ping = yield* client.health.ping().pipe(Effect.timeout("3 seconds"), Effect.option)
    if (Option.isNone(ping)) {
      if (opts.json) yield* printJson({ up: false, url })
      else yield* Console.log(`down: no gateway answers at ${url}`)
      return yield* exitWith(1)
    }
    const health = yield* client.usage.health().pipe(Effect.mapError(explain(url)))
    if (opts.json) yield* printJson({ up: true, url, version: ping.value.version, uptimeSeconds: ping.value.uptimeSeconds, ...health })
    else {
      const on = colourOn(process.stdout)
      const paint = health.status === "down" ? red : health.status === "ok" ? green : yellow
      yield* Console.log(`${paint(health.status, on)}: gateway ${ping.value.version} at ${url}, up ${ping.value.uptimeSeconds}s`)
      yield* Console.log(
        `providers: ${health.configuredCount} configured, ${health.activeCount} active, ${health.monitoredCount} monitored (catalog ${health.catalogCount})`
      )
      if (health.providers.length)
        yield* Console.log(
          table(
            ["CONNECTION", "PROVIDER", "ENABLED", "STATE"],
            health.providers.map((p) => [p.connection, p.provider, String(p.enabled), p.state])
          )
        )
    }
    if (health.status === "down") return yield* exitWith(1)
  }).pipe(withHttp)
