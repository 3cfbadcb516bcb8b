/**
 * The live compatibility matrix (docs/compat.md): the recorded request shapes of the supported
 * clients (cases.generated.ts, from test/fixtures/clients) replayed against configured models
 * through the gateway's own routes, each answer checked as its client would need it. What a run
 * would cost is known before it starts (each answer at its output cap) and the run stops starting
 * calls at its budget. The last run and its exchanges are kept (KeyValue), so a failing cell's
 * request and answer are one call away.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as crypto from "node:crypto"
import type { FormatId } from "../../domain/canonical.js"
import type { CompatCell, CompatExchange, CompatMatrix, CompatRun } from "../../domain/compat.js"
import { BadRequest, Conflict, NotFound, ServiceUnavailable } from "../../domain/errors.js"
import { bindOwnRoutes, type OwnRoutesShape, type TakesOwnRoutes } from "../../kernel/internalCall.js"
import { checkAnswer, schemaEngines } from "../../kernel/schemaCheck.js"
import { KeyValue } from "../../platform/store/KeyValue.js"
import { type KeptJob, type KeptState, readKept, startKept } from "../../platform/store/keptJob.js"
import { Connections } from "../../upstream/providers/Connections.js"
import { requestedSchema } from "../../upstream/formats/structured.js"
import { Accounting } from "../accounting/Accounting.js"
import { Pricing } from "../accounting/Pricing.js"
import { pathKind } from "../inspector/detect.js"
import { answerOf } from "../shadow/compare.js"
import { answeredStreamed, type CallResult, callOwn, readAnswer, retarget } from "../shadow/exchange.js"

/** One recorded client request (scripts/compat-cases.mjs). */
interface Case {
  readonly id: string
  readonly client: string
  readonly capability: string
  /** What its answer must show: any answer, text, a tool call, JSON valid against the request's schema. */
  readonly check: "answer" | "text" | "tool_call" | "schema"
  readonly source: string
  readonly path: string
  readonly query: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Readonly<Record<string, unknown>>
  readonly stream: boolean
}

let loaded: Promise<ReadonlyArray<Case>> | undefined
/** The cases, read once on first use (about 350 KiB: the agents' requests carry their whole system prompts and tools). */
const loadCases = (): Promise<ReadonlyArray<Case>> => (loaded ??= import("./cases.generated.js").then((m) => JSON.parse(m.CASES_JSON) as ReadonlyArray<Case>))

/** The most output tokens a case's answer may use (beyond a thinking budget). */
const OUTPUT_CAP = 1024
/** An answer kept to read, at most. */
const ANSWER_KEEP = 64 * 1024
const LAST_NS = "compat"
const EXCHANGES_NS = "compat.exchanges"

const formatOf = (c: Case): FormatId => pathKind(c.path)?.format ?? "openai-chat"

const min = (v: unknown, cap: number) => (typeof v === "number" && v > 0 ? Math.min(v, cap) : cap)

/** The case's body with its answer capped at OUTPUT_CAP tokens in its format's own field, and that cap. */
const capped = (c: Case): { readonly body: Record<string, unknown>; readonly maxOutputTokens: number } => {
  const body: Record<string, unknown> = { ...c.body }
  switch (formatOf(c)) {
    case "openai-chat": {
      const field = body["max_completion_tokens"] !== undefined ? "max_completion_tokens" : "max_tokens"
      body[field] = min(body[field], OUTPUT_CAP)
      return { body, maxOutputTokens: body[field] as number }
    }
    case "openai-responses":
      body["max_output_tokens"] = min(body["max_output_tokens"], OUTPUT_CAP)
      return { body, maxOutputTokens: body["max_output_tokens"] as number }
    case "anthropic": {
      // A thinking budget is capped too (1024 is Anthropic's least), the answer after it.
      const thinking = body["thinking"] as { type?: string; budget_tokens?: number } | undefined
      const budget = thinking?.type === "enabled" ? min(thinking.budget_tokens, OUTPUT_CAP) : 0
      if (budget > 0) body["thinking"] = { ...thinking, budget_tokens: budget }
      body["max_tokens"] = min(body["max_tokens"], OUTPUT_CAP + budget)
      return { body, maxOutputTokens: body["max_tokens"] as number }
    }
    case "gemini": {
      const config = { ...(body["generationConfig"] as Record<string, unknown> | undefined) }
      config["maxOutputTokens"] = min(config["maxOutputTokens"], OUTPUT_CAP)
      body["generationConfig"] = config
      return { body, maxOutputTokens: config["maxOutputTokens"] as number }
    }
    case "ollama": {
      const options = { ...(body["options"] as Record<string, unknown> | undefined) }
      options["num_predict"] = min(options["num_predict"], OUTPUT_CAP)
      body["options"] = options
      return { body, maxOutputTokens: options["num_predict"] as number }
    }
  }
}

