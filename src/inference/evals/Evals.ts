/**
 * Evals (docs/guardrails.md, "Evals"): eval sets (prompts with graders) stored in `eval_sets`,
 * runs in `eval_runs`. A run calls each model THROUGH the gateway (the loopback inference path
 * batches use: POST /v1/chat/completions with the process's internal secret, on behalf of the
 * admin key that started it), so routing, fallback, usage rows and cost apply as for any client.
 * `Evals` stores and queues; `EvalRunner` (which needs the server's address) takes the queue.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as crypto from "node:crypto"
import { BadRequest, NotFound } from "../../domain/errors.js"
import type { CreateEvalSet, EvalCase, EvalRunView, EvalSetView, Grader, ModelResult } from "../../domain/evals.js"
import { OwnRoutes } from "../../kernel/internalCall.js"
import { violation } from "../../services/governance/jsonSchema.js"

interface SetRow {
  readonly id: string
  readonly name: string
  readonly document: string
  readonly created_at: number
  readonly created_by: string
}
interface RunRow {
  readonly id: string
  readonly set_id: string
  readonly status: EvalRunView["status"]
  readonly models: string
  readonly result: string | null
  readonly error: string | null
  readonly created_at: number
  readonly finished_at: number | null
}

const iso = (ms: number | null) => (ms === null ? null : new Date(Number(ms)).toISOString())
const toSet = (r: SetRow): EvalSetView => {
  const d = JSON.parse(r.document) as { description?: string; cases: Array<EvalCase> }
  return {
    id: r.id,
    name: r.name,
    description: d.description ?? null,
    cases: d.cases,
    createdAt: iso(r.created_at)!,
    createdBy: r.created_by
  }
}
const toRun = (r: RunRow): EvalRunView => ({
  id: r.id,
  evalId: r.set_id,
  status: r.status,
  models: JSON.parse(r.models),
  results: r.result === null ? null : JSON.parse(r.result),
  error: r.error,
  createdAt: iso(r.created_at)!,
  finishedAt: iso(r.finished_at)
})

interface Job {
  readonly runId: string
  readonly set: EvalSetView
  readonly models: ReadonlyArray<string>
  /** The admin API key that started the run (its usage rows), or null for a session. */
  readonly owner: string | null
}

export interface EvalsShape {
  readonly list: Effect.Effect<ReadonlyArray<EvalSetView>>
  readonly create: (input: CreateEvalSet, actor: string) => Effect.Effect<EvalSetView, BadRequest>
  readonly get: (id: string) => Effect.Effect<{ eval: EvalSetView; runs: ReadonlyArray<EvalRunView> }, NotFound>
  readonly startRun: (id: string, models: ReadonlyArray<string>, actor: string) => Effect.Effect<EvalRunView, NotFound>
  readonly getRun: (id: string, runId: string) => Effect.Effect<EvalRunView, NotFound>
  /** For the runner: the next queued run. */
  readonly next: Effect.Effect<Job>
  readonly finish: (
    runId: string,
    status: "running" | "completed" | "failed",
    results: ReadonlyArray<ModelResult> | null,
    error: string | null
  ) => Effect.Effect<void>
}

/** A grader's pattern that will not compile is a 400 naming the case, before anything is stored. */
const checkGraders = (cases: ReadonlyArray<EvalCase>): string | undefined => {
  for (let i = 0; i < cases.length; i++) {
    const g = cases[i]!.grader
    if (g.type === "regex") {
      try {
        new RegExp(g.pattern, g.flags)
      } catch (e) {
        return `cases[${i}].grader.pattern: not a valid regular expression (${(e as Error).message})`
      }
    }
    if (g.type === "json-schema") {
      try {
        violation(g.schema, null)
      } catch (e) {
        return `cases[${i}].grader.schema: ${(e as Error).message}`
      }
    }
  }
  const ids = cases.map((c) => c.id).filter((x) => x !== undefined)
  if (new Set(ids).size !== ids.length) return "cases: ids must be unique"
  return undefined
}

