import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { Directory } from "../src/services/teams/Directory.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { claimsOf, ProviderBrowser, type StartedOidcProvider, startOidcProvider, withClaimChanged } from "./support/oidcProvider.js"

const ADMIN = "gwk_sso_admin_key_0123456789abcdef01"
const PASSWORD = "correct horse battery"
const admin = { authorization: `Bearer ${ADMIN}` }

let op: StartedOidcProvider
let op2: StartedOidcProvider
let gw: TestGateway
let gwB: TestGateway
let engineeringId: string

const callbackOf = (g: TestGateway, id: string) => `${g.url}/api/auth/oidc/${id}/callback`

/** A request without following redirects: status, Location, the gw_session cookie set, and the body. */
const raw = async (url: string, headers: Record<string, string> = {}) => {
  const res = await fetch(url, { redirect: "manual", headers })
  const cookie = res.headers
    .getSetCookie()
    .map((c) => /^gw_session=([^;]*)/.exec(c)?.[1])
    .find((v) => v !== undefined)
  return {
    status: res.status,
    location: res.headers.get("location"),
    cookie,
    setCookie: res.headers.getSetCookie(),
    text: await res.text()
  }
}

/** The sign-in as a browser makes it: the gateway's login, the provider's pages as `login`, then the callback on `back` (default the same gateway). */
const signIn = async (login: string, options: { provider?: string; at?: TestGateway; back?: TestGateway } = {}) => {
  const provider = options.provider ?? "corp"
  const at = options.at ?? gw
  const start = await raw(`${at.url}/api/auth/oidc/${provider}/login`)
  expect(start.status).toBe(302)
  const back = await new ProviderBrowser().signIn(start.location!, login, callbackOf(at, provider))
  const target = options.back ? back.replace(at.url, options.back.url) : back
  return { start, back: target, done: await raw(target, { accept: "text/html" }) }
}

const sessionOf = async (cookie: string, g: TestGateway = gw) =>
  (await call(`${g.url}/api/auth/session`, { headers: { cookie: `gw_session=${cookie}` } })).body

beforeAll(async () => {
  op = await startOidcProvider()
  op2 = await startOidcProvider({ clientId: "gateway-two" })
  gw = await startGateway({ env: { INITIAL_PASSWORD: PASSWORD } })
  // A second gateway process on the same database: a sign-in begun on one completes on the other.
  gwB = await startGateway({ dataDir: gw.dataDir, env: { INITIAL_PASSWORD: PASSWORD } })
  op.redirectUris.push(callbackOf(gw, "corp"), callbackOf(gwB, "corp"))
  op2.redirectUris.push(callbackOf(gw, "other"))
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  engineeringId = (await gw.run(Effect.flatMap(Directory, (d) => d.createTeam({ name: "Engineering" })))).id
}, 60_000)

afterAll(async () => {
  await gwB?.close()
  await gw?.close()
  await op?.close()
  await op2?.close()
})

