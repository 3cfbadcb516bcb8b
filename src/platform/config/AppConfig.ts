import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { isIPv4, isIPv6 } from "node:net"
import * as path from "node:path"
import { invalidRedisUrl } from "../state/redisUrl.js"

export const DEFAULT_PORT = 20128
export const DEFAULT_HOST = "127.0.0.1"

export interface AppConfigShape {
  /** TCP port of the HTTP server (0 picks a free one, used by tests). */
  readonly port: number
  /** Interface the server binds. */
  readonly host: string
  /** Directory holding the SQLite database and the generated storage key. */
  readonly dataDir: string
  /** `pretty` on a terminal, `json` for log shippers. */
  readonly logFormat: "pretty" | "json"
  /**
   * Browser origins (`https://app.example`) allowed to call inference routes without a gateway
   * key, besides loopback origins; `*` allows every origin. From `GATEWAY_ALLOWED_ORIGINS`.
   */
  readonly allowedOrigins: ReadonlyArray<string>
  /**
   * On a non-loopback bind, serve inference without a gateway key while `REQUIRE_API_KEY` is off.
   * Off (the default), such a bind requires a valid key whatever `REQUIRE_API_KEY` says. From
   * `GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE`.
   */
  readonly allowUnauthenticatedRemote: boolean
  /**
   * Host names this gateway is reached by besides loopback ones (behind a reverse proxy or a
   * local DNS name), for the DNS-rebinding check of a loopback bind (src/platform/http/HostPolicy.ts).
   * From `GATEWAY_ALLOWED_HOSTS` (comma-separated).
   */
  readonly allowedHosts: ReadonlyArray<string>
  /**
   * The public origin the gateway is reached at (a tunnel's or a proxy's), from
   * `NEXT_PUBLIC_BASE_URL`: an allowed Host and Origin, and the base of OAuth callbacks.
   */
  readonly publicBaseUrl?: string | undefined
  /**
   * `REDIS_URL` (`redis://` or `rediss://`): shared state (breakers, budgets, idempotency, …) on
   * Redis, for several gateway processes (docs/scale-out.md, "Redis"). Unset: one process.
   */
  readonly redisUrl?: string | undefined
  /** `GATEWAY_REDIS_PREFIX`: prefix of the gateway's Redis keys and channels (default `gateway:`). */
  readonly redisPrefix?: string | undefined
  /**
   * HTTPS: the PEM certificate (chain) and key files the server answers TLS with, from
   * `--tls-cert`/`--tls-key` or `GATEWAY_TLS_CERT`/`GATEWAY_TLS_KEY` (both or neither; docs/realtime.md).
   */
  readonly tlsCert?: string | undefined
  readonly tlsKey?: string | undefined
}

