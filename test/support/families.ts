import * as Effect from "effect/Effect"
import { afterAll, beforeAll, beforeEach, expect } from "vitest"
import { ApiKeys } from "../../src/services/auth/ApiKeys.js"
import { type Family, FakeUpstream } from "./fakeUpstream.js"
import { call, startGateway, type TestGateway } from "./gateway.js"

/**
 * One connection per upstream family on a fake upstream, named so that `<name>/m1` reaches that
 * family: `up-chat`, `up-resp`, `up-anth`, `up-gem`, `up-oll`.
 */
export const FAMILIES: ReadonlyArray<{ readonly family: Family; readonly connection: Readonly<Record<string, unknown>> }> = [
  { family: "openai-chat", connection: { provider: "openai-compatible", name: "up-chat" } },
  { family: "openai-responses", connection: { provider: "openai-compatible", name: "up-resp", upstreamFormat: "openai-responses" } },
  { family: "anthropic", connection: { provider: "anthropic", name: "up-anth", apiKey: "sk-ant-upstream" } },
  { family: "gemini", connection: { provider: "gemini", name: "up-gem", apiKey: "gemini-upstream-key" } },
  { family: "ollama", connection: { provider: "ollama", name: "up-oll" } }
]

/** Adds `FAMILIES`' connections (default model `m1`) to the gateway at `url` through the management API. */
export const connectFamilies = async (url: string, up: FakeUpstream, adminKey: string): Promise<void> => {
  for (const { family, connection } of FAMILIES) {
    const res = await call(`${url}/api/providers`, {
      body: { ...connection, baseUrl: up.baseUrl(family), defaultModel: "m1" },
      headers: { authorization: `Bearer ${adminKey}` }
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
}

/**
 * A gateway and a fake upstream for the whole test file (started before the first test, closed
 * after the last), with `ADMIN` as an admin key and `keys` as inference keys, set up by `setup`
 * (default: `connectFamilies`); before each test the upstream forgets its requests and replies
 * and the gateway its resilience state. Read `gw` and `up` inside tests.
 */
export const gatewayForFile = (options: {
  readonly admin: string
  readonly keys?: ReadonlyArray<string>
  readonly env?: Record<string, string>
  readonly setup?: (gw: TestGateway, up: FakeUpstream) => Promise<void>
}): { readonly gw: TestGateway; readonly up: FakeUpstream } => {
  const holder = {} as { gw: TestGateway; up: FakeUpstream }
  beforeAll(async () => {
    holder.up = await FakeUpstream.start()
    holder.gw = await startGateway(options.env ? { env: options.env } : {})
    await holder.gw.run(
      Effect.flatMap(ApiKeys, (k) =>
        Effect.zipRight(
          k.create({ name: "admin", scopes: ["admin"] }, { secret: options.admin }),
          Effect.forEach(options.keys ?? [], (secret, i) => k.create({ name: `client-${i}` }, { secret }))
        )
      )
    )
    await (options.setup ?? ((gw, up) => connectFamilies(gw.url, up, options.admin)))(holder.gw, holder.up)
  })
  afterAll(async () => {
    await holder.gw?.close()
    await holder.up?.close()
  })
  beforeEach(async () => {
    holder.up.requests.length = 0
    holder.up.violations.length = 0
    holder.up.always({})
    await holder.gw.resetResilience()
  })
  return holder
}
