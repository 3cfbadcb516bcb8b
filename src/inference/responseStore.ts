import * as Effect from "effect/Effect"
import { obj } from "../formats/common.js"
import type { WireFormat } from "../formats/format.js"
import { clientError, type InferenceError } from "./errors.js"

/** Which upstream produced a response itself (its output items are that server's own). */
export interface Origin {
  readonly connectionId: string
  /** The request did not say `store: false`, so the upstream may keep the response. */
  readonly stored: boolean
}

interface Entry {
  readonly input: ReadonlyArray<unknown>
  readonly output: ReadonlyArray<unknown>
  /** Absent when the gateway translated the answer from another family. */
  readonly origin: Origin | undefined
  readonly at: number
}

export interface Expanded {
  /** The body to send: with the earlier conversation in `input` when the gateway knew it. */
  readonly body: Record<string, unknown>
  /** The full input of this request, as the client would have sent it without previous_response_id. */
  readonly input: ReadonlyArray<unknown>
  /** Whether previous_response_id was resolved here (the upstream must not see it). */
  readonly expanded: boolean
}

const asItems = (input: unknown): Array<unknown> =>
  typeof input === "string" ? [{ type: "message", role: "user", content: input }] : Array.isArray(input) ? input : []

/**
 * Conversations of the Responses API that the gateway answered, so that
 * `previous_response_id` works with any upstream and with `store: false`: the stored input and
 * output of the earlier response are put in front of the new input. Bounded (entries and age);
 * one shared instance for HTTP, one per WebSocket connection.
 */
export class ResponseStore {
  private readonly entries = new Map<string, Entry>()

  constructor(
    private readonly maxEntries = 200,
    private readonly maxAgeMs = 60 * 60 * 1000
  ) {}

  remember(id: string, input: ReadonlyArray<unknown>, output: ReadonlyArray<unknown>, origin?: Origin): void {
    this.entries.delete(id)
    this.entries.set(id, { input, output, origin, at: Date.now() })
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!)
  }

  get(id: string): Entry | undefined {
    const e = this.entries.get(id)
    if (!e) return undefined
    if (Date.now() - e.at > this.maxAgeMs) {
      this.entries.delete(id)
      return undefined
    }
    return e
  }

  /**
   * Resolves previous_response_id. An id the gateway does not know is left in the body for an
   * upstream that stores responses itself (OpenAI); `requireKnown` makes it a 400 instead.
   * `target` is the connection that will answer: when that OpenAI connection produced and stored
   * the earlier response, the id is left for it too (it keeps more than the gateway does).
   */
  expand(
    body: Record<string, unknown>,
    format: WireFormat,
    requireKnown = false,
    target?: { readonly id: string; readonly storesResponses: boolean }
  ): Effect.Effect<Expanded, InferenceError> {
    const input = asItems(body["input"])
    const previous = body["previous_response_id"]
    if (typeof previous !== "string" || previous === "") return Effect.succeed({ body, input, expanded: false })
    const entry = this.get(previous)
    if (!entry) {
      return requireKnown
        ? Effect.fail(
            clientError(format, { status: 400, kind: "invalid_request", message: `Previous response with id '${previous}' not found.`, code: "previous_response_not_found", param: "previous_response_id" })
          )
        : Effect.succeed({ body, input, expanded: false })
    }
    const sameServer = entry.origin !== undefined && entry.origin.connectionId === target?.id
    // Items the model produced become input items (a message item keeps type message). A
    // reasoning item without encrypted_content can only be found in the storage of the server
    // that made it; anywhere else it would be refused, so it is left out.
    const output = entry.output.filter((o) => {
      const item = obj(o)
      if (!item) return false
      return !(item["type"] === "reasoning" && typeof item["encrypted_content"] !== "string" && !(sameServer && entry.origin!.stored))
    })
    const full = [...entry.input, ...output, ...input]
    if (sameServer && entry.origin!.stored && target!.storesResponses) return Effect.succeed({ body, input: full, expanded: false })
    const { previous_response_id: _p, ...rest } = body
    return Effect.succeed({ body: { ...rest, input: full }, input: full, expanded: true })
  }

  get size(): number {
    return this.entries.size
  }
}
