import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../domain/errors.js"

/** No gateway answered at the URL (connection refused, DNS, timeout). */
export class GatewayUnreachable extends Data.TaggedError("GatewayUnreachable")<{ readonly message: string }> {}

const ModelList = Schema.Struct({
  data: Schema.Array(Schema.Struct({ id: Schema.String, kind: Schema.optional(Schema.String) }))
})

/**
 * The chat models of a running gateway's live catalog, as a client with `key` sees them
 * (`GET /v1/models`; entries of another kind, such as embeddings or images, are left out).
 */
export const fetchChatModels = (baseUrl: string, key: string) =>
  Effect.gen(function* () {
    const url = `${baseUrl}/v1/models`
    const res = yield* Effect.tryPromise({
      try: (signal) => fetch(url, { headers: { authorization: `Bearer ${key}` }, signal }),
      catch: () =>
        new GatewayUnreachable({ message: `no gateway answers at ${baseUrl} (is it running? start it with \`gateway\`, or pass --remote)` })
    }).pipe(
      Effect.timeoutFail({
        duration: "10 seconds",
        onTimeout: () => new GatewayUnreachable({ message: `the gateway at ${baseUrl} did not answer within 10 s` })
      })
    )
    const text = yield* Effect.promise(() => res.text().catch(() => ""))
    if (res.status === 401 || res.status === 403) {
      return yield* new BadRequest({
        message: `the gateway at ${baseUrl} refused the key (${res.status}): pass a valid gateway key with --api-key or GATEWAY_API_KEY`
      })
    }
    if (!res.ok) return yield* new BadRequest({ message: `GET ${url} answered ${res.status}` })
    const list = yield* Effect.try({
      try: () => Schema.decodeUnknownSync(ModelList)(JSON.parse(text)),
      catch: () => new BadRequest({ message: `${url} did not answer a model list` })
    })
    return list.data.filter((m) => m.kind === undefined || m.kind === "chat").map((m) => m.id)
  })
