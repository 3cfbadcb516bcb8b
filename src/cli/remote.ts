import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { BadRequest } from "../domain/errors.js"
import { ManagementApi } from "../management/api/Api.js"
import { appConfig } from "./root.js"
import { loadSession, sessionHeaders, type StoredSession } from "./session.js"

/** A client for the running server, derived from the same HttpApi the server implements. */
export const managementClient = (baseUrl: string, adminKey: string | undefined) =>
  HttpApiClient.make(ManagementApi, {
    baseUrl,
    transformClient: (client) => (adminKey ? HttpClient.mapRequest(client, HttpClientRequest.bearerToken(adminKey)) : client)
  })

/** The running server's address: `--url`, else the configured host (a wildcard bind reached on loopback) and port. */
export const serverUrl = (url: Option.Option<string>) =>
  Effect.map(appConfig, (config) => {
    const connectHost = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host
    return Option.getOrElse(url, () => `http://${connectHost.includes(":") ? `[${connectHost}]` : connectHost}:${config.port}`)
  })

/** The local server's address from the configuration (HOST, PORT, root options); `port` overrides. */
export const localServerUrl = (port?: number) =>
  Effect.map(appConfig, (config) => {
    const connectHost = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host
    return `http://${connectHost.includes(":") ? `[${connectHost}]` : connectHost}:${port ?? config.port}`
  })

/** `--api-key`, else GATEWAY_API_KEY. */
export const adminKeyOf = (apiKey: Option.Option<string>): string | undefined =>
  Option.getOrUndefined(apiKey) ?? (process.env.GATEWAY_API_KEY?.trim() || undefined)

/** A client for the running server signed in as the session `gateway login` kept (its cookie and CSRF token). */
export const sessionClient = (baseUrl: string, session: StoredSession) =>
  HttpApiClient.make(ManagementApi, {
    baseUrl,
    transformClient: (client) => HttpClient.mapRequest(client, HttpClientRequest.setHeaders(sessionHeaders(session)))
  })

/**
 * The running server's management client, authenticated with the admin key, else with the session
 * `gateway login` kept for this address (docs/sso.md, "The CLI").
 */
export const remote = (opts: { readonly url: Option.Option<string>; readonly apiKey: Option.Option<string> }) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const adminKey = adminKeyOf(opts.apiKey)
    if (adminKey) return { url, client: yield* managementClient(url, adminKey) }
    const session = loadSession(url)
    if (session) return { url, client: yield* sessionClient(url, session) }
    return yield* new BadRequest({
      message: "an admin API key is needed: pass --api-key or set GATEWAY_API_KEY, or sign in with `gateway login`"
    })
  })

/** Turns the client's transport and HTTP errors into one readable line. */
export const explain = (url: string) => (e: unknown) => {
  const tag = (e as { _tag?: string })?._tag
  const message = (e as { message?: string })?.message
  if (tag === "RequestError") return new BadRequest({ message: `no gateway answers at ${url} (is it running?)` })
  if (tag === "Unauthorized") return new BadRequest({ message: `the admin key was refused${message ? `: ${message}` : ""}` })
  // A role that may not call the route (docs/teams.md, "Roles and access"): the gateway's answer names the role and the route.
  const status = (e as { response?: { status?: number } })?.response?.status
  if (tag === "Forbidden" || status === 403)
    return new BadRequest({ message: `refused by the gateway (403): ${message ?? "this key's role may not do that"}` })
  return new BadRequest({ message: message ?? String(e) })
}

/** Provides the fetch-based HTTP client the management client and raw calls use. */
export const withHttp = Effect.provide(FetchHttpClient.layer)