/** Process-level settings: where to listen and where state lives. Feature flags are separate. */
export class AppConfig extends Context.Tag("gateway/AppConfig")<AppConfig, AppConfigShape>() {
  /** Read from the environment (`PORT`, `HOST`, `DATA_DIR`, `LOG_FORMAT`); explicit overrides win. */
  static readonly layer = (overrides: Partial<AppConfigShape> = {}) =>
    Layer.effect(
      AppConfig,
      Effect.gen(function* () {
        const port = yield* Config.port("PORT").pipe(Config.withDefault(DEFAULT_PORT))
        const host = yield* Config.string("HOST").pipe(Config.withDefault(DEFAULT_HOST))
        const dataDir = yield* Config.string("DATA_DIR").pipe(Config.withDefault("./data"))
        const logFormat = yield* Config.literal("json", "pretty")("LOG_FORMAT").pipe(Config.option)
        const origins = yield* Config.string("GATEWAY_ALLOWED_ORIGINS").pipe(Config.withDefault(""))
        const allowUnauthenticatedRemote = yield* Config.boolean("GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE").pipe(Config.withDefault(false))
        const redisUrl = overrides.redisUrl ?? Option.getOrUndefined(yield* Config.string("REDIS_URL").pipe(Config.option))
        if (redisUrl !== undefined && redisUrl !== "") {
          // The message never repeats the URL: it may carry a password.
          const invalid = invalidRedisUrl(redisUrl)
          if (invalid !== undefined) return yield* Effect.fail(ConfigError.InvalidData(["REDIS_URL"], invalid))
        }
        const redisPrefix = yield* Config.string("GATEWAY_REDIS_PREFIX").pipe(Config.withDefault("gateway:"))
        const hosts = yield* Config.string("GATEWAY_ALLOWED_HOSTS").pipe(Config.withDefault(""))
        const publicBaseUrl =
          overrides.publicBaseUrl ?? Option.getOrUndefined(yield* Config.string("NEXT_PUBLIC_BASE_URL").pipe(Config.option))
        if (publicBaseUrl !== undefined && publicBaseUrl !== "" && !isHttpUrl(publicBaseUrl)) {
          return yield* Effect.fail(
            ConfigError.InvalidData(["NEXT_PUBLIC_BASE_URL"], "expected an http(s) URL such as https://gateway.example.com")
          )
        }
        const tlsCert = overrides.tlsCert ?? Option.getOrUndefined(yield* Config.string("GATEWAY_TLS_CERT").pipe(Config.option))
        const tlsKey = overrides.tlsKey ?? Option.getOrUndefined(yield* Config.string("GATEWAY_TLS_KEY").pipe(Config.option))
        if ((tlsCert === undefined || tlsCert === "") !== (tlsKey === undefined || tlsKey === ""))
          return yield* Effect.fail(
            ConfigError.InvalidData(
              ["GATEWAY_TLS_CERT"],
              "HTTPS needs both a certificate and a key (GATEWAY_TLS_CERT and GATEWAY_TLS_KEY, or --tls-cert and --tls-key)"
            )
          )
        return {
          ...(tlsCert ? { tlsCert: path.resolve(tlsCert) } : {}),
          ...(tlsKey ? { tlsKey: path.resolve(tlsKey) } : {}),
          port: overrides.port ?? port,
          host: overrides.host ?? host,
          dataDir: path.resolve(overrides.dataDir ?? dataDir),
          logFormat: overrides.logFormat ?? Option.getOrElse(logFormat, () => "pretty" as const),
          allowedOrigins:
            overrides.allowedOrigins ??
            origins
              .split(",")
              .map((o) => o.trim().replace(/\/+$/, ""))
              .filter((o) => o.length > 0),
          allowUnauthenticatedRemote: overrides.allowUnauthenticatedRemote ?? allowUnauthenticatedRemote,
          allowedHosts:
            overrides.allowedHosts ??
            hosts
              .split(",")
              .map((h) => h.trim().toLowerCase())
              .filter((h) => h.length > 0),
          publicBaseUrl: publicBaseUrl === "" || publicBaseUrl === undefined ? undefined : publicBaseUrl.replace(/\/+$/, ""),
          redisUrl: redisUrl === "" ? undefined : redisUrl,
          redisPrefix: overrides.redisPrefix ?? redisPrefix
        }
      })
    )

  static readonly layerTest = (config: Partial<AppConfigShape> & { dataDir: string }) =>
    Layer.succeed(AppConfig, {
      port: 0,
      host: "127.0.0.1",
      logFormat: "json",
      allowedOrigins: [],
      allowUnauthenticatedRemote: false,
      allowedHosts: [],
      ...config
    })
}

const isHttpUrl = (text: string): boolean => {
  try {
    const url = new URL(text)
    return url.protocol === "http:" || url.protocol === "https:"
  } catch {
    return false
  }
}