export class Evals extends Context.Tag("gateway/Evals")<Evals, EvalsShape>() {
  static readonly layer = Layer.effect(
    Evals,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const queue = yield* Queue.unbounded<Job>()
      const getSet = (id: string) =>
        Effect.flatMap(sql<SetRow>`SELECT * FROM eval_sets WHERE id = ${id}`.pipe(Effect.orDie), ([r]) =>
          r ? Effect.succeed(toSet(r)) : Effect.fail(new NotFound({ message: `no eval set '${id}'` }))
        )
      return {
        list: Effect.map(sql<SetRow>`SELECT * FROM eval_sets ORDER BY created_at DESC, id`.pipe(Effect.orDie), (rows) => rows.map(toSet)),
        create: (input, actor) =>
          Effect.gen(function* () {
            const problem = checkGraders(input.cases)
            if (problem) return yield* Effect.fail(new BadRequest({ message: problem }))
            const cases = input.cases.map((c, i) => ({ ...c, id: c.id ?? `case-${i + 1}` }))
            const row: SetRow = {
              id: `eval_${crypto.randomBytes(8).toString("hex")}`,
              name: input.name,
              document: JSON.stringify({ description: input.description, cases }),
              created_at: Date.now(),
              created_by: actor
            }
            yield* sql`INSERT INTO eval_sets ${sql.insert(row as never)}`.pipe(Effect.orDie)
            return toSet(row)
          }),
        get: (id) =>
          Effect.gen(function* () {
            const set = yield* getSet(id)
            const runs = yield* sql<RunRow>`SELECT * FROM eval_runs WHERE set_id = ${id} ORDER BY created_at DESC`.pipe(Effect.orDie)
            return { eval: set, runs: runs.map(toRun) }
          }),
        startRun: (id, models, actor) =>
          Effect.gen(function* () {
            const set = yield* getSet(id)
            const row: RunRow = {
              id: `evrun_${crypto.randomBytes(8).toString("hex")}`,
              set_id: id,
              status: "queued",
              models: JSON.stringify(models),
              result: null,
              error: null,
              created_at: Date.now(),
              finished_at: null
            }
            yield* sql`INSERT INTO eval_runs ${sql.insert(row as never)}`.pipe(Effect.orDie)
            yield* Queue.offer(queue, {
              runId: row.id,
              set,
              models,
              owner: actor === "admin-session" || actor === "anonymous" ? null : actor
            })
            return toRun(row)
          }),
        getRun: (id, runId) =>
          Effect.flatMap(sql<RunRow>`SELECT * FROM eval_runs WHERE id = ${runId} AND set_id = ${id}`.pipe(Effect.orDie), ([r]) =>
            r ? Effect.succeed(toRun(r)) : Effect.fail(new NotFound({ message: `no run '${runId}' of eval set '${id}'` }))
          ),
        next: Queue.take(queue),
        finish: (runId, status, results, error) =>
          Effect.asVoid(
            sql`UPDATE eval_runs SET status = ${status}, result = ${results === null ? null : JSON.stringify(results)}, error = ${error}, finished_at = ${status === "running" ? null : Date.now()} WHERE id = ${runId}`.pipe(
              Effect.orDie
            )
          )
      }
    })
  )
}

// ---------------------------------------------------------------- the runner

interface Answer {
  readonly status: number
  readonly text: string | null
  readonly error: string | null
  readonly latencyMs: number
  readonly costUsd: number
}

/** A judge's reply: the first number in it, 0 to 10. */
const judgeScore = (text: string): number | undefined => {
  const m = /\b(10|\d)(?:\.\d+)?\b/.exec(text)
  return m ? Math.min(10, Math.max(0, Number(m[0]))) : undefined
}

const grade = (g: Grader, output: string): { score: number; reason: string | null } => {
  switch (g.type) {
    case "exact": {
      const ok =
        g.caseSensitive === false ? output.trim().toLowerCase() === g.expected.trim().toLowerCase() : output.trim() === g.expected.trim()
      return { score: ok ? 1 : 0, reason: ok ? null : "not the expected answer" }
    }
    case "contains": {
      const ok = g.caseSensitive === true ? output.includes(g.expected) : output.toLowerCase().includes(g.expected.toLowerCase())
      return { score: ok ? 1 : 0, reason: ok ? null : `does not contain ${JSON.stringify(g.expected)}` }
    }
    case "regex": {
      const ok = new RegExp(g.pattern, g.flags).test(output)
      return { score: ok ? 1 : 0, reason: ok ? null : `does not match /${g.pattern}/` }
    }
    case "json-schema": {
      let value: unknown
      try {
        value = JSON.parse(output.trim().replace(/^```(?:json)?\s*|\s*```$/g, ""))
      } catch {
        return { score: 0, reason: "not JSON" }
      }
      const v = violation(g.schema, value)
      return { score: v ? 0 : 1, reason: v ?? null }
    }
    case "judge":
      return { score: 0, reason: "judged separately" }
  }
}

