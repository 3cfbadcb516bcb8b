import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { errorKindForStatus, newId } from "../../domain/canonical.js"
import { InferenceError } from "../../kernel/errors.js"
import { bindOwnRoutes, type OwnRoutesShape, type TakesOwnRoutes } from "../../kernel/internalCall.js"
import { Secrets, type SecretsShape } from "../../platform/store/Secrets.js"
import { obj, str } from "../../upstream/formats/common.js"
import type { Connection } from "../../upstream/providers/connection.js"
import { answerText, firstGatewayItem, GATEWAY_ITEM_PREFIX, type SealedSummary, summaryMessage, summaryRequestBody } from "./items.js"

/** The compaction item the gateway answers: exactly what Codex keeps and sends back. */
export interface CompactionItem {
  readonly type: "compaction"
  readonly id: string
  readonly encrypted_content: string
}

/** A compaction made: its item, the summary call's usage (Responses shape) and the model that wrote it. */
export interface Compacted {
  readonly item: CompactionItem
  readonly usage: Record<string, unknown> | null
  readonly model: string
}

export interface ResponsesCompactionShape extends TakesOwnRoutes {
  /**
   * The body with the gateway's compaction items opened into user messages holding their summary
   * (the body itself when it has none), or the 400 that names an item this gateway cannot open
   * (sealed under another storage key, or altered).
   */
  readonly openItems: (body: Record<string, unknown>) => Record<string, unknown> | InferenceError
  /**
   * Summarises the conversation of a compaction request (`body`: the trigger's `/responses` body or a
   * `/responses/compact` one, gateway items already opened) with `model`, or the summarizer model
   * when one is set, through the gateway's own `/v1/responses` (routed, limited and charged to
   * `owner` like any request), and seals the summary into one compaction item.
   */
  readonly compact: (body: Record<string, unknown>, model: string, owner: string | null) => Effect.Effect<Compacted, InferenceError>
  /** The summarizer model (`GATEWAY_COMPACTION_MODEL`), if set. */
  readonly summarizer: string | undefined
}

/**
 * Whether the connection keeps its upstream's own compaction (`compaction: "upstream"` on a
 * connection that speaks Responses: the request passes through, its items bound to it); else the
 * gateway compacts.
 */
export const upstreamCompacts = (connection: Connection): boolean =>
  connection.compaction === "upstream" && connection.formats.includes("openai-responses")

/** Items opened lately: an agent sends the same item back on every request, and opening it costs an AES-GCM pass and a parse. */
const MAX_OPENED = 128

