/**
 * Policies: versioned documents (policyVersions.ts) and a request hook over a compiled snapshot (policyHook.ts),
 * registered only while an enabled policy exists, so a gateway without policies pays nothing (docs/guardrails.md#policies).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Accounting } from "../accounting/Accounting.js"
import type { BadRequest, NotFound } from "../../domain/errors.js"
import type { CreatePolicy, PolicyView } from "../../domain/policies.js"
import { EventBus } from "../../platform/events/EventBus.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { RequestHooks } from "../../kernel/RequestHooks.js"
import { followVersion, makeCachedLoad, StoreVersion } from "../../platform/store/StoreVersion.js"
import { makePolicyChecks, makePolicyHook, type ToolPolicyMode, toolPolicyMode } from "./policyHook.js"
import { loadCurrent, makePolicyVersions } from "./policyVersions.js"
import { describeFinding } from "./policyRules.js"

export { POLICY_HOOK, REMOVED_TOOLS_HEADER, type ToolPolicyMode, WARNING_HEADER } from "./policyHook.js"

export interface PoliciesShape {
  /** The current version of every policy that is not deleted, by name. */
  readonly list: Effect.Effect<ReadonlyArray<PolicyView>>
  /** A policy by id (any version) or name: its current version and every version, newest first. */
  readonly get: (
    idOrName: string
  ) => Effect.Effect<{ policy: PolicyView | null; history: ReadonlyArray<PolicyView & { deletedAt: string | null }> }, NotFound>
  /** Stores the next version of the named policy (version 1 for a new name, or one deleted before). */
  readonly create: (input: CreatePolicy, actor: string) => Effect.Effect<PolicyView, BadRequest>
  /** Deletes the named policy (by id or name): it stops applying; its versions stay in the history. */
  readonly remove: (idOrName: string, actor: string) => Effect.Effect<PolicyView, NotFound>
  /** The TOOL_POLICY_MODE in force. */
  readonly toolPolicyMode: Effect.Effect<ToolPolicyMode>
  /**
   * A call of a tool not made through a model request (`/v1/mcp`), under the tool rules: the mode
   * in force and the refusal's wording (`policy "x" v2, rule tools.deny: ...`) when an enabled policy
   * refuses a tool known by any of `names`; undefined when none does or the mode is `disabled`.
   */
  readonly toolRefusal: (
    names: ReadonlyArray<string>
  ) => Effect.Effect<{ readonly mode: "warn" | "block"; readonly finding: string } | undefined>
}

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

      const cache = makeCachedLoad(version, loadCurrent(sql))
      const toolMode = toolPolicyMode(flags)
      const checks = makePolicyChecks({ bus, accounting, toolMode })

      // The hook follows the snapshot: registered while an enabled policy exists, removed otherwise.
      const hook = makePolicyHook({ hooks, checks })
      const refresh = Effect.flatMap(cache.get, hook.apply)
      yield* refresh
      yield* Effect.addFinalizer(() => Effect.sync(hook.unregister))
      yield* followVersion(Option.some(version), refresh.pipe(Effect.catchAllCause((c) => Effect.logWarning("policy refresh failed", c))))
      const changed = Effect.zipRight(cache.invalidate, refresh)
      const { get, create, remove } = makePolicyVersions({ sql, changed })

      const toolRefusal = (names: ReadonlyArray<string>) =>
        Effect.map(toolMode, (mode) => {
          if (mode === "disabled") return undefined
          const f = hook.toolFinding(names)
          return f === undefined ? undefined : { mode, finding: describeFinding(f) }
        })
      return { list: cache.get, get, create, remove, toolPolicyMode: toolMode, toolRefusal }
    })
  )
}
