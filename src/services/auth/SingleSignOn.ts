/**
 * Single sign-on with OpenID Connect (docs/sso.md): the providers (ssoProviders.ts), the sign-ins
 * in progress (ssoLogins.ts), the provider side through openid-client (ssoFlows.ts), and here the
 * steps: a browser's sign-in begun and completed, a CLI's device grant proxied (the gateway holds
 * the client secret), the loopback hand-off, the user found or made in the directory in the teams
 * and role its groups map to, and the `gw_session` it ends with (`admin_sessions.user_id`). Also
 * whether the admin password still signs in.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { createHash } from "node:crypto"
import { type BadGateway, BadRequest, type Conflict, Forbidden, type NotFound } from "../../domain/errors.js"
import type {
  CreateOidcProvider,
  OidcCallbackQuery,
  OidcDevicePollResult,
  OidcDeviceStarted,
  OidcLoginQuery,
  PatchOidcProvider,
  SsoSession
} from "../../domain/sso.js"
import type { Role, TeamRole } from "../../domain/teams.js"
import { isLoopbackHost } from "../../platform/config/AppConfig.js"
import { toIso } from "../../platform/store/Db.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { Secrets } from "../../platform/store/Secrets.js"
import { BatchWriter } from "../../platform/store/BatchWriter.js"
import { Directory, type DirectoryShape, type DirectoryUser } from "../teams/Directory.js"
import { AUTH_NAMESPACE, SESSION_TTL_MS } from "./AdminAuth.js"
import { randomToken, safeEqual, sha256 } from "./password.js"
import { type Claims, makeOidcClient, refusal } from "./ssoFlows.js"
import { makeLoginStore } from "./ssoLogins.js"
import { envProviders, makeProviderStore, type OidcProviderRecord, type ProviderStore } from "./ssoProviders.js"

/** How long a begun browser sign-in waits for the provider's redirect. */
const LOGIN_TTL_MS = 10 * 60_000
/** How long a session made for the CLI's loopback waits to be taken. */
const HANDOFF_TTL_MS = 2 * 60_000
/** The kv key (namespace `auth`) that turns the admin password's sign-in off. */
export const PASSWORD_LOGIN_KEY = "password_login"

const RANK: Record<Role, number> = { viewer: 0, member: 1, "team-admin": 2, admin: 3 }

interface BrowserLogin {
  readonly state: string
  readonly nonce: string
  readonly verifier: string
  readonly redirectUri: string
  readonly returnTo: string
  readonly cliRedirect: string | null
  readonly cliChallenge: string | null
}
interface DeviceLogin {
  readonly deviceCode: string
  readonly interval: number
}
type Handoff = SsoSession & { readonly challenge: string }

export interface ClientInfo {
  readonly ip: string
  readonly userAgent: string | undefined
}

/** A completed browser sign-in: a dashboard session to set as the cookie, or the CLI's loopback to send the browser to. */
export type BrowserSignedIn =
  | { readonly kind: "session"; readonly token: string; readonly session: SsoSession; readonly returnTo: string }
  | { readonly kind: "cli"; readonly location: string; readonly user: SsoSession["user"] }

export type SsoRefusal = BadRequest | Forbidden | NotFound | BadGateway

export interface SingleSignOnShape {
  readonly providers: ProviderStore
  readonly publicList: Effect.Effect<{ readonly providers: ReadonlyArray<{ readonly id: string; readonly name: string }> }>
  /** The provider's authorization address (state, nonce and PKCE kept for the callback). */
  readonly beginLogin: (id: string, query: OidcLoginQuery, callbackBase: string) => Effect.Effect<string, SsoRefusal>
  /** The provider's redirect: the code exchanged, the ID token checked, the user found or made, a session opened. */
  readonly completeLogin: (id: string, query: OidcCallbackQuery, client: ClientInfo) => Effect.Effect<BrowserSignedIn, SsoRefusal>
  readonly startDevice: (id: string) => Effect.Effect<OidcDeviceStarted, SsoRefusal>
  readonly pollDevice: (id: string, handle: string, client: ClientInfo) => Effect.Effect<OidcDevicePollResult, SsoRefusal>
  /** The CLI's loopback hand-off: its one-time code and the secret whose hash it sent with the sign-in. */
  readonly cliToken: (code: string, verifier: string) => Effect.Effect<SsoSession, BadRequest>
  readonly passwordLogin: Effect.Effect<boolean>
  /** Turning it off is refused while no provider is configured or no enabled admin has signed in through one. */
  readonly setPasswordLogin: (enabled: boolean, actor: string) => Effect.Effect<boolean, BadRequest>
  readonly create: (input: CreateOidcProvider, actor: string) => Effect.Effect<OidcProviderRecord, BadRequest | Conflict>
  readonly update: (
    id: string,
    patch: PatchOidcProvider,
    actor: string
  ) => Effect.Effect<OidcProviderRecord, BadRequest | NotFound | Forbidden>
  readonly remove: (id: string, actor: string) => Effect.Effect<OidcProviderRecord, NotFound | Forbidden>
}

