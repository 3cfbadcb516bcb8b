import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as path from "node:path"
import { AppConfig } from "../../platform/config/AppConfig.js"

/** The traffic inspector's settings, read from the environment at start (docs/inspector.md, "Settings"). */
export interface InspectorConfigShape {
  /** Ring buffer entries; the oldest rotate out (`INSPECTOR_BUFFER_SIZE`, 1000). */
  readonly bufferSize: number
  /** Larger bodies are truncated with a notice (`INSPECTOR_MAX_BODY_KB`, 1024). */
  readonly maxBodyKb: number
  /** All bodies kept together, MB: past it the oldest entries' bodies are dropped (`INSPECTOR_MAX_TOTAL_MB`, 256). */
  readonly maxTotalMb: number
  /** Mask secrets before buffering (`INSPECTOR_MASK_SECRETS`, true). */
  readonly maskSecrets: boolean
  /** Keep bodies of every request even with no inspector client or session (`INSPECTOR_CAPTURE_BODIES`, false). */
  readonly captureBodies: boolean
  /** The HTTP proxy mode's port (`INSPECTOR_HTTP_PROXY_PORT`, 8080), on 127.0.0.1. */
  readonly httpProxyPort: number
  /** The custom-host MITM server's port (`INSPECTOR_MITM_PORT`, 443). */
  readonly mitmPort: number
  /** The system-wide proxy's auto-revert (`INSPECTOR_SYSTEM_PROXY_GUARD_MINUTES`, 30). */
  readonly systemProxyGuardMinutes: number
  /** The token the internal ingest route requires (`INSPECTOR_INTERNAL_INGEST_TOKEN`); none: the route is refused. */
  readonly ingestToken: string | undefined
  /** The hosts file custom hosts are written to (`GATEWAY_HOSTS_FILE`, /etc/hosts). */
  readonly hostsFile: string
  /** Idle time of intercepted sockets (`MITM_IDLE_TIMEOUT_MS`, 120000). */
  readonly idleTimeoutMs: number
  /** Extra CA certificates (PEM file) trusted when verifying upstreams of intercepted traffic (`INSPECTOR_UPSTREAM_CA_FILE`). */
  readonly upstreamCaFile: string | undefined
  /** Where the local CA lives (`<DATA_DIR>/inspector`). */
  readonly caDir: string
  /** The home directory the system-proxy mode edits (`INSPECTOR_SYSTEM_PROXY_HOME`, $HOME): its env file and gsettings. */
  readonly systemProxyHome: string
}

export const inspectorDefaults = (dataDir: string): InspectorConfigShape => ({
  bufferSize: 1000,
  maxBodyKb: 1024,
  maxTotalMb: 256,
  maskSecrets: true,
  captureBodies: false,
  httpProxyPort: 8080,
  mitmPort: 443,
  systemProxyGuardMinutes: 30,
  ingestToken: undefined,
  hostsFile: "/etc/hosts",
  idleTimeoutMs: 120_000,
  upstreamCaFile: undefined,
  caDir: path.join(dataDir, "inspector"),
  systemProxyHome: process.env["HOME"] ?? "/root"
})

export class InspectorConfig extends Context.Tag("gateway/InspectorConfig")<InspectorConfig, InspectorConfigShape>() {
  static readonly layer = Layer.effect(
    InspectorConfig,
    Effect.gen(function* () {
      const app = yield* AppConfig
      const d = inspectorDefaults(app.dataDir)
      const int = (name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER) =>
        Config.integer(name).pipe(
          Config.validate({ message: `${name} must be an integer from ${min} to ${max}`, validation: (n) => n >= min && n <= max }),
          Config.withDefault(fallback)
        )
      const opt = (name: string) => Config.string(name).pipe(Config.option, Config.map(Option.getOrUndefined))
      const token = yield* opt("INSPECTOR_INTERNAL_INGEST_TOKEN")
      return {
        bufferSize: yield* int("INSPECTOR_BUFFER_SIZE", d.bufferSize, 1, 1_000_000),
        maxBodyKb: yield* int("INSPECTOR_MAX_BODY_KB", d.maxBodyKb, 1, 1024 * 1024),
        maxTotalMb: yield* int("INSPECTOR_MAX_TOTAL_MB", d.maxTotalMb, 1, 1024 * 1024),
        maskSecrets: yield* Config.boolean("INSPECTOR_MASK_SECRETS").pipe(Config.withDefault(d.maskSecrets)),
        captureBodies: yield* Config.boolean("INSPECTOR_CAPTURE_BODIES").pipe(Config.withDefault(d.captureBodies)),
        httpProxyPort: yield* int("INSPECTOR_HTTP_PROXY_PORT", d.httpProxyPort, 0, 65535),
        mitmPort: yield* int("INSPECTOR_MITM_PORT", d.mitmPort, 0, 65535),
        systemProxyGuardMinutes: yield* int("INSPECTOR_SYSTEM_PROXY_GUARD_MINUTES", d.systemProxyGuardMinutes, 1, 7 * 24 * 60),
        ingestToken: token === undefined || token.trim() === "" ? undefined : token,
        hostsFile: (yield* opt("GATEWAY_HOSTS_FILE")) ?? d.hostsFile,
        idleTimeoutMs: yield* int("MITM_IDLE_TIMEOUT_MS", d.idleTimeoutMs, 1000),
        upstreamCaFile: yield* opt("INSPECTOR_UPSTREAM_CA_FILE"),
        caDir: d.caDir,
        systemProxyHome: (yield* opt("INSPECTOR_SYSTEM_PROXY_HOME")) ?? d.systemProxyHome
      }
    })
  )

  static readonly layerTest = (dataDir: string, overrides: Partial<InspectorConfigShape> = {}) =>
    Layer.succeed(InspectorConfig, { ...inspectorDefaults(dataDir), ...overrides })
}
