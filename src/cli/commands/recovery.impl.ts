import * as Prompt from "@effect/cli/Prompt"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { AdminAuth, AUTH_NAMESPACE, PASSWORD_KEY } from "../../services/auth/AdminAuth.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import type { Parsed } from "../handler.js"
import { withLocalGateway } from "../local.js"
import { printJson, table } from "../output.js"
import { gateway } from "../root.js"
import { UsageError } from "../schema.js"
import type { resetEncryptedColumnsOptions, resetPasswordOptions } from "./recovery.js"

export const resetPassword = (opts: Parsed<typeof resetPasswordOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const admin = yield* AdminAuth
      if (opts.clear) {
        if (Option.isSome(opts.password)) return yield* new UsageError({ message: "--clear: --clear and --password exclude each other" })
        const kv = yield* KeyValue
        const sql = yield* SqlClient.SqlClient
        const removed = yield* kv.remove(AUTH_NAMESPACE, PASSWORD_KEY)
        yield* sql`DELETE FROM admin_sessions`.pipe(Effect.orDie)
        ;(yield* BatchWriter).append("audit_log", {
          ts: Date.now(),
          actor: "cli-reset-password",
          action: "admin_password.clear",
          target: null,
          detail: null
        })
        return yield* Console.log(removed ? "admin password cleared; every admin session ended" : "no admin password was set")
      }
      let password: string
      if (Option.isSome(opts.password)) password = Redacted.value(opts.password.value)
      else {
        if ((yield* gateway).nonInteractive || !process.stdin.isTTY) {
          return yield* new UsageError({ message: "--password: no terminal to prompt on: pass --password <password> (or --clear)" })
        }
        const pw = yield* Prompt.password({
          message: "New admin password",
          validate: (v) => (v.length >= 8 ? Effect.succeed(v) : Effect.fail("at least 8 characters"))
        })
        const again = yield* Prompt.password({ message: "Repeat the password" })
        if (Redacted.value(pw) !== Redacted.value(again)) return yield* new UsageError({ message: "password: the passwords differ" })
        password = Redacted.value(pw)
      }
      yield* admin.setPassword(password, "cli-reset-password")
      yield* Console.log("admin password set; every admin session ended")
    })
  )

interface Undecryptable {
  readonly table: string
  readonly row: string
  readonly column: string
}

/**
 * `gateway reset-encrypted-columns [--force]`: finds stored secrets the current storage key
 * cannot decrypt (connections' API keys; `v1:` values inside settings in `kv`); `--force`
 * nulls them.
 */
export const resetEncryptedColumns = (opts: Parsed<typeof resetEncryptedColumnsOptions>) =>
  withLocalGateway(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const fails = (v: string) => Effect.map(Effect.either(secrets.decrypt(v)), (r) => r._tag === "Left")
      const found: Array<Undecryptable> = []
      const conns = yield* sql<{
        id: string
        name: string
        api_key_enc: string
      }>`SELECT id, name, api_key_enc FROM connections WHERE api_key_enc IS NOT NULL`.pipe(Effect.orDie)
      for (const c of conns) if (yield* fails(c.api_key_enc)) found.push({ table: "connections", row: c.name, column: "api_key_enc" })
      const kvRows = yield* sql<{ namespace: string; key: string; value: string }>`SELECT namespace, key, value FROM kv`.pipe(Effect.orDie)
      const kvFixes: Array<{ namespace: string; key: string; value: string }> = []
      for (const r of kvRows) {
        let doc: unknown
        try {
          doc = JSON.parse(r.value)
        } catch {
          continue
        }
        if (!doc || typeof doc !== "object" || Array.isArray(doc)) continue
        const fixed: Record<string, unknown> = { ...(doc as Record<string, unknown>) }
        let changed = false
        for (const [field, v] of Object.entries(fixed)) {
          if (typeof v === "string" && v.startsWith("v1:") && (yield* fails(v))) {
            found.push({ table: "kv", row: `${r.namespace}/${r.key}`, column: field })
            fixed[field] = null
            changed = true
          }
        }
        if (changed) kvFixes.push({ namespace: r.namespace, key: r.key, value: JSON.stringify(fixed) })
      }
      if (opts.force && found.length > 0) {
        yield* sql
          .withTransaction(
            Effect.gen(function* () {
              for (const f of found.filter((f) => f.table === "connections")) {
                yield* sql`UPDATE connections SET api_key_enc = NULL, updated_at = ${Date.now()} WHERE name = ${f.row}`
              }
              for (const k of kvFixes) yield* sql`UPDATE kv SET value = ${k.value} WHERE namespace = ${k.namespace} AND key = ${k.key}`
            })
          )
          .pipe(Effect.orDie)
        ;(yield* BatchWriter).append("audit_log", {
          ts: Date.now(),
          actor: "cli",
          action: "encrypted_columns.reset",
          target: null,
          detail: JSON.stringify(found)
        })
      }
      if (opts.json)
        return yield* printJson({
          storageKey: secrets.source === "env" ? "STORAGE_ENCRYPTION_KEY" : secrets.keyFile,
          undecryptable: found,
          reset: opts.force && found.length > 0
        })
      if (found.length === 0) return yield* Console.log("every stored secret decrypts with the current storage key; nothing to reset")
      yield* Console.log(
        table(
          ["TABLE", "ROW", "COLUMN"],
          found.map((f) => [f.table, f.row, f.column])
        )
      )
      yield* Console.log(
        opts.force
          ? `${found.length} credential(s) nulled; set them again (gateway providers, the settings routes)`
          : `${found.length} credential(s) do not decrypt with the current storage key; nothing changed. Run again with --force to null them.`
      )
    })
  )
