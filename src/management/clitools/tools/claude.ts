import * as path from "node:path"
import { dirFrom, gatewayRoot, jsonText, objectAt, parseJsonObject, stringAt, type ToolEnv, type ToolModule } from "../tool.js"

/**
 * Claude Code (`@anthropic-ai/claude-code`): `$CLAUDE_CONFIG_DIR/settings.json` (default
 * `~/.claude`), JSON. Its `env` block carries the gateway's root URL (no `/v1`) and the key as
 * `ANTHROPIC_AUTH_TOKEN` (sent as `Authorization: Bearer`); `model` is the default model.
 */
const settingsFile = (env: ToolEnv) => path.join(dirFrom(env, "CLAUDE_CONFIG_DIR", path.join(env.home, ".claude")), "settings.json")

const OFFLINE_ENV = {
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_TELEMETRY: "1",
  DISABLE_ERROR_REPORTING: "1"
}

export const claude: ToolModule = {
  id: "claude",
  keyInFiles: true,
  files: (env) => [settingsFile(env)],
  render: (env, current, target) => {
    const file = settingsFile(env)
    const settings = parseJsonObject(file, current.get(file))
    const vars = objectAt(settings, "env")
    vars.ANTHROPIC_BASE_URL = target.baseUrl
    vars.ANTHROPIC_AUTH_TOKEN = target.apiKey
    // A key of another endpoint beside the token makes Claude Code warn about conflicting credentials.
    delete vars.ANTHROPIC_API_KEY
    if (target.offline) Object.assign(vars, OFFLINE_ENV)
    settings.model = target.model
    return [{ path: file, content: jsonText(settings) }]
  },
  read: (env, current) => {
    const file = settingsFile(env)
    const settings = parseJsonObject(file, current.get(file))
    const base = stringAt(settings, "env", "ANTHROPIC_BASE_URL")
    return {
      baseUrl: base ? gatewayRoot(base) : null,
      apiKey: stringAt(settings, "env", "ANTHROPIC_AUTH_TOKEN") ?? stringAt(settings, "env", "ANTHROPIC_API_KEY"),
      apiKeyEnv: null,
      model: stringAt(settings, "model") ?? stringAt(settings, "env", "ANTHROPIC_MODEL")
    }
  },
  userEnv: () => ({}),
  launch: (target, tempDir) => {
    const env = { ANTHROPIC_BASE_URL: target.baseUrl, ANTHROPIC_AUTH_TOKEN: target.apiKey, ANTHROPIC_MODEL: target.model }
    // `--settings` outranks the user's settings.json, whose `env` would otherwise win over ours.
    return {
      env,
      args: ["--settings", path.join(tempDir, "settings.json")],
      tempFiles: { "settings.json": jsonText({ env, model: target.model }) }
    }
  },
  notes: [
    "Claude Code's background calls (titles, summaries) ask for a Haiku model: connect a provider that serves it, or ignore their failures."
  ]
}
