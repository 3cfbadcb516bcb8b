/**
 * The leaderboard ELO snapshot of the auto engine (LEADERBOARD_ELO_SYNC_ENABLED, docs/feature-flags.md):
 * an in-memory map, replaced whole by each `LeaderboardSync` round and read synchronously by the
 * scorer's `taskFit` factor (no I/O per request). A listed model's ELO, normalised onto taskFit's
 * 0..1 scale, overrides the built-in table (src/services/routing/auto/taskFit.ts) for every task type;
 * unlisted models, or an empty snapshot (flag off, no URL), keep the built-in value.
 */

/** ELO at or below this is fitness 0. */
export const ELO_FLOOR = 1000
/** ELO at or above this is fitness 1 (linear between). */
export const ELO_CEIL = 1500

/** An ELO on taskFit's 0..1 scale: (elo − 1000) / 500, clamped. */
export const eloToFitness = (elo: number): number => Math.min(1, Math.max(0, (elo - ELO_FLOOR) / (ELO_CEIL - ELO_FLOOR)))

export interface LeaderboardEntry {
  /** `<model id>` or `<provider>/<model id>`, lower-cased. */
  readonly model: string
  readonly elo: number
}

/**
 * Parses `{ "models": [{ "model": "...", "elo": 1234 }] }` or a plain array of such entries. Entries
 * without a non-empty string `model` or a finite numeric `elo` are ignored.
 */
export const parseLeaderboard = (json: unknown): ReadonlyArray<LeaderboardEntry> => {
  const list = Array.isArray(json)
    ? json
    : json !== null && typeof json === "object" && Array.isArray((json as Record<string, unknown>)["models"])
      ? ((json as Record<string, unknown>)["models"] as Array<unknown>)
      : []
  const out: Array<LeaderboardEntry> = []
  for (const raw of list) {
    if (raw === null || typeof raw !== "object") continue
    const e = raw as Record<string, unknown>
    const model = typeof e["model"] === "string" ? e["model"].trim().toLowerCase() : ""
    const elo = e["elo"]
    if (model === "" || typeof elo !== "number" || !Number.isFinite(elo)) continue
    out.push({ model, elo })
  }
  return out
}

export class LeaderboardSnapshot {
  private fitness: ReadonlyMap<string, number> = new Map()

  /** Replaces the snapshot (an empty list clears it: the built-in table applies again). */
  set(entries: ReadonlyArray<LeaderboardEntry>): void {
    const m = new Map<string, number>()
    for (const e of entries) m.set(e.model, eloToFitness(e.elo))
    this.fitness = m
  }

  clear(): void {
    this.fitness = new Map()
  }

  get size(): number {
    return this.fitness.size
  }

  /** The synced fitness of `<provider>/<model>`, else of `<model>`; undefined when not listed. */
  lookup(model: string, provider: string): number | undefined {
    if (this.fitness.size === 0) return undefined
    const m = model.toLowerCase()
    return this.fitness.get(`${provider.toLowerCase()}/${m}`) ?? this.fitness.get(m)
  }
}