/** Whether the admin password signs in (kv `auth/password_login`; on unless turned off). */
export const passwordLoginEnabled = (kv: Context.Tag.Service<KeyValue>) =>
  Effect.map(kv.get(AUTH_NAMESPACE, PASSWORD_LOGIN_KEY), (v) => Option.getOrElse(v, () => "on") !== "off")

/** Groups as the claim carries them: an array of strings, or one string (space- or comma-separated). */
export const groupsOf = (claims: Claims, claim: string): ReadonlyArray<string> => {
  const v = claims[claim]
  if (Array.isArray(v)) return v.filter((g): g is string => typeof g === "string")
  if (typeof v === "string") return v.split(/[\s,]+/).filter((g) => g !== "")
  return []
}

/**
 * The role and teams a user's groups map to: the highest role of every matching mapping; a team
 * named by a mapping joined as `team-admin` when that mapping's role is `team-admin` or `admin`,
 * else `member`. Undefined when no mapping matches.
 */
export const mapGroups = (
  provider: OidcProviderRecord,
  groups: ReadonlyArray<string>,
  findTeam: (ref: string) => { readonly id: string } | undefined
):
  | { readonly role: Role; readonly teams: ReadonlyArray<{ teamId: string; role: TeamRole }>; readonly unknownTeams: ReadonlyArray<string> }
  | undefined => {
  const matched = provider.mappings.filter((m) => groups.includes(m.group))
  if (matched.length === 0) return undefined
  const role = matched.map((m) => m.role).reduce((a, b) => (RANK[b] > RANK[a] ? b : a))
  const teams = new Map<string, TeamRole>()
  const unknownTeams: Array<string> = []
  for (const m of matched) {
    if (m.team === null) continue
    const team = findTeam(m.team)
    if (team === undefined) {
      unknownTeams.push(m.team)
      continue
    }
    const teamRole: TeamRole = m.role === "admin" || m.role === "team-admin" ? "team-admin" : "member"
    if (teams.get(team.id) !== "team-admin") teams.set(team.id, teamRole)
  }
  return { role, teams: [...teams].map(([teamId, r]) => ({ teamId, role: r })), unknownTeams }
}

/** Where the dashboard goes after the sign-in: a path of this gateway only (never another site). */
const safeReturnTo = (returnTo: string | undefined): string => (returnTo !== undefined && /^\/(?![/\\])/.test(returnTo) ? returnTo : "/")

/** The CLI's loopback address: http on 127.0.0.1, ::1 or localhost, nothing else. */
const loopbackProblem = (url: string): string | undefined => {
  try {
    const u = new URL(url)
    if (u.protocol !== "http:" || !isLoopbackHost(u.hostname.replace(/^\[|\]$/g, "")))
      return "cliRedirect must be an http address on this machine's loopback (http://127.0.0.1:<port>/...)"
    return undefined
  } catch {
    return "cliRedirect is not a URL"
  }
}

const challengeOf = (verifier: string) => createHash("sha256").update(verifier).digest("base64url")

