/** The auto routing engine: pure modules (no Effect, no I/O); see docs (Auto routing). */
export * from "./weights.js"
export * from "./features.js"
export * from "./taskFit.js"
export * from "./scorer.js"
export * from "./routers.js"
export * from "./selfHealing.js"
export * from "./variants.js"
export * from "./select.js"
