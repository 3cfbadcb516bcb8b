/**
 * Policies (docs/guardrails.md): versioned policy documents in the `policies` table, and the
 * request-path hook that applies the current ones. The hook reads a compiled in-memory snapshot
 * (no database read per request) and is registered only while at least one enabled policy
 * exists, so a gateway without policies pays nothing. Changes made here apply at once; changes
 * made by another process on the same database within a second (the store version is polled).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import * as crypto from "node:crypto"
import { Accounting } from "../accounting/Accounting.js"
import { BadRequest, NotFound } from "../../domain/errors.js"
import type { CreatePolicy, PolicyView } from "../../domain/policies.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import type { FormatId } from "../../domain/canonical.js"
import { blockRequest, GuardFailure, type HookRequest, type HookVerdict, type ModelSelectEvent, type RequestEvent, RequestHooks } from "../../kernel/hooks.js"
import { isUniqueViolation } from "../../platform/store/dialect.js"
import { makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import { compile, type CompiledPolicy, describeFinding, type Finding, firstMatch, requestedOutput, termFinding, textLength, toolVerdict, withOutputCap } from "./policyRules.js"
import { requestTools, withoutTools } from "./toolCalls.js"

type Json = Record<string, unknown>

export type ToolPolicyMode = "disabled" | "warn" | "block"

/** The hook's name: in logs, in `blockedBy` and in the audit log. */
export const POLICY_HOOK = "gateway.policies"
/** Warn mode: what the request would have been refused or stripped of. */
export const WARNING_HEADER = "x-gateway-policy-warning"
/** Block mode: the declared tools removed from the request. */
export const REMOVED_TOOLS_HEADER = "x-gateway-policy-removed-tools"

/** Output tokens the cost estimate assumes when neither the request nor a policy caps them. */
const DEFAULT_OUTPUT_TOKENS = 1024

interface Row {
  readonly id: string
  readonly name: string
  readonly version: number
  readonly document: string
  readonly created_at: number
  readonly created_by: string
  readonly deleted_at: number | null
}

const toView = (r: Row): PolicyView => {
  const d = JSON.parse(r.document) as Partial<CreatePolicy>
  return {
    id: r.id,
    name: r.name,
    version: Number(r.version),
    description: d.description ?? null,
    enabled: d.enabled ?? true,
    tools: d.tools ?? null,
    models: d.models ?? null,
    maxTokens: d.maxTokens ?? null,
    maxCostUsd: d.maxCostUsd ?? null,
    blockedTerms: d.blockedTerms ?? null,
    createdAt: new Date(Number(r.created_at)).toISOString(),
    createdBy: r.created_by
  }
}

export interface PoliciesShape {
  /** The current version of every policy that is not deleted, by name. */
  readonly list: Effect.Effect<ReadonlyArray<PolicyView>>
  /** A policy by id (any version) or name: its current version and every version, newest first. */
  readonly get: (idOrName: string) => Effect.Effect<{ policy: PolicyView | null; history: ReadonlyArray<PolicyView & { deletedAt: string | null }> }, NotFound>
  /** Stores the next version of the named policy (version 1 for a new name, or one deleted before). */
  readonly create: (input: CreatePolicy, actor: string) => Effect.Effect<PolicyView, BadRequest>
  /** Deletes the named policy (by id or name): it stops applying; its versions stay in the history. */
  readonly remove: (idOrName: string, actor: string) => Effect.Effect<PolicyView, NotFound>
  /** The TOOL_POLICY_MODE in force. */
  readonly toolPolicyMode: Effect.Effect<ToolPolicyMode>
}

const RULE_FIELDS = ["tools", "models", "maxTokens", "maxCostUsd", "blockedTerms"] as const