export class SingleSignOn extends Context.Tag("gateway/SingleSignOn")<SingleSignOn, SingleSignOnShape>() {
  static readonly layer = Layer.effect(
    SingleSignOn,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const secrets = yield* Secrets
      const kv = yield* KeyValue
      const directory: DirectoryShape = yield* Directory
      const writer = Option.getOrUndefined(yield* Effect.serviceOption(BatchWriter))
      const envText = yield* Config.string("GATEWAY_OIDC_PROVIDERS").pipe(Config.option, Effect.orDie)
      const providers = makeProviderStore({ sql, secrets, fromEnv: yield* envProviders(Option.getOrUndefined(envText)) })
      const logins = makeLoginStore({ sql, secrets })
      const oidc = makeOidcClient()
      const audit = (actor: string, action: string, target: string | null, detail: string | null = null) =>
        writer?.append("audit_log", { ts: Date.now(), actor, action, target, detail })

      const scopeOf = (p: OidcProviderRecord) => p.scopes.join(" ")

      /** The user the claims name, found or made in the teams and role their groups map to; refused when nothing maps. */
      const userOf = (p: OidcProviderRecord, claims: Claims) =>
        Effect.gen(function* () {
          const email = typeof claims.email === "string" ? claims.email.trim() : ""
          if (email === "" || !email.includes("@"))
            return yield* new BadRequest({
              message: `provider '${p.id}' gave no email for this user: ask for the email scope (the provider's scopes: ${scopeOf(p)})`
            })
          // `localhost` is no address a provider can vouch for, and the first admin's placeholder (admin@localhost) must not be reachable by email.
          if (/@localhost$/i.test(email))
            return yield* new Forbidden({
              message: `provider '${p.id}' gave the email ${email}, which no provider can vouch for: sign-in refused`
            })
          if (claims.email_verified === false)
            return yield* new Forbidden({
              message: `provider '${p.id}' says the email ${email} is not verified: verify it there and sign in again`
            })
          const groups = groupsOf(claims, p.groupsClaim)
          yield* directory.refresh
          const known = directory.findUser(email)
          const mapped = mapGroups(p, groups, directory.findTeam)
          // A user the directory knows keeps its role and teams (the directory's, changed there); a new one needs a mapping.
          if (mapped === undefined && known === undefined)
            return yield* new Forbidden({
              message: `${email} signed in at '${p.name}', but none of their groups (${groups.length > 0 ? groups.join(", ") : `no '${p.groupsClaim}' claim`}) is mapped to a role on this gateway: an admin adds a mapping to provider '${p.id}'`
            })
          for (const team of mapped?.unknownTeams ?? [])
            yield* Effect.logWarning(`single sign-on: provider '${p.id}' maps a group to team '${team}', which does not exist: skipped`)
          const name = [claims.name, claims.preferred_username, claims.nickname].find(
            (v): v is string => typeof v === "string" && v.trim() !== ""
          )
          const user = yield* directory.signIn({
            provider: p.id,
            subject: claims.sub,
            email,
            name: name ?? email.split("@")[0]!,
            teams: mapped?.teams ?? [],
            role: mapped?.role ?? "viewer"
          })
          if (user.disabled) return yield* new Forbidden({ message: `the user ${user.email} is disabled on this gateway` })
          return user
        })

      /** A `gw_session` for the user (`admin_sessions.user_id`), as AdminAuth makes the password's. */
      const openSession = (user: DirectoryUser, p: OidcProviderRecord, client: ClientInfo) =>
        Effect.gen(function* () {
          const t = Date.now()
          const token = randomToken(32)
          const csrfToken = randomToken(24)
          yield* sql`DELETE FROM admin_sessions WHERE expires_at <= ${t}`.pipe(Effect.orDie)
          yield* sql`INSERT INTO admin_sessions ${sql.insert({
            token_hash: sha256(token),
            csrf_token: csrfToken,
            created_at: t,
            expires_at: t + SESSION_TTL_MS,
            ip: client.ip,
            user_agent: client.userAgent?.slice(0, 256) ?? null,
            user_id: user.id
          })}`.pipe(Effect.orDie)
          audit(`oidc:${p.id}`, "user.login", user.id, client.ip)
          yield* Effect.logInfo(`single sign-on: ${user.email} signed in through '${p.id}'`)
          const session: SsoSession = {
            session: token,
            csrfToken,
            expiresAt: toIso(t + SESSION_TTL_MS)!,
            user: { id: user.id, email: user.email, name: user.name, role: user.role }
          }
          return { token, session }
        })

      const beginLogin: SingleSignOnShape["beginLogin"] = (id, query, callbackBase) =>
        Effect.gen(function* () {
          const p = yield* providers.get(id)
          if (query.cliRedirect !== undefined) {
            const problem = loopbackProblem(query.cliRedirect)
            if (problem !== undefined) return yield* new BadRequest({ message: problem })
            if (!query.cliChallenge) return yield* new BadRequest({ message: "cliChallenge: required with cliRedirect" })
          }
          const { config, openid } = yield* oidc.configOf(p)
          const state = openid.randomState()
          const nonce = openid.randomNonce()
          const verifier = openid.randomPKCECodeVerifier()
          const redirectUri = `${callbackBase.replace(/\/+$/, "")}/api/auth/oidc/${encodeURIComponent(p.id)}/callback`
          const url = openid.buildAuthorizationUrl(config, {
            redirect_uri: redirectUri,
            scope: scopeOf(p),
            state,
            nonce,
            code_challenge: yield* Effect.promise(() => openid.calculatePKCECodeChallenge(verifier)),
            code_challenge_method: "S256"
          })
          const login: BrowserLogin = {
            state,
            nonce,
            verifier,
            redirectUri,
            returnTo: safeReturnTo(query.returnTo),
            cliRedirect: query.cliRedirect ?? null,
            cliChallenge: query.cliChallenge ?? null
          }
          yield* logins.put("browser", p.id, state, login, LOGIN_TTL_MS)
          return url.toString()
        }).pipe(Effect.withSpan("SingleSignOn.beginLogin", { attributes: { provider: id } }))

      const completeLogin: SingleSignOnShape["completeLogin"] = (id, query, client) =>
        Effect.gen(function* () {
          if (!query.state) return yield* new BadRequest({ message: "state: missing from the provider's redirect" })
          const found = yield* logins.take<BrowserLogin>("browser", query.state)
          if (found === undefined || found.providerId !== id)
            return yield* new BadRequest({
              message: "state: no sign-in is waiting under this state (unknown, used or expired after 10 minutes): sign in again"
            })
          const login = found.data
          if (query.error)
            return yield* new BadRequest({
              message: `the provider refused the sign-in: ${query.error}${query.error_description ? ` (${query.error_description})` : ""}`
            })
          if (!query.code) return yield* new BadRequest({ message: "code: missing from the provider's redirect" })
          const p = yield* providers.get(id)
          const { config, openid } = yield* oidc.configOf(p)
          const current = new URL(login.redirectUri)
          for (const [k, v] of Object.entries(query)) if (typeof v === "string") current.searchParams.set(k, v)
          const tokens = yield* Effect.tryPromise({
            try: () =>
              openid.authorizationCodeGrant(config, current, {
                pkceCodeVerifier: login.verifier,
                expectedState: login.state,
                expectedNonce: login.nonce,
                idTokenExpected: true
              }),
            catch: (e) => refusal(`provider '${p.id}' sign-in refused`, e, [p.clientSecret, query.code, login.verifier])
          })
          const user = yield* userOf(p, yield* oidc.claimsOf({ config, openid }, tokens))
          const { token, session } = yield* openSession(user, p, client)
          if (login.cliRedirect !== null && login.cliChallenge !== null) {
            const code = randomToken(24)
            const handoff: Handoff = { ...session, challenge: login.cliChallenge }
            yield* logins.put("cli", p.id, code, handoff, HANDOFF_TTL_MS)
            const location = new URL(login.cliRedirect)
            location.searchParams.set("code", code)
            return { kind: "cli" as const, location: location.toString(), user: session.user }
          }
          return { kind: "session" as const, token, session, returnTo: login.returnTo }
        }).pipe(Effect.withSpan("SingleSignOn.completeLogin", { attributes: { provider: id } }))

      const startDevice: SingleSignOnShape["startDevice"] = (id) =>
        Effect.gen(function* () {
          const p = yield* providers.get(id)
          const { config, openid } = yield* oidc.configOf(p)
          if (!config.serverMetadata().device_authorization_endpoint)
            return yield* new BadRequest({
              message: `provider '${p.id}' offers no device authorization grant (its discovery document has no device_authorization_endpoint): \`gateway login\` opens a browser instead`
            })
          const started = yield* Effect.tryPromise({
            try: () => openid.initiateDeviceAuthorization(config, { scope: scopeOf(p) }),
            catch: (e) => refusal(`provider '${p.id}' device authorization refused`, e, [p.clientSecret])
          })
          const handle = randomToken(32)
          const interval = started.interval ?? 5
          const device: DeviceLogin = { deviceCode: started.device_code, interval }
          yield* logins.put("device", p.id, handle, device, started.expires_in * 1000)
          return {
            handle,
            userCode: started.user_code,
            verificationUri: started.verification_uri,
            verificationUriComplete: started.verification_uri_complete ?? null,
            expiresAt: toIso(Date.now() + started.expires_in * 1000)!,
            interval
          }
        }).pipe(Effect.withSpan("SingleSignOn.startDevice", { attributes: { provider: id } }))

      const pollDevice: SingleSignOnShape["pollDevice"] = (id, handle, client) =>
        Effect.gen(function* () {
          const found = yield* logins.read<DeviceLogin>("device", handle)
          if (found === undefined || found.providerId !== id)
            return yield* new BadRequest({
              message: "handle: no device sign-in is waiting under it (unknown, finished or expired): start again"
            })
          const p = yield* providers.get(id)
          const { config, openid } = yield* oidc.configOf(p)
          const answer = yield* Effect.either(
            Effect.tryPromise({
              try: () =>
                openid.genericGrantRequest(config, "urn:ietf:params:oauth:grant-type:device_code", { device_code: found.data.deviceCode }),
              catch: (e) => e
            })
          )
          if (answer._tag === "Left") {
            const e = answer.left
            if (e instanceof openid.ResponseBodyError && (e.error === "authorization_pending" || e.error === "slow_down"))
              return { status: "pending" as const }
            yield* logins.remove(handle)
            return yield* refusal(`provider '${p.id}' device sign-in refused`, e, [p.clientSecret, found.data.deviceCode])
          }
          // One poll takes the session: the row goes first, so a second poll (here or in another process) cannot take it too.
          const taken = yield* logins.take<DeviceLogin>("device", handle)
          if (taken === undefined) return yield* new BadRequest({ message: "handle: this device sign-in was completed by another poll" })
          const user = yield* userOf(p, yield* oidc.claimsOf({ config, openid }, answer.right))
          const { session } = yield* openSession(user, p, client)
          return { status: "complete" as const, session }
        }).pipe(Effect.withSpan("SingleSignOn.pollDevice", { attributes: { provider: id } }))

      const cliToken: SingleSignOnShape["cliToken"] = (code, verifier) =>
        Effect.gen(function* () {
          const found = yield* logins.read<Handoff>("cli", code)
          if (found === undefined || !safeEqual(found.data.challenge, challengeOf(verifier)))
            return yield* new BadRequest({
              message: "code: no sign-in is waiting for this CLI under it (unknown, taken, expired, or another CLI's)"
            })
          const taken = yield* logins.take<Handoff>("cli", code)
          if (taken === undefined) return yield* new BadRequest({ message: "code: this sign-in was taken already" })
          const { challenge: _, ...session } = taken.data
          return session
        })

      const setPasswordLogin: SingleSignOnShape["setPasswordLogin"] = (enabled, actor) =>
        Effect.gen(function* () {
          if (!enabled) {
            const list = yield* providers.all
            if (list.length === 0)
              return yield* new BadRequest({
                message: "password sign-in stays on: no single sign-on provider is configured (POST /api/auth/oidc/config/providers)"
              })
            const ssoAdmins = (yield* directory.listUsers).filter(
              (u) =>
                u.role === "admin" &&
                !u.disabled &&
                u.oidcProvider !== null &&
                u.lastLoginAt !== null &&
                list.some((p) => p.id === u.oidcProvider)
            )
            if (ssoAdmins.length === 0)
              return yield* new BadRequest({
                message:
                  "password sign-in stays on: no enabled admin has signed in through single sign-on yet, so turning it off could lock every admin out; sign in once through a provider as an admin first"
              })
          }
          yield* kv.set(AUTH_NAMESPACE, PASSWORD_LOGIN_KEY, enabled ? "on" : "off")
          audit(actor, enabled ? "password_login.on" : "password_login.off", null)
          return enabled
        })

      return {
        providers,
        publicList: Effect.map(providers.all, (list) => ({ providers: list.map((p) => ({ id: p.id, name: p.name })) })),
        beginLogin,
        completeLogin,
        startDevice,
        pollDevice,
        cliToken,
        passwordLogin: passwordLoginEnabled(kv),
        setPasswordLogin,
        create: (input, actor) => Effect.tap(providers.create(input), (p) => Effect.sync(() => audit(actor, "oidc_provider.create", p.id))),
        update: (id, patch, actor) =>
          Effect.tap(providers.update(id, patch), (p) => Effect.sync(() => audit(actor, "oidc_provider.update", p.id))),
        remove: (id, actor) => Effect.tap(providers.remove(id), (p) => Effect.sync(() => audit(actor, "oidc_provider.remove", p.id)))
      } satisfies SingleSignOnShape
    })
  )
}
