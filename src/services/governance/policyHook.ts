/**
 * The policies' request-path hook (docs/guardrails.md): the checks of the compiled policies
 * against a request (blocked terms, the output cap, the tool rules, the models a key may use, the
 * estimated cost), as verdicts and `guardrail.action` events, and the hook's registration, which
 * follows the snapshot of enabled policies. Everything here is synchronous but the tool rules'
 * read of TOOL_POLICY_MODE.
 */
import * as Effect from "effect/Effect"
import type { FormatId } from "../../domain/canonical.js"
import type { PolicyView } from "../../domain/policies.js"
import type { EventBusShape } from "../../platform/events/EventBus.js"
import type { FeatureFlagsShape } from "../../platform/flags/FeatureFlags.js"
import {
  blockRequest,
  GuardFailure,
  type HookRequest,
  type HookVerdict,
  type ModelSelectEvent,
  type RequestEvent
} from "../../kernel/hooks.js"
import type { RequestHooksShape } from "../../kernel/RequestHooks.js"
import type { AccountingShape } from "../accounting/Accounting.js"
import {
  compile,
  type CompiledPolicy,
  describeFinding,
  type Finding,
  firstMatch,
  requestedOutput,
  termFinding,
  textLength,
  toolVerdict,
  withOutputCap
} from "./policyRules.js"
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

/** The TOOL_POLICY_MODE in force (anything but `warn` and `block` is `disabled`). */
export const toolPolicyMode = (flags: FeatureFlagsShape): Effect.Effect<ToolPolicyMode> =>
  Effect.map(flags.value("TOOL_POLICY_MODE"), (v) => (v === "warn" || v === "block" ? v : "disabled"))

/** One policy's check; what it throws names the policy (the hook fails closed with it). */
const byPolicy = <A>(p: CompiledPolicy, f: () => A): A => {
  try {
    return f()
  } catch (e) {
    throw new GuardFailure(`policy "${p.view.name}"`, e)
  }
}

export interface PolicyChecksDeps {
  readonly bus: EventBusShape
  readonly accounting: AccountingShape
  /** The TOOL_POLICY_MODE in force (`toolPolicyMode`), read when a request carries tools. */
  readonly toolMode: Effect.Effect<ToolPolicyMode>
}

/**
 * The checks, made once per layer: `onRequest` and `onModelSelect` each make the handler of one
 * snapshot of compiled policies. A finding refuses the request (and publishes `guardrail.action`);
 * the tool rules warn, strip or refuse by TOOL_POLICY_MODE.
 */
export const makePolicyChecks = (deps: PolicyChecksDeps) => {
  const { bus, accounting, toolMode } = deps

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
      return refuse(request, e.endpoint, {
        ...f,
        message: `the request requires a tool call and every tool it declares is refused (${f.message})`
      })
    }
    for (const f of declaredFindings.values()) event(request, e.endpoint, "block", "remove", f)
    return {
      body: withoutTools(e.format, body, (name) => declaredFindings.has(name)),
      headers: { [REMOVED_TOOLS_HEADER]: [...declaredFindings.keys()].join(",").slice(0, 1000) }
    }
  }

  /** Blocked terms, then the output cap (set when the request has none, refused above it), then the tool rules. */
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
        return refuse(
          request,
          e.endpoint,
          { policy: cap, rule: "maxTokens", message: `the request asks for up to ${asked} output tokens, more than ${cap.maxTokens}` },
          400
        )
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

  /** The models the key may use (the model asked for, or every candidate), then the estimated cost on the chosen target. */
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
            (e.candidates.length > 0 &&
              e.candidates.every((c) => firstMatch(list, c.model) !== undefined || firstMatch(list, c.key) !== undefined))
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
          const estimate = accounting.cost(target.provider, target.model, {
            inputTokens: Math.ceil(textLength(body) / 4),
            outputTokens: output
          })
          if (estimate > p.maxCostUsd) {
            return refuse(
              request,
              endpoint,
              {
                policy: p,
                rule: "maxCostUsd",
                message: `the request may cost about $${estimate.toFixed(6)} on ${target.key}, more than $${p.maxCostUsd}`
              },
              400
            )
          }
        }
      }
      return undefined
    }

  return { onRequest, onModelSelect }
}

/**
 * The hook follows the snapshot: `apply` registers it (compiled anew) while an enabled policy
 * exists and removes it otherwise; a snapshot already applied changes nothing. `unregister`
 * removes it for good (the layer's finalizer).
 */
export const makePolicyHook = (deps: { readonly hooks: RequestHooksShape; readonly checks: ReturnType<typeof makePolicyChecks> }) => {
  const { hooks, checks } = deps
  let unregister: (() => void) | undefined
  let applied: ReadonlyArray<PolicyView> | undefined
  let compiled: ReadonlyArray<CompiledPolicy> = []
  const apply = (views: ReadonlyArray<PolicyView>) =>
    Effect.sync(() => {
      if (views === applied) return
      applied = views
      unregister?.()
      unregister = undefined
      const policies = views.filter((v) => v.enabled).map(compile)
      compiled = policies
      if (policies.length === 0) return
      const hasTools = policies.some((p) => p.toolAllow !== undefined || p.toolDeny !== undefined)
      const request = checks.onRequest(policies, hasTools)
      unregister = hooks.register({
        name: POLICY_HOOK,
        priority: 20,
        // A policy that cannot be checked refuses the request (503 guardrail_unavailable) rather than let it through.
        failClosed: true,
        onRequest: (e, r) => {
          r.metadata["policy.endpoint"] = e.endpoint
          return request(e, r)
        },
        onModelSelect: checks.onModelSelect(policies)
      })
    })
  /** The first enabled policy's refusal of a tool known by any of `names` (deny wins over allow), from memory. */
  const toolFinding = (names: ReadonlyArray<string>): Finding | undefined => {
    for (const p of compiled) {
      if (p.toolAllow === undefined && p.toolDeny === undefined) continue
      const findings = names.map((n) => toolVerdict(p, n))
      // A name a deny matches refuses; an allow list refuses only when no name is in it.
      const denied = findings.find((f) => f?.rule === "tools.deny")
      if (denied) return denied
      if (findings.every((f) => f !== undefined)) return findings[0]
    }
    return undefined
  }
  return { apply, unregister: () => unregister?.(), toolFinding }
}
