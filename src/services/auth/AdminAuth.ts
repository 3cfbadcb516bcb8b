import * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { AdminPassword } from "../../domain/auth.js"
import { type BadRequest, TooManyRequests, Unauthorized } from "../../domain/errors.js"
import { decodeOrBadRequest } from "../../domain/parse.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { makeLoginThrottle, type ThrottleChange } from "./loginThrottle.js"
import { SharedState } from "../../platform/state/SharedState.js"
import { hashPassword, randomToken, sha256, verifyPassword } from "./password.js"

export const AUTH_NAMESPACE = "auth"
export const PASSWORD_KEY = "admin_password"
export const SESSION_COOKIE = "gw_session"
export const SESSION_TTL_MS = 7 * 24 * 60 * 60 * 1000

/** The one admin account: with the client address, the key of the failed-login throttle. */
export const ADMIN_ACCOUNT = "admin"

export interface AdminSession {
  readonly csrfToken: string
  readonly expiresAt: number
  /** The session's user (`admin_sessions.user_id`, docs/teams.md); null for the admin password's. */
  readonly userId: string | null
}

export interface AdminAuthShape {
  readonly hasPassword: Effect.Effect<boolean>
  readonly setPassword: (password: string, actor?: string) => Effect.Effect<void, BadRequest>
  /**
   * Creates a session. Fails with 401 on a wrong password, and with 429 while this address must
   * wait after repeated failures for the account (see loginThrottle.ts).
   */
  readonly login: (
    password: string,
    client: { readonly ip: string; readonly userAgent: string | undefined }
  ) => Effect.Effect<{ readonly token: string; readonly session: AdminSession }, Unauthorized | TooManyRequests>
  readonly session: (token: string) => Effect.Effect<Option.Option<AdminSession>>
  readonly logout: (token: string) => Effect.Effect<void>
}

const decodePassword = decodeOrBadRequest(AdminPassword)

/**
 * The admin password (scrypt hash in `kv`) and the cookie sessions it opens. Sessions are
 * stored hashed with their CSRF token, expire after 7 days, and are checked per management
 * request (the management plane is not the hot path).
 */
export class AdminAuth extends Context.Tag("gateway/AdminAuth")<AdminAuth, AdminAuthShape>() {
  static readonly layer = Layer.effect(
    AdminAuth,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const kv = yield* KeyValue
      const writer = yield* BatchWriter
      // One count across the gateway's processes: failures and successes go on the shared-state
      // channel, and the other processes' arrive there (docs/scale-out.md).
      const shared = yield* SharedState.orLocal
      const throttleChannel = shared.channel<ThrottleChange>("login-throttle", (c) => throttle.apply(c))
      const throttle = makeLoginThrottle({ onChange: (c) => (throttleChannel.shared ? throttleChannel.publish(c) : undefined) })
      let fullWarnedAt = -Infinity

      const storedHash = kv.get(AUTH_NAMESPACE, PASSWORD_KEY)

      const setPassword: AdminAuthShape["setPassword"] = (password, actor = "system") =>
        Effect.gen(function* () {
          yield* decodePassword(password)
          const hash = yield* Effect.promise(() => hashPassword(password))
          yield* kv.set(AUTH_NAMESPACE, PASSWORD_KEY, hash)
          // A new password ends every existing session.
          yield* sql`DELETE FROM admin_sessions`.pipe(Effect.orDie)
          writer.append("audit_log", { ts: Date.now(), actor, action: "admin_password.set", target: null, detail: null })
        })

      // INITIAL_PASSWORD seeds the password once, when none is set yet.
      const initial = yield* Config.redacted("INITIAL_PASSWORD").pipe(Config.option, Effect.orDie)
      if (Option.isSome(initial) && Option.isNone(yield* storedHash)) {
        yield* setPassword(Redacted.value(initial.value), "INITIAL_PASSWORD").pipe(
          Effect.tap(() => Effect.logInfo("admin password set from INITIAL_PASSWORD")),
          Effect.catchAll((e) => Effect.logWarning(`INITIAL_PASSWORD ignored: ${e.message}`))
        )
      }

      const login: AdminAuthShape["login"] = (password, client) =>
        Effect.gen(function* () {
          const t = Date.now()
          // Counted as a failure before the (slow) password check, so parallel guesses cannot slip past.
          const retryAfter = throttle.admit(client.ip, ADMIN_ACCOUNT, t)
          if (retryAfter !== undefined && !throttle.tracks(client.ip, ADMIN_ACCOUNT)) {
            // Every tracked address is waiting out a delay (a spray from many addresses): a new one
            // is not let through untracked. Said once a minute, not once per refused attempt.
            if (t - fullWarnedAt >= 60_000) {
              fullWarnedAt = t
              yield* Effect.logWarning(`failed-login throttle full: logins from new addresses are refused for ${retryAfter} s`)
            }
            return yield* new TooManyRequests({
              message: `too many addresses are failing to log in; try again in ${retryAfter} s (an admin API key still works meanwhile)`,
              retryAfterSeconds: retryAfter
            })
          }
          if (retryAfter !== undefined) {
            return yield* new TooManyRequests({
              message: `too many failed logins for this account from this address; try again in ${retryAfter} s (an admin API key still works meanwhile)`,
              retryAfterSeconds: retryAfter
            })
          }
          const hash = yield* storedHash
          if (Option.isNone(hash)) {
            return yield* new Unauthorized({
              message: "no admin password is set; run `gateway setup --password <password>` or start with INITIAL_PASSWORD"
            })
          }
          const ok = yield* Effect.promise(() => verifyPassword(password, hash.value))
          if (!ok) {
            writer.append("audit_log", { ts: t, actor: client.ip, action: "admin.login_failed", target: null, detail: null })
            return yield* new Unauthorized({ message: "wrong password" })
          }
          throttle.succeeded(client.ip, ADMIN_ACCOUNT)
          const token = randomToken(32)
          const session: AdminSession = { csrfToken: randomToken(24), expiresAt: t + SESSION_TTL_MS, userId: null }
          yield* sql`DELETE FROM admin_sessions WHERE expires_at <= ${t}`.pipe(Effect.orDie)
          yield* sql`INSERT INTO admin_sessions ${sql.insert({
            token_hash: sha256(token),
            csrf_token: session.csrfToken,
            created_at: t,
            expires_at: session.expiresAt,
            ip: client.ip,
            user_agent: client.userAgent?.slice(0, 256) ?? null
          })}`.pipe(Effect.orDie)
          writer.append("audit_log", { ts: t, actor: client.ip, action: "admin.login", target: null, detail: null })
          return { token, session }
        })

      const session = (token: string) =>
        sql<{
          csrf_token: string
          expires_at: number
          user_id: string | null
        }>`SELECT csrf_token, expires_at, user_id FROM admin_sessions WHERE token_hash = ${sha256(token)}`.pipe(
          Effect.orDie,
          Effect.map((rows) => {
            const row = rows[0]
            if (!row || row.expires_at <= Date.now()) return Option.none()
            return Option.some({ csrfToken: row.csrf_token, expiresAt: row.expires_at, userId: row.user_id ?? null })
          })
        )

      return {
        hasPassword: Effect.map(storedHash, Option.isSome),
        setPassword,
        login,
        session,
        logout: (token) => sql`DELETE FROM admin_sessions WHERE token_hash = ${sha256(token)}`.pipe(Effect.asVoid, Effect.orDie)
      }
    })
  )
}
