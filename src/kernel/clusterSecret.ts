/**
 * The credential the primary of `gateway --workers N` gives every worker for own-route calls
 * (src/server/workers.ts, src/kernel/InternalCalls.ts), taken out of the environment as this module
 * loads. src/cli/main.ts imports it, so that happens before main's own code runs: before the start's
 * snapshot of the environment is kept (`rememberStartEnv`), the env file is loaded, a layer is built
 * or any child process starts (plugins with the `env` permission, tunnel agents): nothing the
 * worker keeps or starts holds it.
 */
export const CLUSTER_SECRET_ENV = "GATEWAY_CLUSTER_INTERNAL_SECRET"

const given = process.env[CLUSTER_SECRET_ENV]
delete process.env[CLUSTER_SECRET_ENV]

/** What the primary gave this process, once it is known to be a cluster worker (with a channel to its primary); else undefined. */
export const clusterSecret = (): string | undefined =>
  process.env.GATEWAY_WORKER_ID !== undefined && typeof process.send === "function" && given !== undefined && /^[0-9a-f]{64}$/.test(given)
    ? given
    : undefined
