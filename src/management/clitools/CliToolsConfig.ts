import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as os from "node:os"
import type { DetectOptions } from "./detect.js"
import type { ToolEnv } from "./tool.js"

/**
 * Where the server looks for coding tools and their files: its own HOME and PATH unless `GATEWAY_CLI_TOOLS_*` override them
 * (tests point them at temporary directories); the variables are in docs/coding-tools.md#the-api.
 */
export interface CliToolsConfigShape {
  readonly env: ToolEnv
  readonly detect: DetectOptions
}

const DIR_VARS = ["CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "QWEN_HOME", "XDG_CONFIG_HOME"] as const

export const DEFAULT_DETECT_TIMEOUT_MS = 5000

export class CliToolsConfig extends Context.Tag("gateway/CliToolsConfig")<CliToolsConfig, CliToolsConfigShape>() {
  static readonly layer = Layer.effect(
    CliToolsConfig,
    Effect.gen(function* () {
      const homeOverride = yield* Config.option(Config.nonEmptyString("GATEWAY_CLI_TOOLS_HOME"))
      const processHome = yield* Config.option(Config.nonEmptyString("HOME"))
      const home = Option.getOrElse(homeOverride, () => Option.getOrElse(processHome, () => os.homedir()))
      const vars: Record<string, string | undefined> = {}
      if (Option.isNone(homeOverride)) {
        for (const name of DIR_VARS) vars[name] = Option.getOrUndefined(yield* Config.option(Config.nonEmptyString(name)))
      }
      const pathVar = Option.getOrElse(
        yield* Config.option(Config.nonEmptyString("GATEWAY_CLI_TOOLS_PATH")),
        () => process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin"
      )
      const timeoutMs = yield* Config.integer("GATEWAY_CLI_TOOLS_DETECT_TIMEOUT_MS").pipe(
        Config.validate({
          message: "GATEWAY_CLI_TOOLS_DETECT_TIMEOUT_MS must be between 1 and 60000",
          validation: (n) => n >= 1 && n <= 60_000
        }),
        Config.withDefault(DEFAULT_DETECT_TIMEOUT_MS)
      )
      return { env: { home, vars }, detect: { path: pathVar, home, timeoutMs } }
    }).pipe(Effect.orDie)
  )
}
