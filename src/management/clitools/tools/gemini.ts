import * as path from "node:path"
import {
  dirFrom,
  gatewayRoot,
  jsonText,
  mergeDotenv,
  objectAt,
  parseDotenv,
  parseJsonObject,
  stringAt,
  type ToolEnv,
  type ToolModule
} from "../tool.js"

/**
 * Gemini CLI (`@google/gemini-cli`): `~/.gemini/settings.json` (JSON; `$GEMINI_CLI_HOME`
 * replaces the home directory) selects API-key authentication and the default model;
 * `~/.gemini/.env` holds `GEMINI_API_KEY` and `GOOGLE_GEMINI_BASE_URL`. Gemini CLI reads the
 * base URL only from the environment, and reads `~/.gemini/.env` only in folders it trusts, so
 * setup also asks for both variables in the shell (most folders are not trusted yet).
 */
const geminiDir = (env: ToolEnv) => path.join(dirFrom(env, "GEMINI_CLI_HOME", env.home), ".gemini")
const settingsFile = (env: ToolEnv) => path.join(geminiDir(env), "settings.json")
const envFile = (env: ToolEnv) => path.join(geminiDir(env), ".env")

/** The only authentication type that takes a key and a custom base URL in headless mode. */
const AUTH = { selectedType: "gemini-api-key" }

export const gemini: ToolModule = {
  id: "gemini",
  keyInFiles: true,
  files: (env) => [settingsFile(env), envFile(env)],
  render: (env, current, target) => {
    const file = settingsFile(env)
    const settings = parseJsonObject(file, current.get(file))
    Object.assign(objectAt(settings, "security", "auth"), AUTH)
    objectAt(settings, "model").name = target.model
    if (target.offline) {
      Object.assign(objectAt(settings, "general"), { enableAutoUpdate: false, enableAutoUpdateNotification: false })
      objectAt(settings, "privacy").usageStatisticsEnabled = false
      objectAt(settings, "telemetry").enabled = false
    }
    const dotenv = mergeDotenv(current.get(envFile(env)), { GEMINI_API_KEY: target.apiKey, GOOGLE_GEMINI_BASE_URL: target.baseUrl })
    return [
      { path: file, content: jsonText(settings) },
      { path: envFile(env), content: dotenv }
    ]
  },
  read: (env, current) => {
    const settings = parseJsonObject(settingsFile(env), current.get(settingsFile(env)))
    const dotenv = parseDotenv(current.get(envFile(env)))
    const base = dotenv.get("GOOGLE_GEMINI_BASE_URL")
    return {
      baseUrl: base ? gatewayRoot(base) : null,
      apiKey: dotenv.get("GEMINI_API_KEY") || null,
      apiKeyEnv: null,
      model: stringAt(settings, "model", "name")
    }
  },
  userEnv: (target) => ({ GEMINI_API_KEY: target.apiKey, GOOGLE_GEMINI_BASE_URL: target.baseUrl }),
  launch: (target, tempDir) => ({
    env: {
      GEMINI_API_KEY: target.apiKey,
      GOOGLE_GEMINI_BASE_URL: target.baseUrl,
      GEMINI_MODEL: target.model,
      // System settings outrank the user's: API-key authentication for this run, from a temporary file.
      GEMINI_CLI_SYSTEM_SETTINGS_PATH: path.join(tempDir, "settings.json")
    },
    args: [],
    tempFiles: { "settings.json": jsonText({ security: { auth: AUTH } }) }
  }),
  notes: [
    "Gemini CLI reads ~/.gemini/.env only in folders it trusts: export GEMINI_API_KEY and GOOGLE_GEMINI_BASE_URL in your shell profile as well.",
    "Headless runs (-p) need a trusted folder: trust it once interactively, or set GEMINI_CLI_TRUST_WORKSPACE=true.",
    "The model id goes into the URL path (/v1beta/models/<provider>/<model>:generateContent); the gateway reads it there."
  ]
}
