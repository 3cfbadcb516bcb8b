import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import { LeaderboardSnapshot } from "./auto/leaderboard.js"
import { RouterRegistry } from "./auto/routers.js"
import { SelfHealing } from "./auto/selfHealing.js"
import { seededRandom, systemRandom } from "./random.js"
import type { RandomSource, RouterStrategy } from "./types.js"

export interface AutoEngineShape {
  /** Router strategies by name: the built-ins plus registered custom ones. */
  readonly registry: RouterRegistry
  /** Exclusions, probes and incident mode of auto routing (in memory). */
  readonly healing: SelfHealing
  /** Every random choice of routing (weighted, p2c, random, exploration): injectable for tests. */
  readonly random: RandomSource
  /** Registers a custom router strategy (`name`, `description`, `select(pool, context)`); throws when invalid. */
  readonly register: (strategy: RouterStrategy) => void
  /** Leaderboard ELO fitness (LEADERBOARD_ELO_SYNC_ENABLED), filled by LeaderboardSync; empty: the built-in table. */
  readonly leaderboard: LeaderboardSnapshot
}

/**
 * The auto-routing engine's state: the router-strategy registry, self-healing memory and the
 * random source. Custom strategies registered here are selectable through a combo's
 * `config.routerStrategy` (or the legacy `config.auto.routerStrategy`).
 */
export class AutoEngine extends Context.Tag("gateway/AutoEngine")<AutoEngine, AutoEngineShape>() {
  static readonly make = (random: RandomSource = systemRandom, custom: ReadonlyArray<RouterStrategy> = []): AutoEngineShape => {
    const registry = new RouterRegistry()
    for (const s of custom) registry.register(s)
    return { registry, healing: new SelfHealing(), random, register: (s) => registry.register(s), leaderboard: new LeaderboardSnapshot() }
  }

  static readonly layer = Layer.sync(AutoEngine, () => AutoEngine.make())

  /** A deterministic engine for tests: seeded randomness, optional custom strategies. */
  static readonly layerTest = (seed = 1, custom: ReadonlyArray<RouterStrategy> = []) =>
    Layer.sync(AutoEngine, () => AutoEngine.make(seededRandom(seed), custom))
}
