import type { NativeBatchesShape } from "../batches/NativeBatches.js"
import type { BatchesShape } from "../batches/Batches.js"
import type { InferenceAccess } from "../../platform/config/AppConfig.js"
import type { Files } from "../files/Files.js"
import type { MediaJobsShape } from "../media/MediaJobs.js"
import type { IssueTrackerShape } from "../quotas/IssueTracker.js"
import type { QuotasShape } from "../quotas/Quotas.js"
import type { WebSearchShape } from "../search/WebSearch.js"
import type { SkillCatalogShape } from "../../services/skills/SkillCatalog.js"
import { a2aRoutes } from "./a2a.js"
import { anthropicRoutes } from "./anthropic.js"
import { audioRoutes } from "./audio.js"
import { batchRoutes } from "./batches.js"
import { extraRoutes } from "./extras.js"
import { fileRoutes } from "./files.js"
import { geminiBareCallRoute, geminiRoutes } from "./gemini.js"
import { imageRoutes } from "./images.js"
import { mediaJobRoutes } from "./mediaJobs.js"
import { ollamaRoutes } from "./ollama.js"
import { openAiRoutes, type RouteDeps } from "./openai.js"
import { quotaRoutes } from "./quotas.js"
import { realtimeRoutes } from "./realtime.js"
import type { RealtimeSecretsShape } from "../RealtimeSecrets.js"
import { rerankRoutes } from "./rerank.js"
import { searchRoutes } from "./search.js"
import type { RouteDef } from "./types.js"

/** What the client-facing routes are built over. */
export interface RouteServices {
  readonly deps: RouteDeps
  readonly jobs: MediaJobsShape
  readonly search: WebSearchShape
  readonly quotas: QuotasShape
  readonly issues: IssueTrackerShape
  readonly files: typeof Files.Service
  readonly batches: BatchesShape
  readonly native: NativeBatchesShape
  readonly skills: SkillCatalogShape
  readonly access: InferenceAccess
  /** Ephemeral realtime client secrets (absent in partial layers: no route). */
  readonly realtimeSecrets?: RealtimeSecretsShape | undefined
}

/**
 * Every client-facing route, in one list: the dispatcher's table (InferenceRoutes.ts), and what the
 * agent-skill generator documents (src/cli/skills/apiSource.ts). The builders only capture their
 * services in the handlers, so the list's methods and paths do not depend on them. The
 * dispatcher tries patterns in this order.
 */
export const inferenceRouteDefs = (s: RouteServices): ReadonlyArray<RouteDef> => [
  ...openAiRoutes(s.deps),
  ...anthropicRoutes(s.deps),
  ...geminiRoutes(s.deps),
  ...ollamaRoutes(s.deps),
  ...extraRoutes(s.deps),
  ...rerankRoutes(s.deps),
  ...imageRoutes(s.deps),
  ...audioRoutes(s.deps),
  ...mediaJobRoutes(s.deps, s.jobs),
  ...searchRoutes(s.deps, s.search),
  ...quotaRoutes(s.deps, s.quotas, s.issues),
  ...fileRoutes(s.files),
  ...batchRoutes(s.batches, s.files, s.native),
  ...a2aRoutes(s.deps, s.skills, s.access),
  ...realtimeRoutes(s.realtimeSecrets),
  // Last: it takes only `/v1beta/<id with a slash>:<method>` paths that no route above has.
  geminiBareCallRoute(s.deps)
]