/** Tokens a request carries, estimated from its size (about 4 characters a token). */
const inputTokensOf = (body: unknown): number => Math.ceil(JSON.stringify(body).length / 4)

/** Whether an answer is what the case's client needs, and why not. */
const verdict = async (c: Case, body: Record<string, unknown>, res: CallResult): Promise<{ readonly pass: boolean; readonly reason: string | null }> => {
  if (res.status !== 200) {
    let message = res.text.slice(0, 300)
    try {
      const e = JSON.parse(res.text) as { error?: { message?: string } | string; message?: string }
      message = (typeof e.error === "string" ? e.error : e.error?.message) ?? e.message ?? message
    } catch {
      // Not JSON: its first characters.
    }
    return { pass: false, reason: `status ${res.status}: ${message}` }
  }
  const format = formatOf(c)
  const streamed = answeredStreamed(c.stream, res)
  if (c.stream && !streamed) return { pass: false, reason: `a streaming request was answered whole (${res.contentType || "no content type"})` }
  let answer: ReturnType<typeof answerOf>
  try {
    answer = answerOf(readAnswer(format, res.text, streamed))
  } catch (e) {
    return { pass: false, reason: `the answer could not be read as ${c.client} reads it: ${(e as Error).message}` }
  }
  switch (c.check) {
    case "answer":
      return answer.text.trim() !== "" || answer.tools.length > 0 ? { pass: true, reason: null } : { pass: false, reason: "the answer is empty" }
    case "text":
      return answer.text.trim() !== "" ? { pass: true, reason: null } : { pass: false, reason: "the answer has no text" }
    case "tool_call":
      return answer.tools.length > 0 ? { pass: true, reason: null } : { pass: false, reason: "no tool call: the request asks for one" }
    case "schema": {
      const schema = requestedSchema(format, body)
      if (!schema) return { pass: false, reason: "the request names no schema" }
      const checked = checkAnswer(await schemaEngines(), schema, answer.text)
      if (checked === undefined) return { pass: false, reason: "the schema could not be compiled" }
      return checked.valid ? { pass: true, reason: null } : { pass: false, reason: `the answer does not match the schema: ${checked.errors.slice(0, 3).join("; ")}` }
    }
  }
}

/** A run as kept (KeyValue `compat`/`last`): written as it goes, so any gateway on the database shows its progress. */
interface Stored extends KeptState {
  readonly id: string
  readonly startedAt: string
  readonly budgetUsd: number
  readonly spentUsd: number
  readonly models: ReadonlyArray<string>
  readonly cases: ReadonlyArray<string>
  /** The cells answered or skipped so far. */
  readonly cells: ReadonlyArray<CompatCell>
}

interface StoredExchange {
  readonly id: string
  readonly case: string
  readonly model: string
  readonly status: "pass" | "fail"
  readonly reason: string | null
  readonly answer: CompatExchange["answer"]
}

export interface CompatShape extends TakesOwnRoutes {
  /** The matrix for `models` (default: the last run's, else the configured ones): the cases, the estimate, the last run's cells. */
  readonly matrix: (models?: ReadonlyArray<string>) => Effect.Effect<CompatMatrix, BadRequest>
  /** Starts a run of the cases against the models within the budget, in the background; answers the matrix with the run `running`. */
  readonly run: (request: CompatRun) => Effect.Effect<CompatMatrix, BadRequest | Conflict | ServiceUnavailable>
  readonly exchange: (id: string) => Effect.Effect<CompatExchange, NotFound>
}