export class Policies extends Context.Tag("gateway/Policies")<Policies, PoliciesShape>() {
  static readonly layer = Layer.scoped(
    Policies,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const hooks = yield* RequestHooks
      const flags = yield* FeatureFlags
      const bus = yield* EventBus
      const accounting = yield* Accounting
      const version = yield* StoreVersion

      const rows = sql<Row>`SELECT * FROM policies ORDER BY name, version DESC`.pipe(Effect.orDie)
      /** The current version of each name that is not deleted. */
      const current = (all: ReadonlyArray<Row>): ReadonlyArray<Row> => {
        const seen = new Set<string>()
        const out: Array<Row> = []
        for (const r of all) {
          if (seen.has(r.name)) continue
          seen.add(r.name)
          if (r.deleted_at === null) out.push(r)
        }
        return out
      }
      const load = Effect.map(rows, (all) => current(all).map(toView))
      const cache = makeCachedLoad(version, load)

      const toolMode: Effect.Effect<ToolPolicyMode> = Effect.map(flags.value("TOOL_POLICY_MODE"), (v) => (v === "warn" || v === "block" ? v : "disabled"))

      const event = (request: HookRequest, endpoint: string, mode: string, action: string, f: Finding) =>
        bus.publish("guardrail.action", {
          rule: `policy:${f.policy.view.name}/${f.rule}`,
          mode,
          action,
          endpoint,
          apiKeyId: request.apiKeyId,
          requestId: request.requestId,
          detail: describeFinding(f)
        })

      const refuse = (request: HookRequest, endpoint: string, f: Finding, status = 403): HookVerdict => {
        event(request, endpoint, "block", "block", f)
        return blockRequest({ status, message: `refused by ${describeFinding(f)}` })
      }

      /** The tool rules against the request, in the mode in force. `body` is the body so far (maybe capped). */
      const applyTools = (
        policies: ReadonlyArray<CompiledPolicy>,
        mode: ToolPolicyMode,
        e: RequestEvent,
        request: HookRequest,
        body: Json,
        changed: boolean
      ): HookVerdict | undefined => {
        const keep = changed ? { body } : undefined
        if (mode === "disabled") return keep
        const tools = requestTools(e.format, body)
        const verdictFor = (name: string): Finding | undefined => {
          for (const p of policies) {
            const f = toolVerdict(p, name)
            if (f) return f
          }
          return undefined
        }
        const callFindings: Array<Finding> = []
        for (const c of tools.calls) {
          const f = verdictFor(c.name)
          if (f) callFindings.push({ ...f, message: `the conversation carries a call of ${f.message}` })
        }
        const declaredFindings = new Map<string, Finding>()
        for (const d of tools.declared) {
          const f = verdictFor(d.name)
          if (f) declaredFindings.set(d.name, f)
        }
        const forced = tools.forced !== undefined ? verdictFor(tools.forced) : undefined
        const all = [...callFindings, ...declaredFindings.values(), ...(forced && !declaredFindings.has(tools.forced!) ? [forced] : [])]
        if (all.length === 0) return keep
        if (mode === "warn") {
          for (const f of all) event(request, e.endpoint, "warn", "warn", f)
          return { ...keep, headers: { [WARNING_HEADER]: all.map(describeFinding).join("; ").slice(0, 1000) } }
        }
        // block
        if (callFindings.length > 0) return refuse(request, e.endpoint, callFindings[0]!)
        if (forced) return refuse(request, e.endpoint, { ...forced, message: `the request forces ${forced.message}` })
        if (tools.required && declaredFindings.size === tools.declared.length) {
          const f = declaredFindings.values().next().value!
          return refuse(request, e.endpoint, { ...f, message: `the request requires a tool call and every tool it declares is refused (${f.message})` })
        }
        for (const f of declaredFindings.values()) event(request, e.endpoint, "block", "remove", f)
        return {
          body: withoutTools(e.format, body, (name) => declaredFindings.has(name)),
          headers: { [REMOVED_TOOLS_HEADER]: [...declaredFindings.keys()].join(",").slice(0, 1000) }
        }
      }

      /** One policy's check; what it throws names the policy (the hook fails closed with it). */
      const byPolicy = <A>(p: CompiledPolicy, f: () => A): A => {
        try {
          return f()
        } catch (e) {
          throw new GuardFailure(`policy "${p.view.name}"`, e)
        }
      }

      const onRequest = (policies: ReadonlyArray<CompiledPolicy>, hasTools: boolean) => (e: RequestEvent, request: HookRequest) => {
        request.metadata["policy.format"] = e.format
        let body = e.body as Json
        let changed = false
        for (const p of policies) {
          const f = byPolicy(p, () => termFinding(p, body))
          if (f) return refuse(request, e.endpoint, f)
        }
        let cap: CompiledPolicy | undefined
        for (const p of policies) if (p.maxTokens !== undefined && (cap === undefined || p.maxTokens < cap.maxTokens!)) cap = p
        if (cap) {
          const asked = requestedOutput(e.format, body)
          if (asked === undefined) {
            body = withOutputCap(e.format, body, cap.maxTokens!)
            changed = true
          } else if (asked > cap.maxTokens!) {
            return refuse(request, e.endpoint, { policy: cap, rule: "maxTokens", message: `the request asks for up to ${asked} output tokens, more than ${cap.maxTokens}` }, 400)
          }
        }
        if (hasTools) {
          const tools = requestTools(e.format, body)
          if (tools.declared.length > 0 || tools.calls.length > 0 || tools.forced !== undefined) {
            const b = body
            return Effect.map(toolMode, (mode) => applyTools(policies, mode, e, request, b, changed))
          }
        }
        return changed ? { body } : undefined
      }

      const onModelSelect =
        (policies: ReadonlyArray<CompiledPolicy>) =>
        (e: ModelSelectEvent, request: HookRequest): HookVerdict | undefined => {
          const endpoint = String(request.metadata["policy.endpoint"] ?? request.path)
          for (const p of policies) {
            if (!p.models) continue
            const list = p.models.get(request.apiKeyId ?? "*") ?? p.models.get("*")
            if (!list) continue
            const allowed = byPolicy(
              p,
              () =>
                firstMatch(list, e.model) !== undefined ||
                (e.candidates.length > 0 && e.candidates.every((c) => firstMatch(list, c.model) !== undefined || firstMatch(list, c.key) !== undefined))
            )
            if (!allowed)
              return refuse(request, endpoint, {
                policy: p,
                rule: "models",
                message: `model "${e.model}" is not allowed for ${request.apiKeyId ? `API key ${request.apiKeyId}` : "requests without an API key"}`
              })
          }
          const target = e.target
          if (target) {
            const format = request.metadata["policy.format"] as FormatId | undefined
            for (const p of policies) {
              if (p.maxCostUsd === undefined) continue
              const body = e.body as Json
              const output = (format && requestedOutput(format, body)) ?? DEFAULT_OUTPUT_TOKENS
              const estimate = accounting.cost(target.provider, target.model, { inputTokens: Math.ceil(textLength(body) / 4), outputTokens: output })
              if (estimate > p.maxCostUsd) {
                return refuse(
                  request,
                  endpoint,
                  { policy: p, rule: "maxCostUsd", message: `the request may cost about $${estimate.toFixed(6)} on ${target.key}, more than $${p.maxCostUsd}` },
                  400
                )
              }
            }
          }
          return undefined
        }

      // The hook follows the snapshot: registered while an enabled policy exists, removed otherwise.
      let unregister: (() => void) | undefined
      let applied: ReadonlyArray<PolicyView> | undefined
      const apply = (views: ReadonlyArray<PolicyView>) =>
        Effect.sync(() => {
          if (views === applied) return
          applied = views
          unregister?.()
          unregister = undefined
          const policies = views.filter((v) => v.enabled).map(compile)
          if (policies.length === 0) return
          const hasTools = policies.some((p) => p.toolAllow !== undefined || p.toolDeny !== undefined)
          const request = onRequest(policies, hasTools)
          unregister = hooks.register({
            name: POLICY_HOOK,
            priority: 20,
            // A policy that cannot be checked refuses the request (503 guardrail_unavailable) rather than let it through.
            failClosed: true,
            onRequest: (e, r) => {
              r.metadata["policy.endpoint"] = e.endpoint
              return request(e, r)
            },
            onModelSelect: onModelSelect(policies)
          })
        })
      const refresh = Effect.flatMap(cache.get, apply)
      yield* refresh
      yield* Effect.addFinalizer(() => Effect.sync(() => unregister?.()))
      yield* refresh.pipe(
        Effect.repeat(Schedule.spaced("1 second")),
        Effect.catchAllCause((c) => Effect.logWarning("policy refresh failed", c)),
        Effect.forkScoped
      )
      const changed = Effect.zipRight(cache.invalidate, refresh)

      const byIdOrName = (idOrName: string) =>
        Effect.map(
          sql<Row>`SELECT * FROM policies WHERE name = ${idOrName} OR name = (SELECT name FROM policies WHERE id = ${idOrName}) ORDER BY version DESC`.pipe(Effect.orDie),
          (r) => r
        )

      return {
        list: cache.get,
        get: (idOrName) =>
          Effect.flatMap(byIdOrName(idOrName), (all) => {
            if (all.length === 0) return Effect.fail(new NotFound({ message: `no policy with id or name '${idOrName}'` }))
            const head = all[0]!
            return Effect.succeed({
              policy: head.deleted_at === null ? toView(head) : null,
              history: all.map((r) => ({ ...toView(r), deletedAt: r.deleted_at === null ? null : new Date(Number(r.deleted_at)).toISOString() }))
            })
          }),
        create: (input, actor) =>
          Effect.gen(function* () {
            if (!RULE_FIELDS.some((k) => input[k] !== undefined)) {
              return yield* Effect.fail(new BadRequest({ message: `a policy needs at least one rule: ${RULE_FIELDS.join(", ")}` }))
            }
            if (input.tools && !input.tools.allow?.length && !input.tools.deny?.length) {
              return yield* Effect.fail(new BadRequest({ message: "tools: give a non-empty allow or deny list" }))
            }
            for (const [key, list] of Object.entries(input.models ?? {})) {
              if (list.length === 0)
                return yield* Effect.fail(new BadRequest({ message: `models["${key}"]: give at least one model id or pattern (an empty list would refuse every model)` }))
            }
            const { name, ...document } = input
            for (let tries = 0; ; tries++) {
              const [last] = yield* sql<{ v: number | null }>`SELECT MAX(version) AS v FROM policies WHERE name = ${name}`.pipe(Effect.orDie)
              const next = Number(last?.v ?? 0) + 1
              const row: Row = {
                id: `pol_${crypto.randomBytes(8).toString("hex")}`,
                name,
                version: next,
                document: JSON.stringify(document),
                created_at: Date.now(),
                created_by: actor,
                deleted_at: null
              }
              const inserted = yield* sql`INSERT INTO policies ${sql.insert(row as never)}`.pipe(
                Effect.as(true),
                Effect.catchAll((e) => (isUniqueViolation(e) && tries < 5 ? Effect.succeed(false) : Effect.die(e)))
              )
              if (inserted) {
                yield* changed
                return toView(row)
              }
            }
          }),
        remove: (idOrName, _actor) =>
          Effect.gen(function* () {
            const all = yield* byIdOrName(idOrName)
            const head = all[0]
            if (!head || head.deleted_at !== null) return yield* Effect.fail(new NotFound({ message: `no current policy with id or name '${idOrName}'` }))
            yield* sql`UPDATE policies SET deleted_at = ${Date.now()} WHERE name = ${head.name} AND deleted_at IS NULL`.pipe(Effect.orDie)
            yield* changed
            return toView(head)
          }),
        toolPolicyMode: toolMode
      }
    })
  )
}
