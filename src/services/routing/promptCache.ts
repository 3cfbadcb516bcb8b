/**
 * Prompt-cache affinity (docs/routing.md, "Prompt-cache affinity"): how long a provider keeps a
 * prompt's prefix cached after its last use, and which combo strategies keep a conversation where
 * its cache is warm.
 */
import type { Candidate } from "./types.js"

/** The lifetime of a provider's prompt cache after its last use, by provider id, else by wire format. */
const BY_PROVIDER: Readonly<Record<string, number>> = {
  // Cached prefixes stay 5 to 10 minutes after their last use (longer off-peak).
  openai: 10 * 60_000,
  // The default (ephemeral) cache lives 5 minutes, refreshed by every hit.
  anthropic: 5 * 60_000,
  // The context cache on disk lasts hours.
  deepseek: 60 * 60_000
}
const BY_FORMAT: Readonly<Record<string, number>> = { anthropic: 5 * 60_000, "openai-responses": 10 * 60_000 }
const DEFAULT_TTL_MS = 5 * 60_000

/** How long `c`'s cache is expected to hold a prefix it just served; `overrideMs` (the setting) wins. */
export const promptCacheTtlMs = (c: Candidate, overrideMs: number | undefined): number =>
  overrideMs ?? BY_PROVIDER[c.connection.provider.id] ?? BY_FORMAT[c.connection.format] ?? DEFAULT_TTL_MS

/**
 * Strategies that spread requests on purpose (rotation, randomness, usage or quota balance): a
 * conversation follows them unless the combo asks for affinity (`config.promptCacheAffinity`).
 * The others order by preference, and a warm candidate is put first.
 */
const SPREADING = new Set(["round-robin", "weighted", "random", "strict-random", "p2c", "least-used", "quota-share", "context-relay"])

/** Whether a combo of `strategy` keeps conversations where their cache is warm (`choice`: the combo's own setting). */
export const comboAffinity = (strategy: string, choice: boolean | undefined): boolean => choice ?? !SPREADING.has(strategy)
