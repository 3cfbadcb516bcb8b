import * as Prompt from "@effect/cli/Prompt"
import * as Terminal from "@effect/platform/Terminal"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { AdminAuth } from "../../services/auth/AdminAuth.js"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { CreateConnection } from "../../domain/connections.js"
import { BadRequest, type NotFound } from "../../domain/errors.js"
import { API_KEY_MIN_LENGTH } from "../../domain/keys.js"
import { decodeOrBadRequest } from "../../domain/parse.js"
import { findProvider, PROVIDERS } from "../../domain/catalog/catalog.js"
import { Connections, connectionView } from "../../upstream/providers/Connections.js"
import { ProviderChecks } from "../../upstream/providers/ProviderChecks.js"
import { withLocalGateway } from "../local.js"
import { exitWith, printJson } from "../output.js"
import type { Parsed } from "../handler.js"
import { gateway } from "../root.js"
import { UsageError } from "../schema.js"
import type { setupOptions } from "./setup.js"

interface ProviderInput {
  readonly provider: string
  readonly name?: string | undefined
  readonly baseUrl?: string | undefined
  readonly apiKey?: string | undefined
  readonly defaultModel?: string | undefined
}

const decodeConnection = (raw: ProviderInput) =>
  decodeOrBadRequest(CreateConnection)(Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined)))

/** Creates the connection, or updates the one with the same name, so re-running setup is safe. */
const upsertConnection = (raw: ProviderInput) =>
  Effect.gen(function* () {
    const input = yield* decodeConnection(raw)
    const connections = yield* Connections
    const name = input.name ?? input.provider.toLowerCase()
    const existing = yield* connections.get(name).pipe(Effect.option)
    if (Option.isSome(existing)) {
      const { provider, ...patch } = input
      const updated = yield* connections
        .update(existing.value.id, { provider, ...patch }, "cli-setup")
        .pipe(Effect.catchTag("NotFound", (e: NotFound) => Effect.die(e)))
      return { connection: updated, created: false }
    }
    return { connection: yield* connections.create(input, "cli-setup"), created: true }
  })

/** `GATEWAY_API_KEY`, when set, becomes an admin-scope key with exactly that value. */
const adoptAdminKey = Effect.gen(function* () {
  const secret = yield* Config.redacted("GATEWAY_API_KEY").pipe(Config.option, Effect.orDie)
  if (Option.isNone(secret) || Redacted.value(secret.value).trim() === "") return Option.none()
  const value = Redacted.value(secret.value).trim()
  if (value.length < API_KEY_MIN_LENGTH) {
    yield* Console.error(`warning: GATEWAY_API_KEY is shorter than ${API_KEY_MIN_LENGTH} characters; use a long random value`)
  }
  const created = yield* (yield* ApiKeys).create({ name: "admin", scopes: ["admin"] }, { secret: value, actor: "cli-setup" })
  return Option.some(created)
})

const nonInteractive = (opts: Parsed<typeof setupOptions>) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const steps: Array<string> = []
    const summary: Record<string, unknown> = { dataDir: config.dataDir }
    if (Option.isSome(opts.password)) {
      yield* (yield* AdminAuth).setPassword(opts.password.value, "cli-setup")
      steps.push("admin password set")
      summary["passwordSet"] = true
    }
    const admin = yield* adoptAdminKey
    if (Option.isSome(admin)) {
      steps.push(`admin API key from GATEWAY_API_KEY ready (${admin.value.id}, ${admin.value.key})`)
      summary["adminKey"] = { id: admin.value.id, key: admin.value.key, scopes: admin.value.scopes }
    }
    if (opts.addProvider) {
      if (Option.isNone(opts.provider)) {
        return yield* new UsageError({ message: "--provider: --add-provider needs --provider (see `gateway providers available`)" })
      }
      const { connection, created } = yield* upsertConnection({
        provider: opts.provider.value,
        name: Option.getOrUndefined(opts.providerName),
        baseUrl: Option.getOrUndefined(opts.providerBaseUrl),
        apiKey: Option.getOrUndefined(opts.apiKey),
        defaultModel: Option.getOrUndefined(opts.defaultModel)
      })
      steps.push(
        `provider connection ${created ? "added" : "updated"}: ${connection.name} (${connection.provider.id}); use models as ${connection.name}/<model>`
      )
      summary["provider"] = connectionView(connection)
      if (opts.testProvider) {
        const result = yield* (yield* ProviderChecks).test(connection.id)
        summary["providerTest"] = result
        steps.push(
          result.ok ? `provider test passed (${result.latencyMs}ms, ${result.modelCount} models)` : `provider test FAILED: ${result.error}`
        )
        if (!result.ok) yield* exitWith(1)
      }
    }
    if (steps.length === 0) {
      steps.push("nothing to do: pass --password, --add-provider ... or set GATEWAY_API_KEY")
    }
    if (opts.json) return yield* printJson({ ...summary, steps })
    for (const s of steps) yield* Console.log(`- ${s}`)
  })

