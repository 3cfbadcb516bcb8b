import * as path from "node:path"
import { dirFrom, gatewayRoot, jsonText, objectAt, parseJsonObject, stringAt, type ToolEnv, type ToolModule } from "../tool.js"

/**
 * Qwen Code (`@qwen-code/qwen-code`): `$QWEN_HOME/settings.json` (default `~/.qwen`), JSON.
 * `security.auth` selects OpenAI-compatible authentication with the gateway's `/v1` base URL
 * and key (chat completions); `model.name` is the default model.
 */
const settingsFile = (env: ToolEnv) => path.join(dirFrom(env, "QWEN_HOME", path.join(env.home, ".qwen")), "settings.json")

export const qwen: ToolModule = {
  id: "qwen",
  keyInFiles: true,
  files: (env) => [settingsFile(env)],
  render: (env, current, target) => {
    const file = settingsFile(env)
    const settings = parseJsonObject(file, current.get(file))
    Object.assign(objectAt(settings, "security", "auth"), {
      selectedType: "openai",
      apiKey: target.apiKey,
      baseUrl: `${target.baseUrl}/v1`
    })
    objectAt(settings, "model").name = target.model
    if (target.offline) {
      objectAt(settings, "general").enableAutoUpdate = false
      objectAt(settings, "privacy").usageStatisticsEnabled = false
      objectAt(settings, "telemetry").enabled = false
      // Managed memory sends a second background request after every answer.
      Object.assign(objectAt(settings, "memory"), { enableManagedAutoMemory: false, enableManagedAutoDream: false })
    }
    return [{ path: file, content: jsonText(settings) }]
  },
  read: (env, current) => {
    const settings = parseJsonObject(settingsFile(env), current.get(settingsFile(env)))
    const base = stringAt(settings, "security", "auth", "baseUrl") ?? stringAt(settings, "env", "OPENAI_BASE_URL")
    return {
      baseUrl: base ? gatewayRoot(base) : null,
      apiKey: stringAt(settings, "security", "auth", "apiKey") ?? stringAt(settings, "env", "OPENAI_API_KEY"),
      apiKeyEnv: null,
      model: stringAt(settings, "model", "name")
    }
  },
  userEnv: () => ({}),
  launch: (target) => ({
    env: { OPENAI_BASE_URL: `${target.baseUrl}/v1`, OPENAI_API_KEY: target.apiKey, OPENAI_MODEL: target.model },
    // The base URL as an argument outranks settings.json; the key stays out of the process list.
    args: ["--auth-type", "openai", "--openai-base-url", `${target.baseUrl}/v1`, "--model", target.model]
  }),
  notes: ["`--yolo` offers the shell tool in headless runs."]
}
