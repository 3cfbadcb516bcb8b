import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { AppConfig } from "../config/AppConfig.js"
import { BadRequest } from "../domain/errors.js"
import { managementClient } from "./commands/status.js"
import { cliConfig } from "./local.js"

export { remoteOptions } from "./remoteOptions.js"

/** The local server's address from the configuration (HOST, PORT, root options); `port` overrides. */
export const localServerUrl = (port?: number) =>
  Effect.gen(function* () {
    const config = yield* Effect.provide(AppConfig, AppConfig.layer(yield* cliConfig))
    const connectHost = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host
    return `http://${connectHost.includes(":") ? `[${connectHost}]` : connectHost}:${port ?? config.port}`
  })

/** The running server's address: `--url`, else this machine's bind address and port (`--port`, PORT). */
export const serverUrl = (url: Option.Option<string>) =>
  Option.isSome(url) ? Effect.succeed(url.value) : localServerUrl()

/** The running server's management client, authenticated with the admin key. */
export const remote = (opts: { readonly url: Option.Option<string>; readonly apiKey: Option.Option<string> }) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const adminKey = Option.getOrUndefined(opts.apiKey) ?? (process.env.GATEWAY_API_KEY?.trim() || undefined)
    if (!adminKey) return yield* new BadRequest({ message: "an admin API key is needed: pass --api-key or set GATEWAY_API_KEY" })
    return { url, client: yield* managementClient(url, adminKey) }
  })

/** Turns the client's transport and HTTP errors into one readable line. */
export const explain = (url: string) => (e: unknown) => {
  const tag = (e as { _tag?: string })?._tag
  const message = (e as { message?: string })?.message
  if (tag === "RequestError") return new BadRequest({ message: `no gateway answers at ${url} (is it running?)` })
  if (tag === "Unauthorized") return new BadRequest({ message: "the admin key was refused" })
  return new BadRequest({ message: message ?? String(e) })
}
