import * as Effect from "effect/Effect"
import * as http from "node:http"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/auth/ApiKeys.js"
import { startGateway, type TestGateway } from "./support/gateway.js"

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
  new Promise<{ status: number; body: any; text: string }>((resolve, reject) => {
    const u = new URL(path, gw.url)
    const req = http.request(
      {
        host: u.hostname,
        port: u.port,
        path: u.pathname,
        method,
        headers: { ...(contentType === undefined ? {} : { "content-type": contentType }), "content-length": Buffer.byteLength(body), ...headers }
      },
      (res) => {
        let text = ""
        res.setEncoding("utf8")
        res.on("data", (c) => (text += c))
        res.on("end", () => {
          let parsed: any
          try {
            parsed = JSON.parse(text)
          } catch {
            parsed = undefined
          }
          resolve({ status: res.statusCode ?? 0, body: parsed, text })
        })
      }
    )
    req.on("error", reject)
    req.end(body)
  })

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
