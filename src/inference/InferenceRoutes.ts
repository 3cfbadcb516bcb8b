import * as Context from "effect/Context"
import { RealtimeSecrets } from "./RealtimeSecrets.js"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as LogLevel from "effect/LogLevel"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as http from "node:http"
import { ApiKeys } from "../services/auth/ApiKeys.js"
import { AppConfig, inferenceAccess } from "../platform/config/AppConfig.js"
import { FeatureFlags } from "../platform/flags/FeatureFlags.js"
import { Connections } from "../upstream/providers/Connections.js"
import { Router } from "../services/routing/Router.js"
import { Accounting } from "../services/accounting/Accounting.js"
import { Idempotency } from "../services/accounting/Idempotency.js"
import { InFlight } from "../services/usage/InFlight.js"
import { IssueTracker } from "./quotas/IssueTracker.js"
import { Quotas } from "./quotas/Quotas.js"
import { MediaJobs } from "./media/MediaJobs.js"
import { Usage } from "../services/usage/Usage.js"
import { RequestHooks } from "../kernel/RequestHooks.js"
import { InboundLimits } from "../services/accounting/InboundLimits.js"
import { Inference } from "./Inference.js"
import { GatewayMetrics } from "../services/observability/GatewayMetrics.js"
import { ResponseStore } from "./ResponseStore.js"
import { ResponsesMcp } from "./mcp/ResponsesMcp.js"
import { Bridges } from "./bridge/Bridges.js"
import { ResponsesCompaction } from "./compaction/ResponsesCompaction.js"
import { listGeminiModels } from "./routes/gemini.js"
import { inferenceRouteDefs } from "./routes/index.js"
import type { RouteDeps } from "./routes/openai.js"
import { WebSearch } from "./search/WebSearch.js"
import { Files } from "./files/Files.js"
import { NativeBatches } from "./batches/NativeBatches.js"
import { SkillCatalog } from "../services/skills/SkillCatalog.js"
import { Batches } from "./batches/Batches.js"
import { InternalCalls } from "../kernel/internalCall.js"
import { makeTryCommon } from "./commonRequest.js"
import { type InferenceRequest, makeRequestPrograms } from "./requestProgram.js"
import { buildTable, makeRouteLookup } from "./routeTable.js"

export type { InferenceProgram, InferenceRequest } from "./requestProgram.js"

export interface InferenceRoutesShape {
  /**
   * The program for a request, or undefined when the path belongs to the management plane. With
   * `fork` (the server's), a request the common path takes answers `common`: it runs without a
   * fiber, and forks its program through `fork` only when it stops being common.
   */
  readonly route: (
    req: http.IncomingMessage,
    res: http.ServerResponse,
    path: string,
    query: string,
    fork?: (request: InferenceRequest) => void
  ) => InferenceRequest | "common" | undefined
  /** Shared with the WebSocket transport. */
  readonly deps: RouteDeps
}

/**
 * The client-facing routes. They are plain node:http handlers running Effect programs on the
 * server's prepared runtime (no router, no per-request spans): this is the hot path. Every
 * answer, success or error, carries X-Gateway-Version and X-Gateway-Request-Id; errors are in
 * the route's wire format. The layer wires the parts: the route table (src/inference/routeTable.ts),
 * a request's program (requestProgram.ts) and the dispatcher's side of the common path (commonRequest.ts).
 */
export class InferenceRoutes extends Context.Tag("gateway/InferenceRoutes")<InferenceRoutes, InferenceRoutesShape>() {
  static readonly layer = Layer.effect(
    InferenceRoutes,
    Effect.gen(function* () {
      const keys = yield* ApiKeys
      const flags = yield* FeatureFlags
      const connections = yield* Connections
      const router = yield* Router
      const idempotency = yield* Idempotency
      const inflight = yield* InFlight
      const hooks = yield* RequestHooks
      const files = yield* Files
      const internal = yield* InternalCalls
      const inboundLimits = yield* InboundLimits
      const access = inferenceAccess(yield* AppConfig)
      // Per-request info lines cost effects on every request: only when info is logged at all.
      const infoOn = LogLevel.lessThanEqual(yield* FiberRef.get(FiberRef.currentMinimumLogLevel), LogLevel.Info)
      const deps: RouteDeps = {
        inference: yield* Inference,
        usage: yield* Usage,
        responses: yield* ResponseStore,
        connections: connections.list,
        flag: (key) => flags.enabled(key as never),
        virtualModels: router.virtualModels,
        bridgeDefaults: Option.getOrUndefined(yield* Effect.serviceOption(Bridges))?.defaults,
        accounting: yield* Accounting,
        mcp: Option.getOrUndefined(yield* Effect.serviceOption(ResponsesMcp)),
        compaction: Option.getOrUndefined(yield* Effect.serviceOption(ResponsesCompaction))
      }
      const table = buildTable(
        inferenceRouteDefs({
          deps,
          jobs: yield* MediaJobs,
          search: yield* WebSearch,
          quotas: yield* Quotas,
          issues: yield* IssueTracker,
          files,
          batches: yield* Batches,
          native: yield* NativeBatches,
          skills: yield* SkillCatalog,
          access,
          realtimeSecrets: Option.getOrUndefined(yield* Effect.serviceOption(RealtimeSecrets))
        })
      )
      const listGemini = listGeminiModels(deps)
      const metrics = Option.getOrUndefined(yield* Effect.serviceOption(GatewayMetrics))
      const runtime = yield* Effect.runtime<never>()

      const { contextOf, program, programOn, finishing } = makeRequestPrograms({
        keys,
        flags,
        idempotency,
        inflight,
        hooks,
        internal,
        inboundLimits,
        access,
        infoOn,
        listGemini
      })
      // The common path (docs/ARCHITECTURE.md, "The common path"): a request without a fiber while it stays common.
      const tryCommon = makeTryCommon({
        keys,
        flags,
        access,
        inboundLimits,
        inflight,
        inference: deps.inference,
        metrics,
        runtime,
        infoOn,
        contextOf,
        programOn,
        finishing
      })
      return { deps, route: makeRouteLookup({ table, program, tryCommon }) }
    })
  )
}
