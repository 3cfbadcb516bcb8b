import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Redacted from "effect/Redacted"
import { AdminPassword } from "../../domain/auth.js"
import { lazy } from "../handler.js"
import { json } from "../options.js"
import { schemaOption } from "../schema.js"

const impl = () => import("./recovery.impl.js")

export const resetPasswordOptions = {
  password: schemaOption("password", AdminPassword).pipe(
    Options.map(Redacted.make),
    Options.withDescription("The new admin password (at least 8 characters)."),
    Options.optional
  ),
  clear: Options.boolean("clear").pipe(
    Options.withDescription("Remove the password instead (management then needs an admin API key until one is set).")
  )
}
export const resetEncryptedColumnsOptions = {
  force: Options.boolean("force").pipe(Options.withDescription("Really null the credentials that no longer decrypt.")),
  json
}

/** `gateway reset-password`: sets (prompted or `--password`) or clears (`--clear`) the admin password in the local database. */
export const resetPasswordCommand = Command.make(
  "reset-password",
  resetPasswordOptions,
  lazy(impl, (m) => m.resetPassword)
).pipe(Command.withDescription("Set (prompted, or --password) or clear (--clear) the admin password in the local database."))

/**
 * `gateway reset-encrypted-columns [--force]`: finds stored secrets the current storage key
 * cannot decrypt (connections' API keys; `v1:` values inside settings in `kv`); `--force`
 * nulls them.
 */
export const resetEncryptedColumnsCommand = Command.make(
  "reset-encrypted-columns",
  resetEncryptedColumnsOptions,
  lazy(impl, (m) => m.resetEncryptedColumns)
).pipe(Command.withDescription("Recovery after a lost storage key: list stored secrets that no longer decrypt; --force nulls them."))
