import { expect } from "vitest"
import type { Family, FakeUpstream } from "./fakeUpstream.js"
import { call } from "./gateway.js"

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
    const res = await call(`${url}/api/providers`, { body: { ...connection, baseUrl: up.baseUrl(family), defaultModel: "m1" }, headers: { authorization: `Bearer ${adminKey}` } })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
}
