import * as path from "node:path"
import * as TOML from "smol-toml"
import { ConfigParseError, dirFrom, gatewayRoot, isObject, stringAt, type ToolEnv, type ToolModule } from "../tool.js"

/**
 * Codex (`@openai/codex`): `$CODEX_HOME/config.toml` (default `~/.codex`), TOML. Setup selects a
 * `gateway` model provider (Responses API) whose key Codex reads from an environment variable
 * (`env_key`), so the key never sits in the file. TOML is re-serialised: comments of the file
 * are not kept (the backup has them).
 */
const PROVIDER = "gateway"
export const CODEX_KEY_ENV = "GATEWAY_CODEX_API_KEY"

const configFile = (env: ToolEnv) => path.join(dirFrom(env, "CODEX_HOME", path.join(env.home, ".codex")), "config.toml")

const parse = (file: string, text: string | undefined): Record<string, unknown> => {
  if (text === undefined || text.trim() === "") return {}
  try {
    return TOML.parse(text) as Record<string, unknown>
  } catch (e) {
    throw new ConfigParseError(file, `not valid TOML (${(e as Error).message})`)
  }
}

const table = (obj: Record<string, unknown>, key: string): Record<string, unknown> => {
  if (!isObject(obj[key])) obj[key] = {}
  return obj[key] as Record<string, unknown>
}

const providerTable = (baseUrl: string) => ({ name: "gateway", base_url: `${baseUrl}/v1`, env_key: CODEX_KEY_ENV, wire_api: "responses" })

export const codex: ToolModule = {
  id: "codex",
  keyInFiles: false,
  files: (env) => [configFile(env)],
  render: (env, current, target) => {
    const file = configFile(env)
    const config = parse(file, current.get(file))
    config.model = target.model
    config.model_provider = PROVIDER
    const providers = table(config, "model_providers")
    providers[PROVIDER] = { ...(isObject(providers[PROVIDER]) ? providers[PROVIDER] : {}), ...providerTable(target.baseUrl) }
    if (target.offline) {
      config.check_for_update_on_startup = false
      table(config, "analytics").enabled = false
      // Otherwise Codex syncs its plugins from github.com at start.
      table(config, "features").plugins = false
    }
    return [{ path: file, content: `${TOML.stringify(config).trimEnd()}\n` }]
  },
  read: (env, current) => {
    const file = configFile(env)
    const config = parse(file, current.get(file))
    const provider = stringAt(config, "model_provider")
    const base = provider ? stringAt(config, "model_providers", provider, "base_url") : stringAt(config, "openai_base_url")
    return {
      baseUrl: base ? gatewayRoot(base) : null,
      apiKey: provider ? stringAt(config, "model_providers", provider, "experimental_bearer_token") : null,
      apiKeyEnv: provider ? stringAt(config, "model_providers", provider, "env_key") : null,
      model: stringAt(config, "model")
    }
  },
  userEnv: (target) => ({ [CODEX_KEY_ENV]: target.apiKey }),
  launch: (target) => {
    const p = `model_providers.${PROVIDER}`
    const q = (s: string) => JSON.stringify(s)
    const provider = providerTable(target.baseUrl)
    return {
      env: { [CODEX_KEY_ENV]: target.apiKey },
      args: [
        "-c",
        `model=${q(target.model)}`,
        "-c",
        `model_provider=${q(PROVIDER)}`,
        "-c",
        `${p}.name=${q(provider.name)}`,
        "-c",
        `${p}.base_url=${q(provider.base_url)}`,
        "-c",
        `${p}.env_key=${q(provider.env_key)}`,
        "-c",
        `${p}.wire_api=${q(provider.wire_api)}`
      ]
    }
  },
  notes: [
    `Codex reads the gateway key from ${CODEX_KEY_ENV}: export it in your shell profile (or start Codex with \`gateway launch-codex\`).`,
    "Codex speaks only the Responses API; the gateway translates for models of other families."
  ]
}
