import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Schema from "effect/Schema"
import { ModelId } from "../../domain/connections.js"
import { lazy } from "../handler.js"
import { json, ServerUrl } from "../options.js"
import { intFromText, schemaOption } from "../schema.js"

export const testOptions = {
  url: schemaOption("url", ServerUrl).pipe(Options.withDescription("Server address (default http://127.0.0.1:<port>)."), Options.optional),
  apiKey: Options.text("api-key").pipe(
    Options.withDescription("A gateway API key for the inference routes (default GATEWAY_API_KEY)."),
    Options.optional
  ),
  model: schemaOption("model", ModelId).pipe(
    Options.withDescription("The model to ask (default: the first chat model of GET /v1/models)."),
    Options.optional
  ),
  prompt: Options.text("prompt").pipe(Options.withDescription("What to send."), Options.withDefault("Reply with the single word: pong")),
  timeout: schemaOption(
    "timeout",
    intFromText(Schema.Int.pipe(Schema.between(1, 600, { message: () => "must be a whole number of seconds from 1 to 600" })))
  ).pipe(Options.withDescription("Seconds to wait for the answer."), Options.withDefault(60)),
  json
}

/** `gateway test`: a live round trip through the running gateway. */
export const testCommand = Command.make(
  "test",
  testOptions,
  lazy(
    () => import("./test.impl.js"),
    (m) => m.test
  )
).pipe(
  Command.withDescription(
    "A live round trip through the running gateway: a short chat with one model (--model, or the first of /v1/models); prints the model, the latency and the answer; exit 1 when it fails."
  )
)
