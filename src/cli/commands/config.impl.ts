import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { logFileOf } from "../../services/observability/LogFile.js"
import { redactText } from "../../kernel/redact.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { envFilePath, isSecretName, maskValue } from "../../platform/system/envFile.js"
import { restartMode } from "../../platform/system/Lifecycle.js"
import type { Parsed } from "../handler.js"
import { withLocalGateway } from "../local.js"
import { printJson, table } from "../output.js"
import type { configShowOptions } from "./env.js"

const maskEnv = (env: Record<string, string | undefined>, names: ReadonlyArray<string>) =>
  Object.fromEntries(names.filter((n) => env[n] !== undefined).map((n) => [n, isSecretName(n) ? maskValue(env[n]!) : redactText(env[n]!)]))

/** The process environment variables the gateway reads (by prefix or name). */
const GATEWAY_ENV =
  /^(GATEWAY_|PORT$|HOST$|DATA_DIR$|LOG_|STORAGE_ENCRYPTION_KEY$|INITIAL_PASSWORD$|REQUIRE_API_KEY$|[A-Z0-9_]+_(API_KEY|BASE_URL)$|[A-Z0-9_]+_ENABLED$)/

export const configShow = (opts: Parsed<typeof configShowOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const config = yield* AppConfig
      const secrets = yield* Secrets
      const flags = yield* (yield* FeatureFlags).list
      const envFile = envFilePath()
      const report = {
        config: { ...config },
        envFile: { path: envFile, exists: fs.existsSync(envFile) },
        logFile: process.env.GATEWAY_LOG_FILE?.trim() || logFileOf(config.dataDir),
        restart: restartMode(),
        storageKey: secrets.source === "env" ? "STORAGE_ENCRYPTION_KEY (environment)" : secrets.keyFile,
        environment: maskEnv(
          process.env,
          Object.keys(process.env)
            .filter((k) => GATEWAY_ENV.test(k))
            .sort()
        ),
        featureFlags: flags.flags.map((f) => ({ key: f.key, value: f.effectiveValue, source: f.source }))
      }
      if (opts.json) return yield* printJson(report)
      yield* Console.log(
        table(
          ["SETTING", "VALUE"],
          [
            ["port", String(config.port)],
            ["host", config.host],
            ["dataDir", config.dataDir],
            ["logFormat", config.logFormat],
            ["allowedOrigins", config.allowedOrigins.join(",") || "-"],
            ["allowedHosts", config.allowedHosts.join(",") || "-"],
            ["publicBaseUrl", config.publicBaseUrl ?? "-"],
            ["allowUnauthenticatedRemote", String(config.allowUnauthenticatedRemote)],
            ["envFile", `${envFile}${report.envFile.exists ? "" : " (absent)"}`],
            ["logFile", report.logFile],
            ["restart", report.restart],
            ["storageKey", report.storageKey]
          ]
        )
      )
      const envRows = Object.entries(report.environment)
      if (envRows.length)
        yield* Console.log(
          "\n" +
            table(
              ["ENVIRONMENT", "VALUE"],
              envRows.map(([k, v]) => [k, String(v)])
            )
        )
      const overridden = report.featureFlags.filter((f) => f.source !== "default")
      yield* Console.log(
        `\nfeature flags: ${flags.flags.length}, ${overridden.length} not at their default${overridden.length ? ": " + overridden.map((f) => `${f.key}=${f.value} (${f.source})`).join(", ") : ""}`
      )
    })
  )