describe("single sign-on providers", () => {
  it("an admin configures a provider: the secret sealed and masked, the public list only id and name", async () => {
    const created = await call(`${gw.url}/api/auth/oidc/config/providers`, {
      headers: admin,
      body: {
        id: "corp",
        name: "Corp SSO",
        issuer: op.issuer,
        clientId: op.clientId,
        clientSecret: op.clientSecret,
        scopes: ["openid", "profile", "email", "groups"],
        mappings: [
          { group: "engineering", team: "Engineering", role: "member" },
          { group: "gateway-admins", role: "admin" }
        ]
      }
    })
    expect(created.status).toBe(201)
    expect(created.body.clientSecret).not.toBe(op.clientSecret)
    expect(created.body.clientSecret).toContain("…")
    expect(created.body.source).toBe("api")

    const listed = await call(`${gw.url}/api/auth/oidc/config/providers`, { headers: admin })
    expect(listed.status).toBe(200)
    expect(listed.text).not.toContain(op.clientSecret)
    expect(listed.body.providers.map((p: { id: string }) => p.id)).toEqual(["corp"])

    const sealed = await gw.run(
      Effect.gen(function* () {
        const sql = yield* (yield* Effect.promise(() => import("@effect/sql/SqlClient"))).SqlClient
        return yield* sql<{ client_secret_enc: string }>`SELECT client_secret_enc FROM oidc_providers WHERE id = 'corp'`
      })
    )
    expect(sealed[0]!.client_secret_enc).not.toContain(op.clientSecret)

    const pub = await call(`${gw.url}/api/auth/oidc/providers`)
    expect(pub.status).toBe(200)
    expect(pub.body).toEqual({ providers: [{ id: "corp", name: "Corp SSO" }] })
  })

  it("refuses what it cannot use, with 4xx naming the problem", async () => {
    const bad = await call(`${gw.url}/api/auth/oidc/config/providers`, {
      headers: admin,
      body: { id: "x", name: "X", issuer: "http://idp.example.com", clientId: "c" }
    })
    expect(bad.status).toBe(400)
    expect(bad.body.message).toMatch(/not https/)
    const dup = await call(`${gw.url}/api/auth/oidc/config/providers`, {
      headers: admin,
      body: { id: "corp", name: "Again", issuer: op.issuer, clientId: "c" }
    })
    expect(dup.status).toBe(409)
    const reserved = await call(`${gw.url}/api/auth/oidc/config/providers`, {
      headers: admin,
      body: { id: "providers", name: "X", issuer: op.issuer, clientId: "c" }
    })
    expect(reserved.status).toBe(400)
    const mapping = await call(`${gw.url}/api/auth/oidc/config/providers`, {
      headers: admin,
      body: { id: "y", name: "Y", issuer: op.issuer, clientId: "c", mappings: [{ group: "g", role: "owner" }] }
    })
    expect(mapping.status).toBe(400)
    expect(mapping.body.message).toMatch(/role must be one of/)
    expect(
      (await call(`${gw.url}/api/auth/oidc/config/providers`, { body: { id: "z", name: "Z", issuer: op.issuer, clientId: "c" } })).status
    ).toBe(401)
    expect((await call(`${gw.url}/api/auth/oidc/nope/login`)).status).toBe(404)
  })

  it("a masked secret sent back keeps the stored one", async () => {
    const got = await call(`${gw.url}/api/auth/oidc/config/providers/corp`, { headers: admin })
    const patched = await call(`${gw.url}/api/auth/oidc/config/providers/corp`, {
      method: "PATCH",
      headers: admin,
      body: { name: "Corp SSO", clientSecret: got.body.clientSecret }
    })
    expect(patched.status).toBe(200)
    expect(patched.body.clientSecret).toBe(got.body.clientSecret)
  })
})

