import * as CliConfig from "@effect/cli/CliConfig"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { cli } from "../src/cli/app.js"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { Directory } from "../src/services/teams/Directory.js"
import { call, startGateway, type TestGateway, tempDir } from "./support/gateway.js"
import { ProviderBrowser, type StartedOidcProvider, startOidcProvider } from "./support/oidcProvider.js"

const ADMIN = "gwk_sso_cli_admin_key_0123456789abcd"
const admin = { authorization: `Bearer ${ADMIN}` }

let op: StartedOidcProvider
let gw: TestGateway
let configDir: string

/**
 * `gateway <args>` run in this process (the same command tree as bin/gateway), its stdout and
 * stderr lines captured; `onStderr` sees each line as it is written (the device code, the address).
 */
const gateway = async (args: ReadonlyArray<string>, onStderr: (line: string) => void = () => {}) => {
  const out: Array<string> = []
  const err: Array<string> = []
  const log = console.log
  const error = console.error
  console.log = (...a: Array<unknown>) => void out.push(a.map(String).join(" "))
  console.error = (...a: Array<unknown>) => {
    const line = a.map(String).join(" ")
    err.push(line)
    onStderr(line)
  }
  try {
    await Effect.runPromise(
      cli(["node", "gateway", ...args]).pipe(Effect.provide(CliConfig.layer({ showBuiltIns: false })), Effect.provide(NodeContext.layer))
    )
  } finally {
    console.log = log
    console.error = error
  }
  const code = process.exitCode ?? 0
  process.exitCode = undefined
  return { code, stdout: out.join("\n"), stderr: err.join("\n") }
}

beforeAll(async () => {
  op = await startOidcProvider()
  gw = await startGateway()
  op.redirectUris.push(`${gw.url}/api/auth/oidc/corp/callback`)
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  await gw.run(Effect.flatMap(Directory, (d) => d.createTeam({ name: "Engineering" })))
  const created = await call(`${gw.url}/api/auth/oidc/config/providers`, {
    headers: admin,
    body: {
      id: "corp",
      name: "Corp SSO",
      issuer: op.issuer,
      clientId: op.clientId,
      clientSecret: op.clientSecret,
      scopes: ["openid", "profile", "email", "groups"],
      mappings: [{ group: "engineering", team: "Engineering", role: "member" }]
    }
  })
  expect(created.status).toBe(201)
  configDir = tempDir("gw-sso-cli-")
  process.env.GATEWAY_CONFIG_DIR = configDir
  process.env.GATEWAY_NO_BROWSER = "1"
}, 60_000)

afterEach(() => {
  process.exitCode = undefined
})

afterAll(async () => {
  delete process.env.GATEWAY_CONFIG_DIR
  delete process.env.GATEWAY_NO_BROWSER
  await gw?.close()
  await op?.close()
})

const sessionsFile = () => path.join(configDir, "sessions.json")

