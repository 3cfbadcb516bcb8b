import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { badRequestOf, decodeOrBadRequest, describeParseError } from "../src/domain/parse.js"
import { RequestDecodeError } from "../src/upstream/formats/format.js"
import { FORMATS } from "../src/upstream/formats/registry.js"
import { decodeFailure, errorBody } from "../src/kernel/errors.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/** One formatter per plane turns a request that does not decode into the client's 400. */

describe("the inference plane's decode failure", () => {
  it("is a 400 in each client's own error shape, naming the field of a RequestDecodeError", () => {
    const bodies = Object.fromEntries(
      Object.values(FORMATS).map((f) => {
        const e = decodeFailure(f, new RequestDecodeError("messages must be an array", "messages"))
        expect(e).toMatchObject({ status: 400, kind: "invalid_request", message: "messages must be an array", param: "messages" })
        return [f.id, errorBody(e, f)]
      })
    )
    expect(bodies).toEqual({
      "openai-chat": { error: { message: "messages must be an array", type: "invalid_request_error", code: null, param: "messages" } },
      "openai-responses": { error: { message: "messages must be an array", type: "invalid_request_error", code: null, param: "messages" } },
      anthropic: { type: "error", error: { type: "invalid_request_error", message: "messages must be an array" } },
      gemini: { error: { code: 400, message: "messages must be an array", status: "INVALID_ARGUMENT" } },
      ollama: { error: "messages must be an array" }
    })
  })

  it("says the request could not be read when a decoder threw anything else", () => {
    const e = decodeFailure(FORMATS["openai-chat"], new TypeError("Cannot read properties of null"))
    expect(e).toMatchObject({
      status: 400,
      kind: "invalid_request",
      message: "the request could not be read: Cannot read properties of null",
      param: null
    })
    expect(decodeFailure(FORMATS.ollama, "thrown text").message).toBe("the request could not be read: thrown text")
  })
})

describe("the management plane's decode failure", () => {
  const Payload = Schema.Struct({ limit: Schema.Union(Schema.Number, Schema.Literal("none")), name: Schema.String })

  it("is one line per field, its first problem, as a BadRequest", async () => {
    const failed = Schema.decodeUnknownEither(Payload, { errors: "all" })({ limit: "lots", name: 7 })
    if (Either.isRight(failed)) throw new Error("expected a decode failure")
    expect(describeParseError(failed.left)).toBe('limit: expected number, actual "lots"; name: expected string, actual 7')
    expect(badRequestOf(failed.left)).toMatchObject({ _tag: "BadRequest", message: describeParseError(failed.left) })
    const viaHelper = await Effect.runPromise(Effect.flip(decodeOrBadRequest(Payload)({ limit: "lots", name: "x" })))
    expect(viaHelper).toMatchObject({ _tag: "BadRequest", message: 'limit: expected number, actual "lots"' })
  })

  describe("over HTTP", () => {
    const ADMIN = "gwk_decode_admin_key_0123456789abcdef"
    const admin = { authorization: `Bearer ${ADMIN}` }
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startGateway()
      await gw.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
    })
    afterAll(() => gw.close())

    it("words a field's problem alike whether a handler or the HttpApi decoded the payload", async () => {
      // Decoded by the budget service (the HttpApi's payload schema leaves the level it is set on to it).
      const budget = await call(`${gw.url}/api/usage/budget`, { body: { dailyLimitUsd: 5 }, headers: admin })
      expect(budget.status).toBe(400)
      expect(budget.body).toEqual({
        _tag: "BadRequest",
        message: "name the level the limit is on: one of apiKeyId, teamId, userId or organisation: true"
      })
      // Decoded by the HttpApi from the pricing endpoint's payload schema.
      const price = await call(`${gw.url}/api/pricing`, {
        method: "PUT",
        body: { provider: "openai", model: "m", input: "cheap" },
        headers: admin
      })
      expect(price.status).toBe(400)
      expect(price.body).toEqual({ _tag: "BadRequest", message: 'invalid request: input: expected number, actual "cheap"' })
      // Decoded by the HttpApi from the endpoint's payload schema.
      const provider = await call(`${gw.url}/api/providers`, {
        body: { provider: "openai-compatible", baseUrl: "http://127.0.0.1:9/v1", priority: "high" },
        headers: admin
      })
      expect(provider.status).toBe(400)
      expect(provider.body).toEqual({ _tag: "BadRequest", message: 'invalid request: priority: expected number, actual "high"' })
    })
  })
})
