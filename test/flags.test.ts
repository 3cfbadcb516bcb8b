import * as Effect from "effect/Effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { FLAG_DEFINITIONS, isTruthy } from "../src/platform/flags/catalog.js"
import { FeatureFlags } from "../src/platform/flags/FeatureFlags.js"
import { queryDb } from "./support/db.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

const ADMIN = "gwk_flags_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

/** The 34 flags of the specification (document 2). */
const SPEC_FLAGS = [
  "REQUIRE_API_KEY",
  "INPUT_SANITIZER_ENABLED",
  "INJECTION_GUARD_MODE",
  "PII_REDACTION_ENABLED",
  "PII_RESPONSE_SANITIZATION",
  "PII_RESPONSE_SANITIZATION_MODE",
  "OUTBOUND_SSRF_GUARD_ENABLED",
  "ENABLE_TLS_FINGERPRINT",
  "FREE_PROXY_ENABLED",
  "PROXY_AUTO_SELECT_ENABLED",
  "GATEWAY_CONTROL_PLANE_PROXY_DIRECT_FALLBACK",
  "MITM_DISABLE_TLS_VERIFY",
  "GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS",
  "GATEWAY_ALLOW_LOCAL_PROVIDER_URLS",
  "ENABLE_CC_COMPATIBLE_PROVIDER",
  "TOOL_POLICY_MODE",
  "RATE_LIMIT_AUTO_ENABLE",
  "ALLOW_MULTI_CONNECTIONS_PER_COMPAT_NODE",
  "GATEWAY_MCP_ENFORCE_SCOPES",
  "GATEWAY_MCP_COMPRESS_DESCRIPTIONS",
  "GATEWAY_ENABLE_RUNTIME_BACKGROUND_TASKS",
  "GATEWAY_DISABLE_BACKGROUND_SERVICES",
  "GATEWAY_RTK_TRUST_PROJECT_FILTERS",
  "GATEWAY_ENABLE_LIVE_WS",
  "GATEWAY_UPSTREAM_WS_ENABLED",
  "GATEWAY_EMERGENCY_FALLBACK",
  "MODEL_CATALOG_INCLUDE_NAMES",
  "LEADERBOARD_ELO_SYNC_ENABLED",
  "CLI_COMPAT_ALL",
  "MODEL_ALIAS_COMPAT_ENABLED",
  "PRICING_SYNC_ENABLED",
  "GATEWAY_DISABLE_LOCAL_HEALTHCHECK",
  "GATEWAY_DISABLE_TOKEN_HEALTHCHECK",
  "SKILLS_SANDBOX_NETWORK_ENABLED"
]

const RESTART_FLAGS = [
  "ENABLE_TLS_FINGERPRINT",
  "MITM_DISABLE_TLS_VERIFY",
  "ENABLE_CC_COMPATIBLE_PROVIDER",
  "ALLOW_MULTI_CONNECTIONS_PER_COMPAT_NODE",
  "GATEWAY_DISABLE_BACKGROUND_SERVICES",
  "GATEWAY_ENABLE_LIVE_WS",
  "CLI_COMPAT_ALL"
]

let gw: TestGateway

beforeAll(async () => {
  gw = await startGateway({
    env: { TOOL_POLICY_MODE: "warn", PII_REDACTION_ENABLED: "yes", GATEWAY_EMERGENCY_FALLBACK: "", INJECTION_GUARD_MODE: "bogus" }
  })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})
afterAll(() => gw?.close())

const list = async () => (await call(`${gw.url}/api/settings/feature-flags`, { headers: admin })).body
const flag = async (key: string) => (await list()).flags.find((f: any) => f.key === key)
const put = (body: unknown) => call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body, headers: admin })

describe("feature flag catalog", () => {
  it("holds the 34 flags of the specification plus 5 of the gateway's own", () => {
    const keys = FLAG_DEFINITIONS.map((d) => d.key)
    expect(keys).toHaveLength(39)
    expect(new Set(keys).size).toBe(39)
    for (const k of SPEC_FLAGS) expect(keys).toContain(k)
    expect(
      FLAG_DEFINITIONS.filter((d) => d.requiresRestart)
        .map((d) => d.key)
        .sort()
    ).toEqual([...RESTART_FLAGS].sort())
  })

  it("warns at start about a boolean flag whose environment value is not a boolean", async () => {
    const other = await startGateway({ env: { REQUIRE_API_KEY: "on" } })
    try {
      const warning = other.logs.find((l) => l.level === "WARN" && l.message.includes("REQUIRE_API_KEY=on"))
      expect(warning?.message).toContain("counts as off")
    } finally {
      await other.close()
    }
  })

  it("treats true, 1 and yes as enabled, anything else as disabled", () => {
    expect(["true", "1", "yes", "TRUE", " Yes "].map(isTruthy)).toEqual([true, true, true, true, true])
    expect(["false", "0", "no", "on", "", "2"].map(isTruthy)).toEqual([false, false, false, false, false, false])
  })
})