/** The service's work over the storage key (`secrets`) and the summarizer model; the layer wires it. */
export const makeResponsesCompaction = (secrets: Pick<SecretsShape, "encrypt" | "decrypt">, summarizer: string | undefined) => {
  let own: OwnRoutesShape | undefined
  const opened = new Map<string, string>()

  const open = (encrypted: string): string | undefined => {
    const known = opened.get(encrypted)
    if (known !== undefined) return known
    const plain = Effect.runSync(Effect.either(secrets.decrypt(encrypted.slice(GATEWAY_ITEM_PREFIX.length))))
    if (Either.isLeft(plain)) return undefined
    let sealed: Partial<SealedSummary> | undefined
    try {
      sealed = obj(JSON.parse(Redacted.value(plain.right))) as Partial<SealedSummary> | undefined
    } catch {
      return undefined
    }
    if (sealed?.v !== 1 || typeof sealed.summary !== "string") return undefined
    opened.set(encrypted, sealed.summary)
    if (opened.size > MAX_OPENED) opened.delete(opened.keys().next().value as string)
    return sealed.summary
  }

  const openItems: ResponsesCompactionShape["openItems"] = (body) => {
    const input = body["input"]
    const first = firstGatewayItem(input)
    if (first === -1) return body
    const items = input as ReadonlyArray<unknown>
    const next: Array<unknown> = items.slice(0, first)
    for (let i = first; i < items.length; i++) {
      const item = obj(items[i])
      const encrypted = item?.["type"] === "compaction" ? str(item["encrypted_content"]) : undefined
      if (encrypted === undefined || !encrypted.startsWith(GATEWAY_ITEM_PREFIX)) {
        next.push(items[i])
        continue
      }
      const summary = open(encrypted)
      if (summary === undefined)
        return new InferenceError({
          status: 400,
          kind: "invalid_request",
          code: "invalid_compaction_item",
          param: `input.${i}.encrypted_content`,
          message: `input.${i} is a compaction item this gateway cannot open: it was sealed by a gateway with another storage key (STORAGE_ENCRYPTION_KEY), or altered. Compact the conversation again from its transcript, or start a new one.`
        })
      next.push(summaryMessage(summary))
    }
    return { ...body, input: next }
  }

  const seal = (summary: string, model: string): string =>
    GATEWAY_ITEM_PREFIX +
    secrets.encrypt(JSON.stringify({ v: 1, summary, model, at: Math.floor(Date.now() / 1000) } satisfies SealedSummary))

  const compact: ResponsesCompactionShape["compact"] = (body, model, owner) =>
    Effect.gen(function* () {
      const routes = own
      if (routes === undefined)
        return yield* new InferenceError({
          status: 503,
          kind: "overloaded",
          code: "compaction_unavailable",
          message: "compaction is not available until the gateway's server listens"
        })
      const writer = summarizer ?? model
      const answer = yield* Effect.tryPromise({
        try: async (signal) => {
          const res = await routes.fetch("/v1/responses", {
            signal,
            // Charged to the key whose conversation it is (its budget, limits and usage rows).
            onBehalfOf: owner,
            headers: { "x-gateway-compression": "off", "x-gateway-no-memory": "true" },
            body: summaryRequestBody(body, writer)
          })
          return { status: res.status, body: (await res.json().catch(() => undefined)) as unknown }
        },
        catch: (e) =>
          new InferenceError({
            status: 502,
            kind: "upstream",
            code: "compaction_failed",
            message: `the summary of the conversation could not be made: ${(e as Error).message}`
          })
      })
      if (answer.status !== 200) {
        const error = obj(obj(answer.body)?.["error"])
        return yield* new InferenceError({
          status: answer.status >= 400 ? answer.status : 502,
          kind: errorKindForStatus(answer.status >= 400 ? answer.status : 502),
          code: str(error?.["code"]) ?? "compaction_failed",
          message: `the summary of the conversation by ${writer} failed: ${str(error?.["message"]) ?? `status ${answer.status}`}`
        })
      }
      const summary = answerText(answer.body)
      if (summary === "")
        return yield* new InferenceError({
          status: 502,
          kind: "upstream",
          code: "compaction_failed",
          message: `${writer} answered the summary of the conversation without text`
        })
      return {
        item: { type: "compaction", id: newId("cmp_"), encrypted_content: seal(summary, writer) },
        usage: obj(obj(answer.body)?.["usage"]) ?? null,
        model: writer
      } satisfies Compacted
    })

  return {
    openItems,
    compact,
    summarizer,
    setOwnRoutes: (routes: OwnRoutesShape | undefined) => {
      own = routes
    }
  } satisfies ResponsesCompactionShape
}

export class ResponsesCompaction extends Context.Tag("gateway/ResponsesCompaction")<ResponsesCompaction, ResponsesCompactionShape>() {
  static readonly layer = Layer.effect(
    ResponsesCompaction,
    Effect.gen(function* () {
      const secrets = yield* Secrets
      const model = yield* Config.string("GATEWAY_COMPACTION_MODEL").pipe(Config.option, Effect.orDie)
      const summarizer = Option.getOrUndefined(Option.filter(model, (m) => m.trim() !== ""))?.trim()
      return makeResponsesCompaction(secrets, summarizer)
    })
  )

  /** The gateway's own routes, once the server listens (the summaries go through them). */
  static readonly ownRoutesLayer = bindOwnRoutes(ResponsesCompaction)
}
