import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import * as Schema from "effect/Schema"
import {
  AnalyticsQuery,
  CompressionAssignments,
  CompressionComboView,
  CompressionRule,
  ContextAnalytics,
  ContextSkillView,
  CreateCompressionCombo,
  CreateContextSkill,
  CreateMemory,
  EngineConfig,
  LanguagePack,
  MemoryQuery,
  MemoryView,
  PreviewPayload,
  PreviewResult,
  RawOutput,
  RtkFilterList,
  RtkTestPayload,
  RtkTestResult,
  UpdateCompressionCombo,
  UpdateContextSkill,
  UpdateMemory
} from "../../../domain/context.js"
import { BadRequest, Conflict, NotFound } from "../../../domain/errors.js"
import { IdPath, ManagementAuth } from "../Principal.js"
import { ADMIN_ONLY, CONFIGURATION, READERS, Roles } from "../Roles.js"

/**
 * Compression and context (docs/compression.md): the engines' settings and rules, the preview,
 * compression combos and their assignments, analytics, memory entries and injected skills.
 */
export class ContextGroup extends HttpApiGroup.make("context")
  .add(
    HttpApiEndpoint.post("preview", "/api/compression/preview")
      .annotate(Roles, READERS)
      .setPayload(PreviewPayload)
      .addSuccess(PreviewResult)
      .addError(BadRequest)
      .annotate(
        OpenApi.Summary,
        "A body in any wire format compressed as `mode` would: the output and the tokens before and after, per engine."
      )
  )
  .add(
    HttpApiEndpoint.get("languagePacks", "/api/compression/language-packs")
      .addSuccess(Schema.Struct({ packs: Schema.Array(LanguagePack) }))
      .annotate(OpenApi.Summary, "The caveman engine's language packs.")
  )
  .add(
    HttpApiEndpoint.get("rules", "/api/compression/rules")
      .addSuccess(Schema.Struct({ rules: Schema.Array(CompressionRule) }))
      .annotate(OpenApi.Summary, "Every rule of every engine.")
  )
  .add(HttpApiEndpoint.get("cavemanConfig", "/api/context/caveman/config").addSuccess(EngineConfig))
  .add(
    HttpApiEndpoint.put("setCavemanConfig", "/api/context/caveman/config")
      .setPayload(EngineConfig)
      .addSuccess(EngineConfig)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("rtkConfig", "/api/context/rtk/config").addSuccess(EngineConfig))
  .add(
    HttpApiEndpoint.put("setRtkConfig", "/api/context/rtk/config").setPayload(EngineConfig).addSuccess(EngineConfig).addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("summarizeConfig", "/api/context/summarize/config").addSuccess(EngineConfig))
  .add(
    HttpApiEndpoint.put("setSummarizeConfig", "/api/context/summarize/config")
      .setPayload(EngineConfig)
      .addSuccess(EngineConfig)
      .addError(BadRequest)
      .annotate(
        OpenApi.Summary,
        "The summarize engine: the model that writes summaries, how long a conversation must be, how many turns stay whole, background or wait."
      )
  )
  .add(HttpApiEndpoint.get("rtkFilters", "/api/context/rtk/filters").addSuccess(RtkFilterList))
  .add(
    HttpApiEndpoint.post("rtkTest", "/api/context/rtk/test")
      .annotate(Roles, READERS)
      .setPayload(RtkTestPayload)
      .addSuccess(RtkTestResult)
      .addError(BadRequest)
      .annotate(OpenApi.Summary, "Runs rtk over a text as it would over a tool result.")
  )
  .add(
    HttpApiEndpoint.get("rawOutput", "/api/context/rtk/raw-output/:id")
      .annotate(Roles, ADMIN_ONLY)
      .setPath(IdPath)
      .addSuccess(RawOutput)
      .addError(NotFound)
      .annotate(OpenApi.Summary, "A tool output rtk cut, whole (the id its marker names).")
  )
  .add(HttpApiEndpoint.get("combos", "/api/context/combos").addSuccess(Schema.Struct({ combos: Schema.Array(CompressionComboView) })))
  .add(
    HttpApiEndpoint.post("createCombo", "/api/context/combos")
      .setPayload(CreateCompressionCombo)
      .addSuccess(CompressionComboView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("combo", "/api/context/combos/:id").setPath(IdPath).addSuccess(CompressionComboView).addError(NotFound))
  .add(
    HttpApiEndpoint.put("updateCombo", "/api/context/combos/:id")
      .setPath(IdPath)
      .setPayload(UpdateCompressionCombo)
      .addSuccess(CompressionComboView)
      .addError(BadRequest)
      .addError(Conflict)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("removeCombo", "/api/context/combos/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: CompressionComboView }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("assignments", "/api/context/combos/:id/assignments")
      .setPath(IdPath)
      .addSuccess(CompressionAssignments)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.put("setAssignments", "/api/context/combos/:id/assignments")
      .setPath(IdPath)
      .setPayload(CompressionAssignments)
      .addSuccess(CompressionAssignments)
      .addError(BadRequest)
      .addError(Conflict)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("analytics", "/api/context/analytics")
      .setUrlParams(AnalyticsQuery)
      .addSuccess(ContextAnalytics)
      .addError(BadRequest)
      .annotate(OpenApi.Summary, "Tokens and cost saved per engine, combo, model and day; tokens injected by memory and skills.")
  )
  .add(
    HttpApiEndpoint.get("memory", "/api/context/memory")
      .setUrlParams(MemoryQuery)
      .addSuccess(Schema.Struct({ entries: Schema.Array(MemoryView) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.post("createMemory", "/api/context/memory")
      .setPayload(CreateMemory)
      .addSuccess(MemoryView, { status: 201 })
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("memoryEntry", "/api/context/memory/:id").setPath(IdPath).addSuccess(MemoryView).addError(NotFound))
  .add(
    HttpApiEndpoint.put("updateMemory", "/api/context/memory/:id")
      .setPath(IdPath)
      .setPayload(UpdateMemory)
      .addSuccess(MemoryView)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("removeMemory", "/api/context/memory/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: MemoryView }))
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("skills", "/api/context/skills").addSuccess(Schema.Struct({ skills: Schema.Array(ContextSkillView) })))
  .add(
    HttpApiEndpoint.post("createSkill", "/api/context/skills")
      .setPayload(CreateContextSkill)
      .addSuccess(ContextSkillView, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
  )
  .add(HttpApiEndpoint.get("skill", "/api/context/skills/:id").setPath(IdPath).addSuccess(ContextSkillView).addError(NotFound))
  .add(
    HttpApiEndpoint.put("updateSkill", "/api/context/skills/:id")
      .setPath(IdPath)
      .setPayload(UpdateContextSkill)
      .addSuccess(ContextSkillView)
      .addError(BadRequest)
      .addError(Conflict)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.del("removeSkill", "/api/context/skills/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ removed: ContextSkillView }))
      .addError(NotFound)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
