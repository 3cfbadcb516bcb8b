import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { ApiKeys } from "../../services/auth/ApiKeys.js"
import type { CliToolEntry, SavedToolSettings, SaveToolSettings, ToolSettingsView, ToolStatus } from "../../domain/clitools.js"
import { BadRequest, NotFound } from "../../domain/errors.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { catalogEntries, entryKind } from "../../upstream/providers/catalogEntries.js"
import { maskSecret } from "../../kernel/redact.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { Router } from "../../services/routing/Router.js"
import { CLI_TOOLS, findTool, toolEnabled, toolUnavailable } from "./catalog.js"
import { CliToolsConfig } from "./CliToolsConfig.js"
import { detect, findOnPath, mtimeOf, sanitise } from "./detect.js"
import { applyChanges, mtimesOf, planSetup, readToolState, type ToolState } from "./plan.js"
import { type Observed, toolStatus } from "./status.js"
import { ConfigParseError, type ToolModule } from "./tool.js"
import { TOOL_MODULES } from "./tools/index.js"

/** Who is asking: the Host the caller used, to tell "points at this gateway" from "elsewhere". */
export interface Caller {
  readonly host: string | undefined
}

export interface CliToolsShape {
  /** Tool id → status, for every listed tool (detections in parallel, each within the timeout). */
  readonly statuses: (caller: Caller) => Effect.Effect<Record<string, ToolStatus>>
  readonly runtime: (id: string, caller: Caller) => Effect.Effect<CliToolEntry & { readonly status: ToolStatus }, NotFound>
  readonly settings: (id: string) => Effect.Effect<ToolSettingsView, NotFound | BadRequest>
  /** Writes the tool's files with the same modules as `gateway setup-<tool>`. */
  readonly save: (
    id: string,
    input: SaveToolSettings,
    caller: Caller
  ) => Effect.Effect<typeof SavedToolSettings.Type, NotFound | BadRequest>
}

interface Cached {
  readonly key: string
  readonly detection: ToolStatus["detection"]
  readonly observed: Observed | undefined
}

/** A file system failure as one line without a stack (paths stay: they are the caller's own). */
const fsMessage = (e: unknown): string =>
  e instanceof ConfigParseError
    ? e.message
    : `${(e as NodeJS.ErrnoException).code ?? "error"}: ${sanitise((e as Error).message ?? String(e))}`