/** Runs queued evals, one at a time, each model's cases in order (models in parallel, up to 4). */
export const EvalRunner = Layer.scopedDiscard(
  Effect.gen(function* () {
    const evals = yield* Evals
    const own = yield* OwnRoutes
    let seq = 0

    const ask = (
      model: string,
      messages: ReadonlyArray<{ role: string; content: string }>,
      maxTokens: number | undefined,
      owner: string | null,
      runId: string
    ) =>
      Effect.promise(async (): Promise<Answer> => {
        const started = Date.now()
        try {
          const res = await own.fetch("/v1/chat/completions", {
            requestId: `${runId}_${++seq}`,
            onBehalfOf: owner,
            body: { model, messages, stream: false, ...(maxTokens ? { max_tokens: maxTokens } : {}) }
          })
          const body = (await res.json().catch(() => undefined)) as any
          const latencyMs = Date.now() - started
          const costUsd = Number(res.headers.get("x-gateway-response-cost") ?? 0) || 0
          if (res.status !== 200)
            return { status: res.status, text: null, error: String(body?.error?.message ?? `status ${res.status}`), latencyMs, costUsd }
          const text = body?.choices?.[0]?.message?.content
          return { status: 200, text: typeof text === "string" ? text : "", error: null, latencyMs, costUsd }
        } catch (e) {
          return {
            status: 502,
            text: null,
            error: `the gateway could not be reached: ${(e as Error).message}`,
            latencyMs: Date.now() - started,
            costUsd: 0
          }
        }
      })

    const runCase = (job: Job, model: string, c: EvalCase) =>
      Effect.gen(function* () {
        const messages = [...(c.system ? [{ role: "system", content: c.system }] : []), { role: "user", content: c.prompt }]
        const a = yield* ask(model, messages, c.maxTokens, job.owner, job.runId)
        const base = { caseId: c.id ?? "", latencyMs: a.latencyMs, status: a.status, output: a.text }
        if (a.text === null) return { ...base, score: 0, passed: false, costUsd: a.costUsd, reason: a.error }
        if (c.grader.type !== "judge") {
          const g = grade(c.grader, a.text)
          return { ...base, score: g.score, passed: g.score >= 1, costUsd: a.costUsd, reason: g.reason }
        }
        const prompt = `You grade an answer against a rubric. Reply with only a score from 0 (fails the rubric) to 10 (fully meets it).\n\nRubric:\n${c.grader.rubric}\n\nQuestion:\n${c.prompt}\n\nAnswer:\n${a.text}`
        const j = yield* ask(c.grader.model, [{ role: "user", content: prompt }], 16, job.owner, job.runId)
        const score = j.text === null ? undefined : judgeScore(j.text)
        const cost = a.costUsd + j.costUsd
        if (score === undefined)
          return {
            ...base,
            score: 0,
            passed: false,
            costUsd: cost,
            reason: j.error ?? `the judge gave no score: ${JSON.stringify((j.text ?? "").slice(0, 200))}`
          }
        return { ...base, score: score / 10, passed: score >= 7, costUsd: cost, reason: `judge ${c.grader.model}: ${score}/10` }
      })

    const runModel = (job: Job, model: string) =>
      Effect.map(
        Effect.forEach(job.set.cases, (c) => runCase(job, model, c)),
        (cases): ModelResult => {
          const n = cases.length
          return {
            model,
            score: n === 0 ? 0 : cases.reduce((s, c) => s + c.score, 0) / n,
            passed: cases.filter((c) => c.passed).length,
            total: n,
            meanLatencyMs: n === 0 ? 0 : Math.round(cases.reduce((s, c) => s + c.latencyMs, 0) / n),
            costUsd: cases.reduce((s, c) => s + c.costUsd, 0),
            cases
          }
        }
      )

    yield* Effect.forkScoped(
      Effect.forever(
        Effect.flatMap(evals.next, (job) =>
          Effect.gen(function* () {
            yield* evals.finish(job.runId, "running", null, null)
            const results = yield* Effect.forEach(job.models, (m) => runModel(job, m), { concurrency: 4 })
            yield* evals.finish(job.runId, "completed", results, null)
          }).pipe(
            Effect.catchAllCause((cause) =>
              Effect.zipRight(
                Effect.logWarning("eval run failed", cause),
                Effect.ignore(evals.finish(job.runId, "failed", null, "the run failed unexpectedly; see the gateway log"))
              )
            )
          )
        )
      )
    )
  })
)
