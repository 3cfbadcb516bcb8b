import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { type StartedOidcProvider, startOidcProvider } from "./support/oidcProvider.js"

// An admin configures providers at /api/auth/oidc/providers, the path the login page reads its
// public list from (id and name only): POST there adds one, /api/auth/oidc/providers/{id} reads,
// changes and removes it, as /api/auth/oidc/config/providers does.

const ADMIN = "gwk_sso_paths_admin_key_0123456789ab"
const admin = { authorization: `Bearer ${ADMIN}` }

let op: StartedOidcProvider
let gw: TestGateway

beforeAll(async () => {
  op = await startOidcProvider()
  gw = await startGateway()
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
}, 60_000)

afterAll(async () => {
  await gw?.close()
  await op?.close()
})

describe("providers at /api/auth/oidc/providers", () => {
  it("an admin adds, reads, changes and removes a provider there; the public list stays id and name", async () => {
    const body = {
      id: "corp",
      name: "Corp SSO",
      issuer: op.issuer,
      clientId: op.clientId,
      clientSecret: op.clientSecret,
      scopes: ["openid", "profile", "email", "groups"],
      groupsClaim: "groups",
      mappings: [{ group: "engineering", role: "member" }]
    }
    const anonymous = await call(`${gw.url}/api/auth/oidc/providers`, { body })
    expect(anonymous.status).toBe(401)

    const created = await call(`${gw.url}/api/auth/oidc/providers`, { headers: admin, body })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({ id: "corp", name: "Corp SSO", source: "api" })
    expect(created.text).not.toContain(op.clientSecret)

    const pub = await call(`${gw.url}/api/auth/oidc/providers`)
    expect(pub.status).toBe(200)
    expect(pub.body).toEqual({ providers: [{ id: "corp", name: "Corp SSO" }] })

    const one = await call(`${gw.url}/api/auth/oidc/providers/corp`, { headers: admin })
    expect(one.status).toBe(200)
    expect(one.body).toMatchObject({ id: "corp", issuer: op.issuer, clientId: op.clientId })
    expect(one.text).not.toContain(op.clientSecret)
    expect((await call(`${gw.url}/api/auth/oidc/providers/corp`)).status).toBe(401)

    const renamed = await call(`${gw.url}/api/auth/oidc/providers/corp`, { method: "PATCH", headers: admin, body: { name: "Corp" } })
    expect(renamed.status).toBe(200)
    expect((await call(`${gw.url}/api/auth/oidc/providers`)).body).toEqual({ providers: [{ id: "corp", name: "Corp" }] })

    const removed = await call(`${gw.url}/api/auth/oidc/providers/corp`, { method: "DELETE", headers: admin })
    expect(removed.status).toBe(200)
    expect((await call(`${gw.url}/api/auth/oidc/providers`)).body).toEqual({ providers: [] })
  })
})