describe("signing in through a provider", () => {
  it("login redirects to the provider with PKCE (S256), state and nonce", async () => {
    const { location, status } = await raw(`${gw.url}/api/auth/oidc/corp/login`)
    expect(status).toBe(302)
    const u = new URL(location!)
    expect(`${u.origin}`).toBe(op.issuer)
    expect(u.searchParams.get("code_challenge_method")).toBe("S256")
    expect(u.searchParams.get("code_challenge")).toMatch(/^[A-Za-z0-9_-]{43}$/)
    expect(u.searchParams.get("state")).toBeTruthy()
    expect(u.searchParams.get("nonce")).toBeTruthy()
    expect(u.searchParams.get("client_id")).toBe(op.clientId)
    expect(u.searchParams.get("redirect_uri")).toBe(callbackOf(gw, "corp"))
    expect(u.searchParams.get("scope")).toBe("openid profile email groups")
  })

  it("the callback makes the user in the team its group names, with the mapped role, and opens a session", async () => {
    const { done, back } = await signIn("alice")
    expect(done.status).toBe(302)
    expect(done.location).toBe("/")
    expect(done.cookie).toBeTruthy()
    expect(done.setCookie.join(";")).toMatch(/HttpOnly/i)
    const session = await sessionOf(done.cookie!)
    expect(session.authenticated).toBe(true)

    const user = await gw.run(
      Effect.flatMap(Directory, (d) =>
        Effect.zipRight(
          d.refresh,
          Effect.sync(() => d.findUser("alice@example.test"))
        )
      )
    )
    expect(user).toMatchObject({
      email: "alice@example.test",
      name: "Alice Example",
      role: "member",
      oidcProvider: "corp",
      oidcSubject: "alice"
    })
    expect(user!.teams).toEqual([{ teamId: engineeringId, role: "member" }])

    // The session acts as alice, a member: configuring single sign-on is an admin's.
    const asAlice = { cookie: `gw_session=${done.cookie}`, "x-csrf-token": session.csrfToken }
    const refused = await call(`${gw.url}/api/auth/oidc/config/providers`, {
      headers: asAlice,
      body: { id: "mine", name: "Mine", issuer: op.issuer, clientId: "c" }
    })
    expect(refused.status).toBe(403)
    expect(refused.body.message).toMatch(/member/)

    // The same redirect again: its state was used.
    const again = await raw(back)
    expect(again.status).toBe(400)
    expect(again.text).toMatch(/state/)
  })

  it("a sign-in begun on one gateway completes on another process on the same database", async () => {
    const { done } = await signIn("alice", { back: gwB })
    expect(done.status).toBe(302)
    expect((await sessionOf(done.cookie!, gwB)).authenticated).toBe(true)
    expect((await sessionOf(done.cookie!, gw)).authenticated).toBe(true)
  })

  it("an unknown state is refused with a page saying why", async () => {
    const res = await raw(`${gw.url}/api/auth/oidc/corp/callback?code=abc&state=not-a-state`, { accept: "text/html" })
    expect(res.status).toBe(400)
    expect(res.text).toContain("Sign-in refused")
    expect(res.text).toMatch(/no sign-in is waiting under this state/)
    const json = await call(`${gw.url}/api/auth/oidc/corp/callback?code=abc&state=not-a-state`)
    expect(json.status).toBe(400)
    expect(json.body._tag).toBe("BadRequest")
  })

  it("an ID token with another nonce is refused", async () => {
    op.tamperIdToken = (idToken, { sign }) => sign({ ...claimsOf(idToken), nonce: "someone-elses-nonce" })
    try {
      const { done } = await signIn("alice")
      expect(done.status).toBe(400)
      expect(done.cookie).toBeUndefined()
      expect(done.text).toMatch(/nonce/)
    } finally {
      op.tamperIdToken = undefined
    }
  })

  it("an expired ID token is refused", async () => {
    const past = Math.floor(Date.now() / 1000) - 3600
    op.tamperIdToken = (idToken, { sign }) => sign({ ...claimsOf(idToken), iat: past - 60, exp: past })
    try {
      const { done } = await signIn("alice")
      expect(done.status).toBe(400)
      expect(done.cookie).toBeUndefined()
      expect(done.text).toMatch(/exp/)
    } finally {
      op.tamperIdToken = undefined
    }
  })

  it("an ID token from another issuer, or for another client, is refused though signed with the provider's key", async () => {
    for (const [claims, says] of [
      [{ iss: "https://someone-else.example" }, /iss/],
      [{ aud: "another-client" }, /aud/]
    ] as const) {
      op.tamperIdToken = (idToken, { sign }) => sign({ ...claimsOf(idToken), ...claims })
      try {
        const { done } = await signIn("alice")
        expect(done.status).toBe(400)
        expect(done.cookie).toBeUndefined()
        expect(done.text).toMatch(says)
      } finally {
        op.tamperIdToken = undefined
      }
    }
  })

  it("an ID token changed after signing (its signature no longer matches the JWKS) is refused", async () => {
    op.tamperIdToken = async (idToken) => withClaimChanged(idToken, "groups", ["gateway-admins"])
    try {
      const { done } = await signIn("alice")
      expect(done.status).toBe(400)
      expect(done.cookie).toBeUndefined()
      expect(done.text).toMatch(/signature/i)
    } finally {
      op.tamperIdToken = undefined
    }
  })

  it("a user whose groups map to nothing is refused with a page naming the groups", async () => {
    const { done } = await signIn("carol")
    expect(done.status).toBe(403)
    expect(done.text).toContain("sales")
    expect(done.cookie).toBeUndefined()
    const carol = await gw.run(
      Effect.flatMap(Directory, (d) =>
        Effect.zipRight(
          d.refresh,
          Effect.sync(() => d.findUser("carol@example.test"))
        )
      )
    )
    expect(carol).toBeUndefined()
  })

  it("an email at localhost cannot reach the first admin by linking", async () => {
    const { done } = await signIn("mallory")
    expect(done.status).toBe(403)
    expect(done.text).toContain("admin@localhost")
    expect(done.cookie).toBeUndefined()
  })

  it("a returnTo of another site is not followed", async () => {
    const start = await raw(`${gw.url}/api/auth/oidc/corp/login?returnTo=${encodeURIComponent("//evil.example/x")}`)
    const back = await new ProviderBrowser().signIn(start.location!, "alice", callbackOf(gw, "corp"))
    const done = await raw(back)
    expect(done.location).toBe("/")
  })

  it("sign-out ends the session", async () => {
    const { done } = await signIn("alice")
    const cookie = `gw_session=${done.cookie}`
    expect((await sessionOf(done.cookie!)).authenticated).toBe(true)
    const out = await call(`${gw.url}/api/auth/logout`, { method: "POST", headers: { cookie } })
    expect(out.status).toBe(200)
    expect((await sessionOf(done.cookie!)).authenticated).toBe(false)
  })
})