export class CliTools extends Context.Tag("gateway/CliTools")<CliTools, CliToolsShape>() {
  static readonly layer = Layer.effect(
    CliTools,
    Effect.gen(function* () {
      const config = yield* CliToolsConfig
      const flags = yield* FeatureFlags
      const connections = yield* Connections
      const keys = yield* ApiKeys
      const router = yield* Router
      const { env } = config
      const cache = new Map<string, Cached>()

      const compatAll = flags.enabled("CLI_COMPAT_ALL")

      const lookup = (id: string) =>
        Effect.gen(function* () {
          const tool = findTool(id)
          if (!tool)
            return yield* new NotFound({ message: `unknown coding tool '${id}' (known: ${CLI_TOOLS.map((t) => t.id).join(", ")})` })
          const unavailable = toolUnavailable(tool, yield* compatAll)
          if (unavailable) return yield* new NotFound({ message: unavailable })
          return tool
        })

      const withModule = (id: string) =>
        Effect.flatMap(lookup(id), (tool) => {
          const module = TOOL_MODULES[tool.id]
          return module
            ? Effect.succeed({ tool, module })
            : Effect.fail(
                new NotFound({
                  message: `${tool.name} (${tool.id}) keeps no settings file the gateway writes (configType ${tool.configType}); see ${tool.docsUrl}`
                })
              )
        })

      const observe = (module: ToolModule | undefined) =>
        module === undefined
          ? Effect.succeed(undefined)
          : Effect.promise(() =>
              readToolState(module, env).then(
                (state): Observed => ({ state }),
                (e: unknown): Observed => ({ error: fsMessage(e) })
              )
            )

      /** Detection and file state, re-read only when the executable or a file changed (mtime). */
      const observed = (tool: CliToolEntry) =>
        Effect.gen(function* () {
          const module = TOOL_MODULES[tool.id]
          const bin = findOnPath(tool.command, config.detect.path)
          const mtimes = module ? yield* Effect.promise(() => mtimesOf(module.files(env))) : []
          const key = JSON.stringify([bin ?? null, bin ? mtimeOf(bin) : 0, mtimes])
          const hit = cache.get(tool.id)
          if (hit && hit.key === key) return hit
          const [detection, state] = yield* Effect.all([detect(tool.command, config.detect), observe(module)], { concurrency: 2 })
          const entry = { key, detection, observed: state }
          cache.set(tool.id, entry)
          return entry
        })

      const statusOf = (tool: CliToolEntry, caller: Caller) =>
        Effect.map(observed(tool), (o) => toolStatus(TOOL_MODULES[tool.id] !== undefined, o.detection, o.observed, caller.host))

      const view = (tool: CliToolEntry, module: ToolModule, state: ToolState): ToolSettingsView => {
        const newest = Math.max(...state.mtimes.map(([, t]) => t))
        return {
          tool: tool.id,
          files: module.files(env),
          exists: state.exists,
          baseUrl: state.settings.baseUrl,
          apiKey: state.settings.apiKey === null ? null : maskSecret(state.settings.apiKey),
          apiKeyEnv: state.settings.apiKeyEnv,
          model: state.settings.model,
          lastConfiguredAt: Number.isFinite(newest) ? new Date(newest).toISOString() : null
        }
      }

      const readState = (module: ToolModule) =>
        Effect.tryPromise({ try: () => readToolState(module, env), catch: (e) => new BadRequest({ message: fsMessage(e) }) })

      /** The gateway's chat models, as `GET /v1/models` lists them (connections' models, then auto ids and combos). */
      const chatModels = Effect.gen(function* () {
        const entries = catalogEntries(yield* connections.list).filter((e) => !e.alias && entryKind(e) === "chat")
        const virtual = (yield* router.virtualModels).filter((v) => v.serves === "chat")
        return [...entries.map((e) => e.id), ...virtual.map((v) => v.id)]
      })

      const keyFor = (input: SaveToolSettings, current: ToolState) =>
        Effect.gen(function* () {
          if (input.apiKey) return input.apiKey
          if (input.keyId !== undefined) {
            const key = yield* keys.byId(input.keyId)
            return yield* new BadRequest({
              message: key
                ? `the gateway keeps only a hash of key '${key.name}' (${key.id}), so it cannot write its secret into a tool's configuration: send apiKey (shown once when the key was made)`
                : `no gateway key with id '${input.keyId}'; send apiKey`
            })
          }
          if (current.settings.apiKey) return current.settings.apiKey
          return yield* new BadRequest({ message: "apiKey is required: the tool has no gateway key yet" })
        })

      return {
        statuses: (caller) =>
          Effect.gen(function* () {
            const compat = yield* compatAll
            const tools = CLI_TOOLS.filter((t) => toolEnabled(t, compat))
            const statuses = yield* Effect.forEach(tools, (t) => statusOf(t, caller), { concurrency: "unbounded" })
            return Object.fromEntries(tools.map((t, i) => [t.id, statuses[i]!]))
          }).pipe(Effect.withSpan("CliTools.statuses")),
        runtime: (id, caller) =>
          Effect.flatMap(lookup(id), (tool) => Effect.map(statusOf(tool, caller), (status) => ({ ...tool, status }))),
        settings: (id) =>
          Effect.gen(function* () {
            const { tool, module } = yield* withModule(id)
            return view(tool, module, yield* readState(module))
          }),
        save: (id, input, caller) =>
          Effect.gen(function* () {
            const { tool, module } = yield* withModule(id)
            const current = yield* readState(module)
            const models = yield* chatModels
            const model = input.model ?? current.settings.model ?? models[0]
            if (!model) return yield* new BadRequest({ message: "model is required: the gateway serves no chat model yet" })
            const apiKey = !module.keyInFiles && !input.apiKey && input.keyId === undefined ? "" : yield* keyFor(input, current)
            const baseUrl = (input.baseUrl ?? (caller.host ? `http://${caller.host}` : "")).replace(/\/+$/, "").replace(/\/v1$/, "")
            if (!baseUrl) return yield* new BadRequest({ message: "baseUrl is required (the request carried no Host header)" })
            const target = { baseUrl, apiKey, model, models, offline: input.offline ?? false }
            const written = yield* Effect.tryPromise({
              try: () => planSetup(module, env, target).then((changes) => applyChanges(changes)),
              catch: (e) => new BadRequest({ message: fsMessage(e) })
            })
            cache.delete(tool.id)
            const userEnv = Object.fromEntries(
              Object.entries(module.userEnv(target)).map(([k, v]) => [k, v === apiKey ? (v ? maskSecret(v) : "<your gateway key>") : v])
            )
            return { tool: tool.id, written, env: userEnv, settings: view(tool, module, yield* readState(module)) }
          }).pipe(Effect.withSpan("CliTools.save", { attributes: { tool: id } }))
      }
    })
  )
}