describe("gateway login", () => {
  it("signs in through the provider's device grant, approved at the provider, and keeps the session 0600", async () => {
    let approval: Promise<void> | undefined
    const result = await gateway(["login", "--url", gw.url], (line) => {
      const m = /open (\S+) on any device.*\(code (\S+),/.exec(line)
      if (m && approval === undefined) {
        const verification = new URL(m[1]!)
        approval = new ProviderBrowser().approveDevice(`${verification.origin}${verification.pathname}`, m[2]!, "alice")
      }
    })
    await approval
    expect(result.stderr).toMatch(/on any device/)
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/signed in to .* as alice@example\.test \(member\) through Corp SSO/)

    const stat = fs.statSync(sessionsFile())
    expect(stat.mode & 0o777).toBe(0o600)
    const kept = JSON.parse(fs.readFileSync(sessionsFile(), "utf8"))[gw.url]
    expect(kept).toMatchObject({ provider: "corp", user: { email: "alice@example.test", role: "member" } })

    // The session is the member's: it creates the member's own key through the management API.
    const key = await call(`${gw.url}/api/keys`, {
      headers: { cookie: `gw_session=${kept.session}`, "x-csrf-token": kept.csrfToken },
      body: { name: "alice-laptop" }
    })
    expect(key.status).toBe(201)
    expect(key.body.secret).toMatch(/^gwk_/)
  }, 60_000)

  it("the member signed in creates their own key with gateway keys add --url, without an admin key", async () => {
    const result = await gateway(["keys", "add", "--url", gw.url, "--name", "alice-cli", "--json"])
    expect(result.code).toBe(0)
    const created = JSON.parse(result.stdout)
    expect(created.secret).toMatch(/^gwk_/)
    const alice = await gw.run(
      Effect.flatMap(Directory, (d) =>
        Effect.zipRight(
          d.refresh,
          Effect.sync(() => d.findUser("alice@example.test"))
        )
      )
    )
    expect(created.userId).toBe(alice!.id)
    // Without a session and without a key, the remote command says how to sign in.
    const elsewhere = await gateway(["keys", "add", "--url", "http://127.0.0.1:9", "--name", "x"])
    expect(elsewhere.code).toBe(1)
    expect(elsewhere.stderr).toMatch(/gateway login/)
  })

  it("signs in through a browser on this machine with --browser (the loopback hand-off)", async () => {
    let browsing: Promise<void> | undefined
    const result = await gateway(["login", "--url", gw.url, "--browser", "--json"], (line) => {
      const m = /open (\S+) in a browser/.exec(line)
      if (m && browsing === undefined) {
        browsing = (async () => {
          const browser = new ProviderBrowser()
          const back = await browser.signIn(m[1]!, "alice", `${gw.url}/api/auth/oidc/corp/callback`)
          const toCli = await fetch(back, { redirect: "manual" })
          expect(toCli.status).toBe(302)
          const loopback = toCli.headers.get("location")!
          expect(loopback).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback\?code=/)
          expect(toCli.headers.getSetCookie().join("")).not.toContain("gw_session")
          expect((await fetch(loopback)).status).toBe(200)
        })()
      }
    })
    await browsing
    expect(result.code).toBe(0)
    expect(JSON.parse(result.stdout)).toMatchObject({ provider: "corp", user: { email: "alice@example.test" } })
  }, 60_000)

  it("a wrong CLI secret cannot take a hand-off", async () => {
    const res = await call(`${gw.url}/api/auth/oidc/cli/token`, { body: { code: "nope", verifier: "nope" } })
    expect(res.status).toBe(400)
    expect(res.body.message).toMatch(/no sign-in is waiting for this CLI/)
  })

  it("names the providers when --provider names none of them", async () => {
    const result = await gateway(["login", "--url", gw.url, "--provider", "nope"])
    expect(result.code).toBe(1)
    expect(result.stderr).toMatch(/no provider 'nope'.*corp \(Corp SSO\)/)
  })

  it("gateway logout ends the session at the gateway and forgets it here", async () => {
    const kept = JSON.parse(fs.readFileSync(sessionsFile(), "utf8"))[gw.url]
    const before = await call(`${gw.url}/api/auth/session`, { headers: { cookie: `gw_session=${kept.session}` } })
    expect(before.body.authenticated).toBe(true)
    const result = await gateway(["logout", "--url", gw.url])
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/signed out of/)
    const after = await call(`${gw.url}/api/auth/session`, { headers: { cookie: `gw_session=${kept.session}` } })
    expect(after.body.authenticated).toBe(false)
    expect(JSON.parse(fs.readFileSync(sessionsFile(), "utf8"))[gw.url]).toBeUndefined()
  })

  it("a provider without the device grant signs in through the browser on this machine, unasked", async () => {
    const plain = await startOidcProvider({ clientId: "gateway-plain", deviceFlow: false })
    try {
      plain.redirectUris.push(`${gw.url}/api/auth/oidc/plain/callback`)
      const created = await call(`${gw.url}/api/auth/oidc/config/providers`, {
        headers: admin,
        body: {
          id: "plain",
          name: "Plain IdP",
          issuer: plain.issuer,
          clientId: plain.clientId,
          clientSecret: plain.clientSecret,
          scopes: ["openid", "profile", "email", "groups"],
          mappings: [{ group: "engineering", role: "member" }]
        }
      })
      expect(created.status).toBe(201)
      const device = await call(`${gw.url}/api/auth/oidc/plain/device`, { method: "POST" })
      expect(device.status).toBe(400)
      expect(device.body.message).toMatch(/offers no device authorization grant/)
      let browsing: Promise<void> | undefined
      const result = await gateway(["login", "--url", gw.url, "--provider", "plain"], (line) => {
        const m = /open (\S+) in a browser/.exec(line)
        if (m && browsing === undefined) {
          browsing = (async () => {
            const back = await new ProviderBrowser().signIn(m[1]!, "alice", `${gw.url}/api/auth/oidc/plain/callback`)
            const toCli = await fetch(back, { redirect: "manual" })
            expect((await fetch(toCli.headers.get("location")!)).status).toBe(200)
          })()
        }
      })
      await browsing
      expect(result.code).toBe(0)
      expect(result.stdout).toMatch(/as alice@example\.test \(member\) through Plain IdP/)
    } finally {
      await plain.close()
    }
  })
})
