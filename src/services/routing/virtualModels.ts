import * as Effect from "effect/Effect"
import { type ComboBridge, type InputModality, MODALITIES, takes } from "../../domain/bridge.js"
import { kindOf, type ModelKind } from "../../domain/catalog/catalog.js"
import type { ConnectionsShape } from "../../upstream/providers/Connections.js"
import { ADVERTISED_AUTO_IDS } from "./auto/variants.js"
import { type AutoDescription, DEFAULT_CONTEXT_WINDOW, DEFAULT_MAX_OUTPUT } from "./autoPlans.js"
import type { Combo, CombosShape } from "./Combos.js"
import type { RouteError } from "./plan.js"
import type { Candidate } from "./types.js"

/** A routable model that is not one connection's: a combo or an auto id (model lists). */
export interface VirtualModel {
  readonly id: string
  readonly kind: "combo" | "auto"
  /** What it serves, for model lists: its first target's kind (chat for auto ids). */
  readonly serves: ModelKind
  readonly description: string
  readonly contextWindow: number
  readonly maxOutput: number
  readonly createdAt: number
  /** The input modalities some target takes natively, text first (docs/bridge.md). */
  readonly native: ReadonlyArray<InputModality>
  /** A combo's own bridge models. */
  readonly bridge?: ComboBridge | undefined
}

/** Combos and advertised auto ids, for model lists (an auto id only once a connection is enabled). */
export const virtualModels = (deps: {
  readonly connections: ConnectionsShape
  readonly combos: CombosShape
  readonly describeAuto: (id: string) => Effect.Effect<AutoDescription, RouteError>
  readonly autoCandidates: (combo: Combo) => Effect.Effect<ReadonlyArray<Candidate>>
  readonly comboCandidates: (combo: Combo) => Effect.Effect<ReadonlyArray<Candidate>>
}) =>
  Effect.gen(function* () {
    const { connections, combos, describeAuto, autoCandidates, comboCandidates } = deps
    const out: Array<VirtualModel> = []
    const enabled = (yield* connections.list).filter((c) => c.enabled)
    if (enabled.length > 0) {
      for (const id of ADVERTISED_AUTO_IDS) {
        const d = yield* Effect.either(describeAuto(id))
        if (d._tag === "Right")
          out.push({
            id,
            kind: "auto",
            serves: "chat",
            description: d.right.spec.description,
            contextWindow: d.right.contextWindow,
            maxOutput: d.right.maxOutput,
            createdAt: 0,
            native: ["text"]
          })
      }
    }
    for (const combo of yield* combos.list) {
      if (!combo.enabled) continue
      const cands = combo.strategy === "auto" ? yield* autoCandidates(combo) : yield* comboCandidates(combo)
      const windows = cands.map((c) => c.spec?.contextWindow ?? 0).filter((n) => n > 0)
      const outputs = cands.map((c) => c.spec?.maxOutput ?? 0).filter((n) => n > 0)
      out.push({
        id: combo.name,
        kind: "combo",
        serves: cands[0] ? kindOf(cands[0].connection.provider, cands[0].model) : "chat",
        description:
          combo.description ?? `combo (${combo.strategy}) of ${combo.targets.map((t) => t.model).join(", ") || "every connected model"}`,
        // As for auto pools: the largest target (a prompt too long for one target falls back to the next).
        contextWindow: windows.length > 0 ? Math.max(...windows) : DEFAULT_CONTEXT_WINDOW,
        maxOutput: outputs.length > 0 ? Math.max(...outputs) : DEFAULT_MAX_OUTPUT,
        createdAt: combo.createdAt,
        native: ["text", ...MODALITIES.filter((m) => cands.some((c) => takes(c.spec?.capabilities, m)))],
        bridge: combo.config.bridge
      })
    }
    return out as ReadonlyArray<VirtualModel>
  })