export class Compat extends Context.Tag("gateway/Compat")<Compat, CompatShape>() {
  static readonly layer = Layer.scoped(
    Compat,
    Effect.gen(function* () {
      const kv = yield* KeyValue
      const scope = yield* Effect.scope
      const connections = yield* Connections
      const accounting = yield* Accounting
      const pricing = yield* Pricing
      let own: OwnRoutesShape | undefined
      /** The run under way in this process. */
      let current: KeptJob<Stored> | undefined

      const cases = Effect.promise(loadCases)

      /** Each enabled connection's configured models (its default model when it lists none). */
      const configuredModels = Effect.map(connections.list, (list) =>
        list
          .filter((c) => c.enabled)
          .flatMap((c) => (c.models.length > 0 ? c.models : c.defaultModel ? [c.defaultModel] : []).map((m) => `${c.name}/${m}`))
          .slice(0, 24)
      )

      /** What a case costs a model at most; undefined when the model has no price. */
      const priceOf = (model: string) =>
        Effect.map(Effect.either(connections.targets(model)), (targets) => {
          const first = targets._tag === "Right" ? targets.right[0] : undefined
          if (first === undefined || pricing.priceOf(first.connection.provider.id, first.model) === undefined) return undefined
          return (inputTokens: number, outputTokens: number) => accounting.cost(first.connection.provider.id, first.model, { inputTokens, outputTokens })
        })

      /** The run under way here, else the last one any gateway on the database wrote. */
      const lastRun: Effect.Effect<Stored | undefined> = Effect.suspend(() =>
        current !== undefined
          ? Effect.succeed(current.current())
          : Effect.map(readKept<Stored>(kv, LAST_NS, "last"), (o) => (Option.isSome(o) && typeof o.value.id === "string" ? o.value : undefined))
      )

      const matrixFor = (models: ReadonlyArray<string>, last: Stored | undefined): Effect.Effect<CompatMatrix> =>
        Effect.gen(function* () {
          const all = yield* cases
          const sized = all.map((c) => {
            const { body, maxOutputTokens } = capped(c)
            return { c, inputTokens: inputTokensOf(body), maxOutputTokens }
          })
          const perModel: Record<string, number | null> = {}
          const unpriced: Array<string> = []
          const estimates = new Map<string, number | null>()
          for (const model of models) {
            const price = yield* priceOf(model)
            if (price === undefined) unpriced.push(model)
            let total = 0
            for (const s of sized) {
              const usd = price ? price(s.inputTokens, s.maxOutputTokens) : null
              estimates.set(`${s.c.id}\u0000${model}`, usd)
              total += usd ?? 0
            }
            perModel[model] = price ? total : null
          }
          const ran = new Map((last?.cells ?? []).map((cell) => [`${cell.case}\u0000${cell.model}`, cell]))
          const underWay = last?.state === "running" ? { models: new Set(last.models), cases: new Set(last.cases) } : undefined
          const cells: Array<CompatCell> = []
          for (const s of sized)
            for (const model of models) {
              const key = `${s.c.id}\u0000${model}`
              const estimatedUsd = estimates.get(key) ?? null
              const done = ran.get(key)
              const status = underWay?.models.has(model) && underWay.cases.has(s.c.id) ? ("pending" as const) : ("not-run" as const)
              cells.push(done ? { ...done, estimatedUsd } : { case: s.c.id, model, status, reason: null, exchangeId: null, latencyMs: null, costUsd: null, estimatedUsd })
            }
          const count = (status: CompatCell["status"]) => (last?.cells ?? []).filter((c) => c.status === status).length
          return {
            cases: sized.map((s) => ({
              id: s.c.id,
              client: s.c.client,
              capability: s.c.capability,
              source: s.c.source,
              path: s.c.path,
              stream: s.c.stream,
              inputTokens: s.inputTokens,
              maxOutputTokens: s.maxOutputTokens
            })),
            models: [...models],
            estimate: { totalUsd: Object.values(perModel).reduce<number>((a, b) => a + (b ?? 0), 0), perModel, unpriced },
            run:
              last === undefined
                ? null
                : {
                    id: last.id,
                    state: last.state,
                    startedAt: last.startedAt,
                    finishedAt: last.finishedAt,
                    budgetUsd: last.budgetUsd,
                    spentUsd: last.spentUsd,
                    total: last.cases.length * last.models.length,
                    done: last.cells.length,
                    passed: count("pass"),
                    failed: count("fail"),
                    skipped: count("skipped")
                  },
            cells
          }
        })

      const modelsOr = (given: ReadonlyArray<string> | undefined, last: Stored | undefined) =>
        Effect.gen(function* () {
          if (given !== undefined && given.length > 0) return [...new Set(given)]
          if (last !== undefined && last.models.length > 0) return [...last.models]
          return yield* configuredModels
        })

      const matrix: CompatShape["matrix"] = (given) =>
        Effect.gen(function* () {
          if (given !== undefined && given.length > 24) return yield* Effect.fail(new BadRequest({ message: "models holds at most 24 models" }))
          const last = yield* lastRun
          return yield* matrixFor(yield* modelsOr(given, last), last)
        })

      const run: CompatShape["run"] = (request) =>
        Effect.gen(function* () {
          const routes = own
          if (routes === undefined) return yield* Effect.fail(new ServiceUnavailable({ message: "the compatibility matrix runs once the gateway's server is listening" }))
          const all = yield* cases
          const unknown = (request.cases ?? []).filter((id) => !all.some((c) => c.id === id))
          if (unknown.length > 0) return yield* Effect.fail(new BadRequest({ message: `no such case: ${unknown.join(", ")} (GET /api/compat lists them)` }))
          const chosen = request.cases ? all.filter((c) => request.cases!.includes(c.id)) : all
          const models = yield* modelsOr(request.models, undefined)
          if (models.length === 0) return yield* Effect.fail(new BadRequest({ message: "no model to run against: add a connection with models, or name models" }))
          const previous = yield* lastRun
          if (previous?.state === "running")
            return yield* Effect.fail(
              new Conflict({ message: `a compatibility run is under way (${previous.id}, ${previous.cells.length} cells done): try again when it has finished` })
            )
          // The previous run's exchanges go; this run's are kept as they come.
          for (const cell of previous?.cells ?? []) if (cell.exchangeId) yield* kv.remove(EXCHANGES_NS, cell.exchangeId)
          const runId = crypto.randomBytes(4).toString("hex")
          const kept = yield* startKept<Stored>(kv, LAST_NS, "last", {
            id: runId,
            state: "running",
            startedAt: new Date().toISOString(),
            finishedAt: null,
            savedAt: Date.now(),
            budgetUsd: request.budgetUsd,
            spentUsd: 0,
            models,
            cases: chosen.map((c) => c.id),
            cells: []
          })
          current = kept
          const settle = (cell: CompatCell, usd: number) => kept.update((r) => ({ ...r, spentUsd: r.spentUsd + usd, cells: [...r.cells, cell] }))
          const work = chosen.flatMap((c) => models.map((model) => ({ c, model })))
          const one = ({ c, model }: (typeof work)[number], n: number) =>
            Effect.gen(function* () {
              const base: Omit<CompatCell, "status" | "reason"> = { case: c.id, model, exchangeId: null, latencyMs: null, costUsd: null, estimatedUsd: null }
              if (kept.current().spentUsd >= request.budgetUsd) return settle({ ...base, status: "skipped", reason: "budget: the run had spent its budget" }, 0)
              const { body } = capped(c)
              const target = retarget({ requestId: "", scope: "", format: formatOf(c), path: c.path, query: c.query, body, stream: c.stream }, model)
              const res = yield* callOwn(routes, target.path, target.body, `compat_${runId}_${n}`, c.headers)
              const judged = yield* Effect.promise(() => verdict(c, target.body, res))
              const id = `cx_${runId}_${n}`
              const status = judged.pass ? ("pass" as const) : ("fail" as const)
              const stored: StoredExchange = {
                id,
                case: c.id,
                model,
                status,
                reason: judged.reason,
                answer: { status: res.status, contentType: res.contentType, body: res.text.slice(0, ANSWER_KEEP), truncated: res.text.length > ANSWER_KEEP }
              }
              yield* kv.set(EXCHANGES_NS, id, JSON.stringify(stored))
              settle({ ...base, status, reason: judged.reason, exchangeId: id, latencyMs: res.latencyMs, costUsd: res.costUsd }, res.costUsd)
            })
          yield* kept.launch(Effect.forEach(work, one, { concurrency: request.concurrency, discard: true }), scope, () => {
            if (current === kept) current = undefined
          })
          return yield* matrixFor(models, kept.current())
        })

      const exchange: CompatShape["exchange"] = (id) =>
        Effect.gen(function* () {
          const raw = yield* kv.get(EXCHANGES_NS, id)
          if (Option.isNone(raw)) return yield* Effect.fail(new NotFound({ message: `no exchange ${id} (only the last run's are kept)` }))
          const x = JSON.parse(raw.value) as StoredExchange
          const c = (yield* cases).find((k) => k.id === x.case)
          if (c === undefined) return yield* Effect.fail(new NotFound({ message: `exchange ${id} is of a case this version no longer has` }))
          const { body } = capped(c)
          const target = retarget({ requestId: "", scope: "", format: formatOf(c), path: c.path, query: c.query, body, stream: c.stream }, x.model)
          return { ...x, request: { method: "POST", path: target.path, headers: { ...c.headers, "content-type": "application/json" }, body: target.body } }
        })

      return {
        matrix,
        run,
        exchange,
        setOwnRoutes: (o) => {
          own = o
        }
      } satisfies CompatShape
    })
  )

  /** Gives it the gateway's own routes once the server listens. */
  static readonly ownRoutesLayer = bindOwnRoutes(Compat)
}
