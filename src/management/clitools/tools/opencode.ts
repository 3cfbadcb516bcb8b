import * as path from "node:path"
import {
  gatewayRoot,
  isObject,
  jsonText,
  objectAt,
  parseJsonObject,
  stringAt,
  type Target,
  type ToolEnv,
  type ToolModule,
  xdgConfig
} from "../tool.js"

/**
 * opencode (`opencode-ai`) and its fork Kilo (`@kilocode/cli`): `$XDG_CONFIG_HOME/<dir>/<file>`
 * (default `~/.config`), JSON. Setup adds a provider `gateway` built on
 * `@ai-sdk/openai-compatible` (chat completions at `<gateway>/v1`) listing the gateway's chat
 * models, and makes `gateway/<model>` the default and the small (title) model. Launch passes the
 * same provider as inline configuration (`<PREFIX>_CONFIG_CONTENT`).
 */
const PROVIDER = "gateway"

interface Variant {
  readonly id: string
  readonly dir: string
  readonly file: string
  readonly schema: string
  /** Environment prefix: OPENCODE, KILO. */
  readonly prefix: string
  /** Offline extras written into the configuration. */
  readonly offline: Readonly<Record<string, unknown>>
  /** Offline extras only the environment controls. */
  readonly offlineEnv: Readonly<Record<string, string>>
  /** Offline: files created beside the configuration when absent (name → content). */
  readonly offlineFiles: Readonly<Record<string, string>>
  readonly notes: ReadonlyArray<string>
}

const providerEntry = (target: Target) => ({
  npm: "@ai-sdk/openai-compatible",
  name: "Gateway",
  options: { baseURL: `${target.baseUrl}/v1`, apiKey: target.apiKey },
  models: Object.fromEntries([...new Set([target.model, ...target.models])].map((id) => [id, { name: id }]))
})

const make = (v: Variant): ToolModule => {
  const dir = (env: ToolEnv) => path.join(xdgConfig(env), v.dir)
  const configFile = (env: ToolEnv) => path.join(dir(env), v.file)
  return {
    id: v.id,
    keyInFiles: true,
    files: (env) => [configFile(env), ...Object.keys(v.offlineFiles).map((f) => path.join(dir(env), f))],
    render: (env, current, target) => {
      const file = configFile(env)
      const config = parseJsonObject(file, current.get(file))
      if (config.$schema === undefined) config.$schema = v.schema
      objectAt(config, "provider")[PROVIDER] = providerEntry(target)
      config.model = `${PROVIDER}/${target.model}`
      config.small_model = `${PROVIDER}/${target.model}`
      const extra: Array<{ path: string; content: string }> = []
      if (target.offline) {
        for (const [k, value] of Object.entries(v.offline)) {
          config[k] = Array.isArray(value) && Array.isArray(config[k]) ? [...new Set([...(config[k] as Array<unknown>), ...value])] : value
        }
        for (const [name, content] of Object.entries(v.offlineFiles)) {
          const p = path.join(dir(env), name)
          if (current.get(p) === undefined) extra.push({ path: p, content })
        }
      }
      return [{ path: file, content: jsonText(config) }, ...extra]
    },
    read: (env, current) => {
      const config = parseJsonObject(configFile(env), current.get(configFile(env)))
      const model = stringAt(config, "model")
      const providerId = model?.includes("/") ? model.slice(0, model.indexOf("/")) : PROVIDER
      const provider = isObject(config.provider) ? config.provider[providerId] : undefined
      const base = stringAt(provider, "options", "baseURL")
      return {
        baseUrl: base ? gatewayRoot(base) : null,
        apiKey: stringAt(provider, "options", "apiKey"),
        apiKeyEnv: null,
        model: model && providerId === PROVIDER ? model.slice(PROVIDER.length + 1) : model
      }
    },
    userEnv: (target) => (target.offline ? v.offlineEnv : {}),
    launch: (target) => ({
      env: {
        [`${v.prefix}_CONFIG_CONTENT`]: JSON.stringify({
          provider: { [PROVIDER]: providerEntry(target) },
          model: `${PROVIDER}/${target.model}`,
          small_model: `${PROVIDER}/${target.model}`
        })
      },
      args: []
    }),
    notes: v.notes
  }
}

export const opencode = make({
  id: "opencode",
  dir: "opencode",
  file: "opencode.json",
  schema: "https://opencode.ai/config.json",
  prefix: "OPENCODE",
  offline: { autoupdate: false, share: "disabled" },
  offlineEnv: { OPENCODE_DISABLE_MODELS_FETCH: "1", OPENCODE_DISABLE_AUTOUPDATE: "1" },
  // opencode installs its plugin package from the npm registry into its config directory at start unless a lock names it.
  offlineFiles: {
    "package-lock.json": jsonText({ packages: { "": { dependencies: { "@opencode-ai/plugin": "*" } } } }),
    "node_modules/.keep": ""
  },
  notes: ["Each prompt also makes a title request with `small_model` (set to the same gateway model)."]
})

export const kilo = make({
  id: "kilo",
  dir: "kilo",
  file: "kilo.json",
  schema: "https://app.kilo.ai/config.json",
  prefix: "KILO",
  // Kilo's own gateway provider fetches its model list at start unless disabled.
  offline: { autoupdate: false, share: "disabled", disabled_providers: ["kilo", "apertis"] },
  offlineEnv: { KILO_DISABLE_MODELS_FETCH: "1", KILO_TELEMETRY_LEVEL: "off", KILO_DISABLE_AUTOUPDATE: "1" },
  offlineFiles: {},
  notes: ["Kilo takes several seconds to start, even offline."]
})
