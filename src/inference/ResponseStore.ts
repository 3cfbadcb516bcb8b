import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { obj } from "../upstream/formats/common.js"
import type { WireFormat } from "../upstream/formats/format.js"
import { localSharedState, SharedState, type SharedStateShape } from "../platform/state/SharedState.js"
import { BoundedMap } from "../kernel/BoundedMap.js"
import { clientError, InferenceError } from "../kernel/errors.js"

/** Which upstream produced a response itself (its output items are that server's own). */
export interface Origin {
  readonly connectionId: string
  /** The request did not say `store: false`, so the upstream may keep the response. */
  readonly stored: boolean
}

export interface StoredResponse {
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

export interface ResponseStoreShape {
  /** Keeps a response's input and output under its id (the newest entry; the oldest goes beyond the bound). */
  readonly remember: (id: string, input: ReadonlyArray<unknown>, output: ReadonlyArray<unknown>, origin?: Origin) => void
  /** The stored response, while younger than the store's age limit. */
  readonly get: (id: string) => StoredResponse | undefined
  /**
   * Resolves previous_response_id. An id the gateway does not know is left in the body for an
   * upstream that stores responses itself (OpenAI); `requireKnown` makes it a 400 instead.
   * `target` is the connection that will answer: when that OpenAI connection produced and stored
   * the earlier response, the id is left for it too (it keeps more than the gateway does).
   */
  readonly expand: (
    body: Record<string, unknown>,
    format: WireFormat,
    requireKnown?: boolean,
    target?: { readonly id: string; readonly storesResponses: boolean }
  ) => Effect.Effect<Expanded, InferenceError>
  /** `expand` without an effect (the common path's Responses requests): the same answer, the 400 as a value. */
  readonly expandNow: (
    body: Record<string, unknown>,
    format: WireFormat,
    requireKnown?: boolean,
    target?: { readonly id: string; readonly storesResponses: boolean }
  ) => Expanded | InferenceError
  /** Entries held (expired ones not yet dropped included). */
  readonly size: () => number
}

/**
 * What one process tells the others (docs/ARCHITECTURE.md, "Seam 4"): a response it remembered,
 * so that a follow-up with `previous_response_id` may reach any process.
 */
export interface RememberedResponse {
  readonly id: string
  readonly input: ReadonlyArray<unknown>
  readonly output: ReadonlyArray<unknown>
  readonly origin: Origin | undefined
  readonly at: number
}

/** The HTTP store's bounds. */
export const HTTP_MAX_ENTRIES = 200
export const HTTP_MAX_AGE_MS = 60 * 60 * 1000

/**
 * The Responses conversations the gateway answered, so `previous_response_id` works with any upstream
 * (docs/formats.md, "Decisions"); shared across processes, one more per WebSocket connection.
 */
export class ResponseStore extends Context.Tag("gateway/ResponseStore")<ResponseStore, ResponseStoreShape>() {
  /** A store of at most `maxEntries` responses, each kept `maxAgeMs`; `shared` links it to the other processes. */
  static readonly make = (
    options: { readonly maxEntries?: number; readonly maxAgeMs?: number } = {},
    shared: SharedStateShape = localSharedState
  ): ResponseStoreShape => {
    const entries = new BoundedMap<string, StoredResponse>({
      maxEntries: options.maxEntries ?? HTTP_MAX_ENTRIES,
      ttlMs: options.maxAgeMs ?? HTTP_MAX_AGE_MS
    })
    const channel = shared.channel<RememberedResponse>("responses", (r) => {
      entries.set(r.id, { input: r.input, output: r.output, origin: r.origin, at: r.at }, r.at)
    })

    const remember: ResponseStoreShape["remember"] = (id, input, output, origin) => {
      const at = Date.now()
      entries.set(id, { input, output, origin, at }, at)
      if (channel.shared) channel.publish({ id, input, output, origin, at })
    }

    const get: ResponseStoreShape["get"] = (id) => entries.get(id)

    const expandNow: ResponseStoreShape["expandNow"] = (body, format, requireKnown = false, target) => {
      const input = asItems(body["input"])
      const previous = body["previous_response_id"]
      if (typeof previous !== "string" || previous === "") return { body, input, expanded: false }
      const entry = get(previous)
      if (!entry) {
        return requireKnown
          ? clientError(format, {
              status: 400,
              kind: "invalid_request",
              message: `Previous response with id '${previous}' not found.`,
              code: "previous_response_not_found",
              param: "previous_response_id"
            })
          : { body, input, expanded: false }
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
      if (sameServer && entry.origin!.stored && target!.storesResponses) return { body, input: full, expanded: false }
      const { previous_response_id: _p, ...rest } = body
      return { body: { ...rest, input: full }, input: full, expanded: true }
    }

    const expand: ResponseStoreShape["expand"] = (body, format, requireKnown, target) => {
      const expanded = expandNow(body, format, requireKnown, target)
      return expanded instanceof InferenceError ? Effect.fail(expanded) : Effect.succeed(expanded)
    }

    return { remember, get, expand, expandNow, size: () => entries.size }
  }

  /** The HTTP store (200 responses, 1 hour), shared with the other gateway processes. */
  static readonly layer = Layer.effect(
    ResponseStore,
    Effect.map(SharedState.orLocal, (shared) => ResponseStore.make({}, shared))
  )
}
