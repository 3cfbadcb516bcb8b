import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { Compression } from "../../../services/context/Compression.js"
import { ContextStore } from "../../../services/context/ContextStore.js"
import { SkillCatalog } from "../../../services/skills/SkillCatalog.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

/** `/api/compression/*` and `/api/context/*` (docs/compression.md). */
export const layer = HttpApiBuilder.group(ManagementApi, "context", (handlers) =>
  Effect.gen(function* () {
    const compression = yield* Compression
    const store = yield* ContextStore
    const catalog = yield* SkillCatalog
    const catalogText = (id: string) => Effect.map(catalog.get(id), (found) => (Option.isSome(found) ? found.value.markdown : undefined))
    return handlers
      .handle("preview", ({ payload }) => compression.preview(payload))
      .handle("languagePacks", () => Effect.succeed({ packs: compression.languagePacks }))
      .handle("rules", () => Effect.succeed({ rules: compression.rules }))
      .handle("cavemanConfig", () => compression.config("caveman"))
      .handle("setCavemanConfig", ({ payload }) => compression.setConfig("caveman", payload))
      .handle("rtkConfig", () => compression.config("rtk"))
      .handle("setRtkConfig", ({ payload }) => compression.setConfig("rtk", payload))
      .handle("summarizeConfig", () => compression.config("summarize"))
      .handle("setSummarizeConfig", ({ payload }) => compression.setConfig("summarize", payload))
      .handle("rtkFilters", () => compression.rtkFilters)
      .handle("rtkTest", ({ payload }) => compression.rtkTest(payload))
      .handle("rawOutput", ({ path }) => compression.rawOutput(path.id))
      .handle("combos", () => Effect.map(store.listCombos, (combos) => ({ combos })))
      .handle("createCombo", ({ payload }) =>
        Effect.zipRight(
          compression.checkSteps(payload.engines),
          Effect.flatMap(actor, (a) => store.createCombo(payload, a))
        )
      )
      .handle("combo", ({ path }) => store.getCombo(path.id))
      .handle("updateCombo", ({ path, payload }) =>
        Effect.zipRight(
          payload.engines ? compression.checkSteps(payload.engines) : Effect.void,
          Effect.flatMap(actor, (a) => store.updateCombo(path.id, payload, a))
        )
      )
      .handle("removeCombo", ({ path }) =>
        Effect.flatMap(actor, (a) => Effect.map(store.removeCombo(path.id, a), (removed) => ({ removed })))
      )
      .handle("assignments", ({ path }) => store.getAssignments(path.id))
      .handle("setAssignments", ({ path, payload }) => Effect.flatMap(actor, (a) => store.setAssignments(path.id, payload, a)))
      .handle("analytics", ({ urlParams }) => compression.analytics(urlParams))
      .handle("memory", ({ urlParams }) => Effect.map(store.listMemory(urlParams), (entries) => ({ entries })))
      .handle("createMemory", ({ payload }) => Effect.flatMap(actor, (a) => store.createMemory(payload, a)))
      .handle("memoryEntry", ({ path }) => store.getMemory(path.id))
      .handle("updateMemory", ({ path, payload }) => Effect.flatMap(actor, (a) => store.updateMemory(path.id, payload, a)))
      .handle("removeMemory", ({ path }) =>
        Effect.flatMap(actor, (a) => Effect.map(store.removeMemory(path.id, a), (removed) => ({ removed })))
      )
      .handle("skills", () => Effect.map(store.listSkills, (skills) => ({ skills })))
      .handle("createSkill", ({ payload }) => Effect.flatMap(actor, (a) => store.createSkill(payload, catalogText, a)))
      .handle("skill", ({ path }) => store.getSkill(path.id))
      .handle("updateSkill", ({ path, payload }) => Effect.flatMap(actor, (a) => store.updateSkill(path.id, payload, a)))
      .handle("removeSkill", ({ path }) =>
        Effect.flatMap(actor, (a) => Effect.map(store.removeSkill(path.id, a), (removed) => ({ removed })))
      )
  })
)
