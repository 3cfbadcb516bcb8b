import * as Option from "effect/Option"
import { describe, expect, it } from "vitest"
import type { ApiKeyRecord } from "../src/services/auth/ApiKeys.js"
import type { KeysByHash } from "../src/services/auth/apiKeyRows.js"
import { makeKeyLookup } from "../src/services/auth/apiKeyLookup.js"
import { sha256 } from "../src/services/auth/password.js"

const record = (id: string, over: Partial<ApiKeyRecord> = {}): ApiKeyRecord => ({
  id,
  name: id,
  masked: "sk-…",
  scopes: ["inference"],
  enabled: true,
  createdAt: 0,
  expiresAt: null,
  lastUsedAt: null,
  rpm: null,
  tpm: null,
  shadow: [],
  mcpAllow: null,
  userId: null,
  teamId: null,
  maxQueueWaitSeconds: null,
  ...over
})

/** A lookup over keys the test replaces at will (as a write or another process's commit would). */
const lookupOver = (initial: Map<string, ApiKeyRecord>) => {
  let keys = initial
  const byHash = { peek: () => keys } as unknown as KeysByHash
  return { lookup: makeKeyLookup({ byHash, touched: new Map() }), replace: (next: Map<string, ApiKeyRecord>) => (keys = next) }
}

const idOf = (o: Option.Option<ApiKeyRecord> | undefined) => (o === undefined ? "cold" : Option.isSome(o) ? o.value.id : "none")

describe("key lookup: digests of presented secrets kept", () => {
  it("answers from the keys as they are now, whether the secret's digest was kept or not", () => {
    const { lookup, replace } = lookupOver(new Map([[sha256("sk-a"), record("a")]]))
    // Recognised, then again (the digest kept), and an unknown secret each time.
    expect(idOf(lookup.peekVerify("sk-a"))).toBe("a")
    expect(idOf(lookup.peekVerify("sk-a"))).toBe("a")
    expect(idOf(lookup.peekVerify("sk-b"))).toBe("none")
    expect(idOf(lookup.peekVerify("sk-b"))).toBe("none")
    // Disabled, then deleted, then added back: each read sees the change.
    replace(new Map([[sha256("sk-a"), record("a", { enabled: false })]]))
    expect(idOf(lookup.peekVerify("sk-a"))).toBe("none")
    replace(new Map())
    expect(idOf(lookup.peekVerify("sk-a"))).toBe("none")
    replace(new Map([[sha256("sk-a"), record("a2")]]))
    expect(idOf(lookup.peekVerify("sk-a"))).toBe("a2")
    // An unknown secret that becomes a key is found at once.
    replace(new Map([[sha256("sk-b"), record("b")]]))
    expect(idOf(lookup.peekVerify("sk-b"))).toBe("b")
    expect(idOf(lookup.peekVerify("sk-a"))).toBe("none")
  })

  it("finds every key among many more secrets than it keeps", () => {
    const keys = new Map<string, ApiKeyRecord>()
    for (let i = 0; i < 3000; i++) keys.set(sha256(`sk-${i}`), record(`k${i}`))
    const { lookup } = lookupOver(keys)
    for (let round = 0; round < 2; round++) for (let i = 0; i < 3000; i += 7) expect(idOf(lookup.peekVerify(`sk-${i}`))).toBe(`k${i}`)
  })
})
