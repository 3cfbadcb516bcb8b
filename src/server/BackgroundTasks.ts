/**
 * The periodic background services of docs/operations.md, "Background tasks", in one layer for
 * src/server/Gateway.ts: the connection health checks, the runtime tasks (quota refresh, cloud sync), the pricing sync, the leaderboard ELO
 * sync.
 */
import * as Layer from "effect/Layer"
import { HealthChecks } from "../services/resilience/HealthChecks.js"
import { RuntimeTasks } from "./RuntimeTasks.js"
import { PricingSync } from "../services/accounting/PricingSync.js"
import { LeaderboardSync } from "../services/routing/LeaderboardSync.js"

export const BackgroundTasks = Layer.mergeAll(HealthChecks, RuntimeTasks, PricingSync, LeaderboardSync)