describe("password sign-in", () => {
  it("is turned off only once an admin has signed in through single sign-on, and then refuses the password", async () => {
    expect((await call(`${gw.url}/api/auth/password-login`)).body).toEqual({ enabled: true })
    const early = await call(`${gw.url}/api/auth/password-login`, { method: "PUT", headers: admin, body: { enabled: false } })
    expect(early.status).toBe(400)
    expect(early.body.message).toMatch(/no enabled admin has signed in through single sign-on/)

    const bob = await signIn("bob")
    expect(bob.done.status).toBe(302)
    const off = await call(`${gw.url}/api/auth/password-login`, { method: "PUT", headers: admin, body: { enabled: false } })
    expect(off.status).toBe(200)
    expect(off.body).toEqual({ enabled: false })
    expect((await call(`${gw.url}/api/auth/password-login`)).body).toEqual({ enabled: false })

    const login = await call(`${gw.url}/api/auth/login`, { body: { password: PASSWORD } })
    expect(login.status).toBe(403)
    expect(login.body.message).toMatch(/password sign-in is turned off/)
    // Single sign-on still signs in, and the admin key still works.
    expect((await signIn("alice")).done.status).toBe(302)
    expect((await call(`${gw.url}/api/auth/password-login`, { method: "PUT", headers: admin, body: { enabled: true } })).status).toBe(200)
    expect((await call(`${gw.url}/api/auth/login`, { body: { password: PASSWORD } })).status).toBe(200)
  })
})

describe("several providers", () => {
  it("each signs in through its own issuer", async () => {
    const created = await call(`${gw.url}/api/auth/oidc/config/providers`, {
      headers: admin,
      body: {
        id: "other",
        name: "Other IdP",
        issuer: op2.issuer,
        clientId: op2.clientId,
        clientSecret: op2.clientSecret,
        scopes: ["openid", "email", "profile", "groups"],
        mappings: [{ group: "engineering", team: engineeringId, role: "team-admin" }]
      }
    })
    expect(created.status).toBe(201)
    const pub = await call(`${gw.url}/api/auth/oidc/providers`)
    expect(pub.body.providers).toEqual([
      { id: "corp", name: "Corp SSO" },
      { id: "other", name: "Other IdP" }
    ])
    const start = await raw(`${gw.url}/api/auth/oidc/other/login`)
    expect(new URL(start.location!).origin).toBe(op2.issuer)
    const { done } = await signIn("alice", { provider: "other" })
    expect(done.status).toBe(302)
    expect((await sessionOf(done.cookie!)).authenticated).toBe(true)
    // A callback of one provider does not take another's state.
    const crossed = await raw(`${gw.url}/api/auth/oidc/other/login`)
    const state = new URL(crossed.location!).searchParams.get("state")!
    expect((await raw(`${gw.url}/api/auth/oidc/corp/callback?code=x&state=${state}`)).status).toBe(400)
  })

  it("a provider removed is gone from the login page", async () => {
    const removed = await call(`${gw.url}/api/auth/oidc/config/providers/other`, { method: "DELETE", headers: admin })
    expect(removed.status).toBe(200)
    expect((await call(`${gw.url}/api/auth/oidc/providers`)).body.providers.map((p: { id: string }) => p.id)).toEqual(["corp"])
  })
})

describe("GATEWAY_OIDC_PROVIDERS", () => {
  it("lists read-only providers from the environment, their secret masked", async () => {
    const g = await startGateway({
      env: {
        GATEWAY_OIDC_PROVIDERS: JSON.stringify([
          { id: "env-idp", name: "From env", issuer: op.issuer, clientId: op.clientId, clientSecret: op.clientSecret },
          { id: "broken", issuer: "not a url" }
        ])
      }
    })
    try {
      await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
      expect((await call(`${g.url}/api/auth/oidc/providers`)).body).toEqual({ providers: [{ id: "env-idp", name: "From env" }] })
      const listed = await call(`${g.url}/api/auth/oidc/config/providers`, { headers: admin })
      expect(listed.body.providers[0]).toMatchObject({ id: "env-idp", source: "env", scopes: ["openid", "profile", "email"] })
      expect(listed.text).not.toContain(op.clientSecret)
      const patch = await call(`${g.url}/api/auth/oidc/config/providers/env-idp`, { method: "PATCH", headers: admin, body: { name: "x" } })
      expect(patch.status).toBe(403)
      expect(patch.body.message).toMatch(/GATEWAY_OIDC_PROVIDERS/)
      expect(g.logs.some((l) => l.message.includes("GATEWAY_OIDC_PROVIDERS[1] skipped"))).toBe(true)
    } finally {
      await g.close()
    }
  })
})
