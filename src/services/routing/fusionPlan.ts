import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { ResolvedTarget } from "../../upstream/providers/Connections.js"
import type { Combo } from "./Combos.js"
import { type Admission, admit, type Blocked, candidateOf, type FusionPlan, type PlanInput, type RoutePlan, sessionOf } from "./plan.js"
import type { Candidate } from "./types.js"

const FUSION_DEFAULTS = { minPanel: 2, stragglerGraceMs: 8000, panelHardTimeoutMs: 90_000 }

/**
 * A fusion combo's plan (docs/routing.md, "Fusion"): one panel member per target, its first
 * admissible connection (the others its fallbacks), and the judge (the combo's judge model, else
 * the first member).
 */
export const fusionPlan = (
  deps: { readonly targetsOf: (model: string) => Effect.Effect<ReadonlyArray<ResolvedTarget>>; readonly admission: Admission },
  combo: Combo,
  input: PlanInput
) =>
  Effect.gen(function* () {
    const { targetsOf, admission } = deps
    const now = yield* Clock.currentTimeMillis
    const panel: Array<Candidate> = []
    const members: Array<ReadonlyArray<Candidate>> = []
    const blocked: Array<Blocked> = []
    for (const [i, t] of combo.targets.entries()) {
      const cands = (yield* targetsOf(t.model)).map((r) => candidateOf(r, t.weight ?? 1, i))
      const a = admit(cands, admission, now)
      if (a.ok[0]) {
        panel.push(a.ok[0])
        members.push(a.ok)
      } else blocked.push(...a.blocked)
    }
    const judgeId = combo.config.judgeModel
    let judge: Candidate | undefined = panel[0]
    if (judgeId) {
      const cands = (yield* targetsOf(judgeId)).map((r) => candidateOf(r))
      judge = admit(cands, admission, now).ok[0] ?? judge
    }
    const tuning = combo.config.fusionTuning ?? {}
    const fusion: FusionPlan | undefined = judge
      ? {
          panel,
          members,
          judge,
          minPanel: Math.max(Math.min(tuning.minPanel ?? FUSION_DEFAULTS.minPanel, panel.length), Math.min(2, panel.length)),
          stragglerGraceMs: tuning.stragglerGraceMs ?? FUSION_DEFAULTS.stragglerGraceMs,
          panelHardTimeoutMs: tuning.panelHardTimeoutMs ?? FUSION_DEFAULTS.panelHardTimeoutMs
        }
      : undefined
    return {
      kind: "combo",
      scope: combo.name,
      strategy: "fusion",
      candidates: panel,
      blocked,
      probes: new Set<string>(),
      ...(fusion ? { fusion } : {}),
      ...sessionOf(input)
    } satisfies RoutePlan
  })