const interactive = Effect.gen(function* () {
  const admin = yield* AdminAuth
  yield* Console.log("Gateway setup. Press Ctrl+C to stop at any time; nothing is half-written.\n")
  const hasPassword = yield* admin.hasPassword
  if (!hasPassword || (yield* Prompt.confirm({ message: "Change the admin password?", initial: false }))) {
    const pw = yield* Prompt.password({
      message: "Admin password (for the management API)",
      validate: (v) => (v.length >= 8 ? Effect.succeed(v) : Effect.fail("at least 8 characters"))
    })
    const again = yield* Prompt.password({ message: "Repeat the password" })
    if (Redacted.value(pw) !== Redacted.value(again)) return yield* new BadRequest({ message: "the passwords differ" })
    yield* admin.setPassword(Redacted.value(pw), "cli-setup")
    yield* Console.log("admin password set")
  }
  if (yield* Prompt.confirm({ message: "Create an API key for your clients now?", initial: true })) {
    const adminScope = yield* Prompt.confirm({ message: "Give it the admin scope (management API too)?", initial: false })
    const created = yield* (yield* ApiKeys).create(
      { name: "setup", scopes: adminScope ? ["admin"] : ["inference"] },
      { actor: "cli-setup" }
    )
    yield* Console.log(`\n  ${created.secret}\n\nThis key is shown only now; store it safely.`)
  }
  while (yield* Prompt.confirm({ message: "Add a provider connection?", initial: true })) {
    const provider = yield* Prompt.select({
      message: "Provider",
      choices: PROVIDERS.map((p) => ({ title: `${p.name} (${p.id})`, value: p.id, description: p.baseUrl ?? "custom base URL" }))
    })
    const spec = findProvider(provider)!
    const name = yield* Prompt.text({ message: "Connection name (model prefix)", default: provider })
    const baseUrl = yield* Prompt.text({
      message: spec.requiresBaseUrl ? "Base URL (include /v1)" : "Base URL",
      default: spec.baseUrl ?? ""
    })
    const apiKey = yield* Prompt.password({ message: spec.requiresApiKey ? "API key" : "API key (leave empty if none)" })
    const defaultModel = yield* Prompt.text({ message: "Default model", default: spec.models[0]?.id ?? "" })
    const saved = yield* upsertConnection({
      provider,
      name,
      baseUrl: baseUrl && baseUrl !== spec.baseUrl ? baseUrl : undefined,
      apiKey: Redacted.value(apiKey) || undefined,
      defaultModel: defaultModel || undefined
    }).pipe(
      Effect.map(Option.some),
      Effect.catchTags({
        BadRequest: (e) => Console.error(`not saved: ${e.message}`).pipe(Effect.as(Option.none())),
        Conflict: (e) => Console.error(`not saved: ${e.message}`).pipe(Effect.as(Option.none()))
      })
    )
    if (Option.isNone(saved)) continue
    yield* Console.log(`saved ${saved.value.connection.name}; use models as ${saved.value.connection.name}/<model>`)
    if (yield* Prompt.confirm({ message: "Test it now?", initial: true })) {
      const r = yield* (yield* ProviderChecks).test(saved.value.connection.id)
      yield* Console.log(r.ok ? `ok: ${r.modelCount} models, ${r.latencyMs}ms` : `test failed: ${r.error}`)
    }
  }
  yield* Console.log("\nDone. Start the gateway with `gateway` (or `npm start`).")
})

export const setup = (opts: Parsed<typeof setupOptions>) =>
  Effect.gen(function* () {
    const root = yield* gateway
    const flagsGiven = Option.isSome(opts.password) || opts.addProvider
    if (root.nonInteractive || opts.nonInteractive || flagsGiven) return yield* withLocalGateway(nonInteractive(opts))
    if (!(yield* (yield* Terminal.Terminal).isTTY)) {
      return yield* new UsageError({
        message: "--non-interactive: setup is interactive; without a terminal use `gateway setup --non-interactive ...` (see --help)"
      })
    }
    return yield* withLocalGateway(interactive)
  })
