import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../domain/errors.js"
import type { Parsed } from "../handler.js"
import { colourOn, exitWith, green, printJson, red } from "../output.js"
import { adminKeyOf, serverUrl, withHttp } from "../remote.js"
import type { testOptions } from "./test.js"

/** What the test reads of `GET /v1/models` and of a chat completion (OpenAI format). */
const ModelList = Schema.Struct({ data: Schema.Array(Schema.Struct({ id: Schema.String, kind: Schema.optional(Schema.String) })) })
const ChatAnswer = Schema.Struct({
  model: Schema.optional(Schema.String),
  choices: Schema.NonEmptyArray(Schema.Struct({ message: Schema.Struct({ content: Schema.optional(Schema.NullOr(Schema.String)) }) })),
  usage: Schema.optional(Schema.Struct({ prompt_tokens: Schema.Number, completion_tokens: Schema.Number }))
})
const ErrorBody = Schema.Struct({ error: Schema.Struct({ message: Schema.String }) })

/** The failure of one step, with the HTTP status when the gateway answered. */
class Failed extends Error {
  constructor(
    message: string,
    readonly status?: number
  ) {
    super(message)
  }
}

const send = (request: HttpClientRequest.HttpClientRequest, url: string, timeout: Duration.DurationInput) =>
  Effect.gen(function* () {
    const response = yield* (yield* HttpClient.HttpClient).execute(request).pipe(
      Effect.timeoutFail({ duration: timeout, onTimeout: () => new Failed(`no answer within ${Duration.format(timeout)}`) }),
      Effect.catchTag("RequestError", () => Effect.fail(new Failed(`no gateway answers at ${url} (is it running?)`)))
    )
    if (response.status >= 400) {
      const body = yield* HttpClientResponse.schemaBodyJson(ErrorBody)(response).pipe(Effect.option)
      return yield* Effect.fail(
        new Failed(
          Option.match(body, { onNone: () => `HTTP ${response.status}`, onSome: (b) => `HTTP ${response.status}: ${b.error.message}` }),
          response.status
        )
      )
    }
    return response
  })

export const test = (opts: Parsed<typeof testOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const key = adminKeyOf(opts.apiKey)
    const timeout = Duration.seconds(opts.timeout)
    const auth = (r: HttpClientRequest.HttpClientRequest) => (key ? HttpClientRequest.bearerToken(r, key) : r)
    let model = Option.getOrUndefined(opts.model)
    const outcome = yield* Effect.gen(function* () {
      if (!model) {
        const list = yield* send(auth(HttpClientRequest.get(`${url}/v1/models`)), url, timeout).pipe(
          Effect.flatMap(HttpClientResponse.schemaBodyJson(ModelList)),
          Effect.catchTag("ResponseError", "ParseError", () => Effect.fail(new Failed("GET /v1/models: not a model list")))
        )
        model = list.data.find((m) => (m.kind ?? "chat") === "chat")?.id
        if (!model) return yield* Effect.fail(new Failed("the gateway serves no chat model (add a provider connection, or pass --model)"))
      }
      const started = performance.now()
      const request = HttpClientRequest.post(`${url}/v1/chat/completions`).pipe(
        HttpClientRequest.bodyUnsafeJson({ model, messages: [{ role: "user", content: opts.prompt }], max_tokens: 64, stream: false }),
        auth
      )
      const answer = yield* send(request, url, timeout).pipe(
        Effect.flatMap(HttpClientResponse.schemaBodyJson(ChatAnswer)),
        Effect.catchTag("ResponseError", "ParseError", () => Effect.fail(new Failed("the answer is not a chat completion")))
      )
      return { answer, latencyMs: Math.round(performance.now() - started) }
    }).pipe(Effect.scoped, Effect.either)
    const on = colourOn(process.stdout, opts.json)
    if (outcome._tag === "Left") {
      const e = outcome.left
      if (opts.json) yield* printJson({ ok: false, url, model: model ?? null, error: e.message, status: e.status ?? null })
      else yield* Console.error(`${red("FAILED", on)} ${model ?? "(no model)"} at ${url}: ${e.message}`)
      return yield* exitWith(1)
    }
    const { answer, latencyMs } = outcome.right
    const text = answer.choices[0].message.content ?? ""
    const served = answer.model ?? model!
    if (opts.json)
      return yield* printJson({ ok: true, url, model: model!, servedBy: served, latencyMs, answer: text, usage: answer.usage ?? null })
    yield* Console.log(`${green("ok", on)} ${model} in ${latencyMs} ms${served !== model ? ` (served by ${served})` : ""}`)
    yield* Console.log(text)
  }).pipe(
    withHttp,
    Effect.mapError((e) => new BadRequest({ message: String(e) }))
  )
