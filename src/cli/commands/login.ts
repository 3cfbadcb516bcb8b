import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import { lazy } from "../handler.js"
import { json, remoteOptions } from "../options.js"

const impl = () => import("./login.impl.js")

export const loginOptions = {
  url: remoteOptions.url,
  provider: Options.text("provider").pipe(
    Options.withDescription("The single sign-on provider's id (default: the only one configured; `gateway login` lists them otherwise)."),
    Options.optional
  ),
  browser: Options.boolean("browser").pipe(
    Options.withDescription("Sign in through a browser on this machine even when the provider offers the device grant.")
  ),
  json
}
export const logoutOptions = { url: remoteOptions.url, json }

export const loginCommand = Command.make(
  "login",
  loginOptions,
  lazy(impl, (m) => m.login)
).pipe(
  Command.withDescription(
    "Sign the CLI in to a running gateway through single sign-on (docs/sso.md): the provider's device grant (a code to enter on any device), else a browser on this machine; the session is kept in the config directory (0600) and used by the remote commands when no admin key is given."
  )
)

export const logoutCommand = Command.make(
  "logout",
  logoutOptions,
  lazy(impl, (m) => m.logout)
).pipe(Command.withDescription("End the session `gateway login` kept for this gateway, at the gateway and on this machine."))
