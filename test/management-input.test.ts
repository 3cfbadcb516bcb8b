import * as HttpApi from "@effect/platform/HttpApi"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as AST from "effect/SchemaAST"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { ManagementApi } from "../src/management/api/Api.js"
import { call, rawCall, startGateway, type TestGateway } from "./support/gateway.js"

const ADMIN = "gwk_input_admin_key_0123456789abcdef"
const admin = { authorization: `Bearer ${ADMIN}` }

let gw: TestGateway

beforeAll(async () => {
  gw = await startGateway({ env: { INITIAL_PASSWORD: "correct horse battery" } })
  await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
})

afterAll(async () => {
  await gw?.close()
})

/** A raw request: the body and content type exactly as given. */
const raw = (method: string, path: string, contentType: string | undefined, body: string, headers: Record<string, string> = {}) =>
  rawCall(
    gw.url,
    method,
    path,
    {
      ...(contentType === undefined ? {} : { "content-type": contentType }),
      "content-length": String(Buffer.byteLength(body)),
      ...headers
    },
    body
  )

describe("management request bodies that are not JSON", () => {
  const wrongTypes: Array<[string, string]> = [
    ["multipart/form-data; boundary=x", '{"password":"correct horse battery"}'],
    ["multipart/form-data", "--x--\r\n"],
    ["multipart/form-data; boundary=x", '--x\r\nContent-Disposition: form-data; name="password"\r\n\r\ncorrect horse battery\r\n--x--\r\n'],
    ["application/x-www-form-urlencoded", "password=correct+horse+battery"],
    ["text/plain", '{"password":"correct horse battery"}'],
    ["garbage", '{"password":"correct horse battery"}'],
    [";;;", '{"password":"correct horse battery"}'],
    ["application/jsonx", '{"password":"correct horse battery"}']
  ]

  it("are refused with 415 UnsupportedMediaType on the unauthenticated login route", async () => {
    for (const [type, body] of wrongTypes) {
      const res = await raw("POST", "/api/auth/login", type, body)
      expect(res.status, type).toBe(415)
      expect(res.body, type).toMatchObject({ _tag: "UnsupportedMediaType" })
      expect(res.body.message, type).toContain("application/json")
      expect(res.text).not.toMatch(/\bat .*\.(js|ts):\d+/)
    }
  })

  it("are refused with 415 on authenticated routes of every method", async () => {
    const routes: Array<[string, string]> = [
      ["POST", "/api/keys"],
      ["POST", "/api/providers"],
      ["PUT", "/api/settings/feature-flags"],
      ["POST", "/api/combos"],
      ["PATCH", "/api/resilience"],
      ["POST", "/api/usage/budget"],
      ["DELETE", "/api/pricing"]
    ]
    for (const [method, path] of routes) {
      for (const [type, body] of wrongTypes.slice(0, 4)) {
        const res = await raw(method, path, type, body, admin)
        expect(res.status, `${method} ${path} ${type}`).toBe(415)
        expect(res.body._tag).toBe("UnsupportedMediaType")
      }
    }
  })

  it("with an empty body are read as bodiless: a 400 where a body is needed (the multipart parser waited or died on it)", async () => {
    for (const type of ["multipart/form-data", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded", "garbage"]) {
      const res = await raw("POST", "/api/auth/login", type, "")
      expect(res.status, `${type}: ${res.text}`).toBe(400)
      expect(res.body._tag).toBe("BadRequest")
      const keys = await raw("POST", "/api/keys", type, "", admin)
      expect(keys.status, `${type}: ${keys.text}`).toBe(400)
    }
  })

  it("still accepts JSON, with or without a charset, and a body without a content type", async () => {
    expect((await raw("POST", "/api/keys", "application/json", '{"name":"a"}', admin)).status).toBe(201)
    expect((await raw("POST", "/api/keys", "Application/JSON; charset=utf-8", '{"name":"b"}', admin)).status).toBe(201)
    expect((await raw("POST", "/api/keys", undefined, '{"name":"c"}', admin)).status).toBe(201)
    // Bodiless requests of any content type are not refused.
    expect((await raw("POST", "/api/auth/logout", "application/x-www-form-urlencoded", "")).status).toBe(200)
    expect((await raw("DELETE", "/api/keys/nonexistent", "text/plain", "", admin)).status).toBe(404)
    const login = await raw("POST", "/api/auth/login", "application/json", '{"password":"correct horse battery"}')
    expect(login.status).toBe(200)
  })
})

describe("management payloads with unknown fields", () => {
  it("are refused with a 400 naming the field, and nothing is created", async () => {
    const before = (await call(`${gw.url}/api/keys`, { headers: admin })).body.keys.length
    const key = await call(`${gw.url}/api/keys`, { body: { model: "x" }, headers: admin })
    expect(key.status).toBe(400)
    expect(key.body._tag).toBe("BadRequest")
    expect(key.body.message).toContain("model")
    const named = await call(`${gw.url}/api/keys`, { body: { name: "ok", scope: "admin" }, headers: admin })
    expect(named.status).toBe(400)
    expect(named.body.message).toContain("scope")
    expect((await call(`${gw.url}/api/keys`, { headers: admin })).body.keys.length).toBe(before)
  })

  it("are refused on every kind of management payload", async () => {
    const cases: Array<[string, string, unknown, string]> = [
      ["POST", "/api/auth/login", { password: "correct horse battery", username: "root" }, "username"],
      ["PUT", "/api/settings/feature-flags", { key: "REQUIRE_API_KEY", value: "false", persist: true }, "persist"],
      ["POST", "/api/providers", { provider: "openai-compatible", name: "x", baseUrl: "http://127.0.0.1:9/v1", region: "eu" }, "region"],
      ["POST", "/api/providers/validate", { provider: "openai", apiKey: "sk-x", dryRun: true }, "dryRun"],
      ["POST", "/api/combos", { name: "c", targets: ["a/b"], weights: [1] }, "weights"],
      ["PATCH", "/api/resilience", { providerBreaker: { apikey: { failureThreshold: 3, colour: "red" } } }, "colour"],
      ["POST", "/api/resilience/reset", { everything: true }, "everything"],
      ["POST", "/api/usage/budget", { apiKeyId: "k", dailyLimitUsd: 5, currency: "EUR" }, "currency"],
      ["PUT", "/api/pricing", { provider: "openai", model: "m", input: 1, output: 2, discount: 1 }, "discount"],
      ["DELETE", "/api/pricing", { provider: "openai", model: "m", all: true }, "all"]
    ]
    for (const [method, path, body, field] of cases) {
      const res = await call(`${gw.url}${path}`, { method, body, headers: admin })
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(400)
      expect(res.body._tag).toBe("BadRequest")
      expect(res.body.message, `${method} ${path}`).toContain(field)
    }
  })

  it("the same payloads without the unknown field still pass", async () => {
    expect(
      (
        await call(`${gw.url}/api/settings/feature-flags`, {
          method: "PUT",
          body: { key: "REQUIRE_API_KEY", value: "false" },
          headers: admin
        })
      ).status
    ).toBe(200)
    expect(
      (await call(`${gw.url}/api/settings/feature-flags`, { method: "PUT", body: { key: "REQUIRE_API_KEY" }, headers: admin })).status
    ).toBe(200)
    expect(
      (await call(`${gw.url}/api/keys`, { body: { name: "fine", scopes: ["inference"], expiresAt: null }, headers: admin })).status
    ).toBe(201)
  })
})

describe("every management payload schema", () => {
  it("refuses unknown fields (Schema.Unknown payloads are decoded strictly by their service)", () => {
    const lax: Array<string> = []
    const strict = (ast: AST.AST): boolean => {
      if (ast._tag === "UnknownKeyword") return true
      if (ast._tag === "Union") return ast.types.every(strict)
      // A body read leniently first (an absent body as `{}`) is as strict as what it becomes; a struct with
      // defaults is a transformation whose own parse options hold for both of its sides.
      if (ast._tag === "Transformation") return strictOptions(ast) || strict(ast.to)
      // A refined struct (a check across fields) is as strict as the struct.
      if (ast._tag === "Refinement" && Option.isNone(AST.getParseOptionsAnnotation(ast))) return strict(ast.from)
      return strictOptions(ast)
    }
    const strictOptions = (ast: AST.AST): boolean => {
      const options = AST.getParseOptionsAnnotation(ast)
      return Option.isSome(options) && options.value.onExcessProperty === "error"
    }
    HttpApi.reflect(ManagementApi, {
      onGroup: () => {},
      onEndpoint: ({ endpoint }) => {
        if (Option.isSome(endpoint.payloadSchema) && !strict(endpoint.payloadSchema.value.ast))
          lax.push(`${endpoint.method} ${endpoint.path}`)
      }
    })
    expect(lax).toEqual([])
  })
})