/** What inference authentication needs from the process configuration. */
export interface InferenceAccess {
  readonly allowedOrigins: ReadonlyArray<string>
  /** The bound interface, named in the 401 that a non-loopback bind answers without a key. */
  readonly host: string
  /**
   * A non-loopback bind without `GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE`: a valid key is required
   * even while `REQUIRE_API_KEY` is off. The bind decides, not the caller's address: on
   * 0.0.0.0 or :: a request from 127.0.0.1 needs a key too (behind a local reverse proxy every
   * request comes from loopback).
   */
  readonly keyRequiredByBind: boolean
  /**
   * `GATEWAY_ALLOW_UNAUTHENTICATED_REMOTE` is off: a request that came through a tunnel's edge
   * (it carries one of TUNNEL_MARKER_HEADERS, which the edge always adds and a client cannot
   * remove) is from the internet, though the helper connects from loopback: it needs a key too.
   */
  readonly keyRequiredThroughTunnel: boolean
}

export const inferenceAccess = (config: AppConfigShape): InferenceAccess => ({
  allowedOrigins: config.allowedOrigins,
  host: config.host,
  keyRequiredByBind: !isLoopbackHost(config.host) && !config.allowUnauthenticatedRemote,
  keyRequiredThroughTunnel: !config.allowUnauthenticatedRemote
})

/**
 * Headers that a tunnel adds to every request it forwards from the internet (docs/tunnels.md,
 * "Security"), and a client cannot remove: the quick tunnel's edge adds `Cf-Connecting-Ip`, the
 * mesh funnel `Tailscale-Funnel-Request`, and the token tunnel is opened asking its edge to add
 * `X-Gateway-Tunnel`. A client that sends one itself only makes its own request stricter.
 */
export const TUNNEL_MARKER_HEADERS = ["cf-connecting-ip", "tailscale-funnel-request", "x-gateway-tunnel"] as const
/** The marker the token tunnel's edge adds (its value names the backend). */
export const TOKEN_TUNNEL_MARKER = "x-gateway-tunnel: token"

/** Whether a request came through one of the gateway's tunnels, from the internet. */
export const throughTunnel = (headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>): boolean =>
  headers["cf-connecting-ip"] !== undefined ||
  headers["tailscale-funnel-request"] !== undefined ||
  headers["x-gateway-tunnel"] !== undefined

/**
 * Whether a browser page from `origin` may use the inference routes without a gateway key.
 * No Origin header (SDKs, curl, agents) is not a browser cross-site request.
 */
export const originAllowed = (origin: string | undefined, allowed: ReadonlyArray<string>): boolean => {
  if (origin === undefined) return true
  if (allowed.includes("*") || allowed.includes(origin)) return true
  try {
    return isLoopbackHost(new URL(origin).hostname)
  } catch {
    return false
  }
}

/**
 * True for addresses that only this machine can reach: `localhost`, IPv4 literals in
 * 127.0.0.0/8, `::1`, and IPv4-mapped 127.x.y.z (`::ffff:127.0.0.1`, `::ffff:7f00:1`). The whole
 * host is compared: `127.0.0.1.evil.example` is a name anyone can register, not a loopback address.
 */
export const isLoopbackHost = (host: string): boolean => {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1")
  if (h === "localhost") return true
  if (isIPv4(h)) return Number(h.split(".")[0]) === 127
  if (!isIPv6(h)) return false
  let canonical: string
  try {
    // The URL parser writes every IPv6 form canonically (`0:0:0:0:0:0:0:1` is `::1`, a mapped IPv4 in hex).
    canonical = new URL(`http://[${h}]/`).hostname.slice(1, -1)
  } catch {
    return false
  }
  if (canonical === "::1") return true
  const mapped = /^::ffff:([0-9a-f]{1,4}):[0-9a-f]{1,4}$/.exec(canonical)
  return mapped !== null && parseInt(mapped[1]!, 16) >> 8 === 127
}

/** A positive whole-number setting from the environment (`unit` names it in the error), or `fallback`. */
export const positiveInteger = (name: string, unit: string, fallback: number) =>
  Config.integer(name).pipe(
    Config.validate({ message: `${name} must be a positive number of ${unit}`, validation: (n) => n > 0 }),
    Config.withDefault(fallback)
  )