describe("GET/PUT/DELETE /api/settings/feature-flags", () => {
  it("answers 401 without management authentication", async () => {
    expect((await call(`${gw.url}/api/settings/feature-flags`)).status).toBe(401)
    expect(
      (await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "REQUIRE_API_KEY", value: "true" } })).status
    ).toBe(401)
    expect((await call(`${gw.url}/api/settings/feature-flags`, { method: "DELETE" })).status).toBe(401)
  })

  it("lists every flag with its fields and a summary", async () => {
    const body = await list()
    expect(body.flags).toHaveLength(39)
    const f = body.flags.find((x: any) => x.key === "INJECTION_GUARD_MODE")
    expect(f).toMatchObject({
      category: "security",
      type: "enum",
      enumValues: ["off", "warn", "block", "redact"],
      defaultValue: "off",
      requiresRestart: false
    })
    for (const key of [
      "key",
      "label",
      "description",
      "category",
      "type",
      "enumValues",
      "defaultValue",
      "effectiveValue",
      "source",
      "requiresRestart",
      "warningLevel"
    ]) {
      expect(f).toHaveProperty(key)
    }
    const s = body.summary
    expect(s.total).toBe(39)
    expect(s.active + s.inactive).toBe(39)
    expect(s.overriddenByEnv).toBe(2)
  })

  it("resolves db override > environment (when non-empty) > default", async () => {
    expect(await flag("TOOL_POLICY_MODE")).toMatchObject({ effectiveValue: "warn", source: "env" })
    expect(await flag("PII_REDACTION_ENABLED")).toMatchObject({ effectiveValue: "yes", source: "env" })
    // set but empty: ignored
    expect(await flag("GATEWAY_EMERGENCY_FALLBACK")).toMatchObject({ effectiveValue: "true", source: "default" })
    // an invalid enum value in the environment is ignored
    expect(await flag("INJECTION_GUARD_MODE")).toMatchObject({ effectiveValue: "off", source: "default" })

    const set = await put({ key: "TOOL_POLICY_MODE", value: "block" })
    expect(set.status).toBe(200)
    expect(set.body).toEqual({
      key: "TOOL_POLICY_MODE",
      effectiveValue: "block",
      source: "db",
      previousValue: "warn",
      previousSource: "env",
      requiresRestart: false
    })
    expect(await gw.run(Effect.flatMap(FeatureFlags, (f) => f.value("TOOL_POLICY_MODE")))).toBe("block")

    const removed = await put({ key: "TOOL_POLICY_MODE" })
    expect(removed.body).toMatchObject({ effectiveValue: "warn", source: "env", previousValue: "block", previousSource: "db" })
  })

  it("persists overrides in the kv table under namespace feature_flags", async () => {
    await put({ key: "PRICING_SYNC_ENABLED", value: "1" })
    const rows = queryDb(gw.dataDir, "SELECT value FROM kv WHERE namespace = 'feature_flags' AND key = 'PRICING_SYNC_ENABLED'")
    expect(rows).toEqual([{ value: "1" }])
    expect(await gw.run(Effect.flatMap(FeatureFlags, (f) => f.enabled("PRICING_SYNC_ENABLED")))).toBe(true)
  })

  it("rejects unknown keys and out-of-range values with 400", async () => {
    const unknown = await put({ key: "NO_SUCH_FLAG", value: "true" })
    expect(unknown.status).toBe(400)
    expect(unknown.body.message).toContain("NO_SUCH_FLAG")
    const badEnum = await put({ key: "INJECTION_GUARD_MODE", value: "nuke" })
    expect(badEnum.status).toBe(400)
    expect(badEnum.body.message).toContain("off, warn, block, redact")
    const badBool = await put({ key: "REQUIRE_API_KEY", value: "maybe" })
    expect(badBool.status).toBe(400)
    const noKey = await put({ value: "true" })
    expect(noKey.status).toBe(400)
  })

  it("keeps a restart flag's start-up value in effect until restart, and says so", async () => {
    const set = await put({ key: "GATEWAY_ENABLE_LIVE_WS", value: "false" })
    expect(set.body).toMatchObject({ effectiveValue: "false", source: "db", requiresRestart: true })
    expect(await flag("GATEWAY_ENABLE_LIVE_WS")).toMatchObject({ effectiveValue: "false", pendingRestart: true })
    expect(await gw.run(Effect.flatMap(FeatureFlags, (f) => f.enabled("GATEWAY_ENABLE_LIVE_WS")))).toBe(true)

    // After a restart on the same database, the override is in effect.
    const restarted = await startGateway({ dataDir: gw.dataDir })
    try {
      expect(await restarted.run(Effect.flatMap(FeatureFlags, (f) => f.enabled("GATEWAY_ENABLE_LIVE_WS")))).toBe(false)
    } finally {
      await restarted.close()
    }
  })

  it("DELETE clears every database override and reports how many", async () => {
    await put({ key: "REQUIRE_API_KEY", value: "false" })
    const before = (await list()).summary.overriddenByDb
    expect(before).toBeGreaterThan(0)
    const cleared = await call(`${gw.url}/api/settings/feature-flags`, { method: "DELETE", headers: admin })
    expect(cleared.status).toBe(200)
    expect(cleared.body.cleared).toBe(before)
    expect(cleared.body.message).toContain(String(before))
    expect((await list()).summary.overriddenByDb).toBe(0)
  })
})
