/**
 * The credential the primary of `gateway --workers N` gives every worker for own-route calls
 * (src/server/workers.ts, src/kernel/InternalCalls.ts), taken out of the environment as this module
 * loads. src/cli/main.ts imports it, so it runs before main's own code: before the env file is
 * loaded, a layer is built or any child process starts (plugins with the `env` permission, tunnel
 * agents). The one copy made as modules load, the start's snapshot (src/platform/system/startEnv.ts,
 * which a bundle may evaluate first), leaves it out. So no copy the worker keeps and no environment
 * it gives holds it. The process's initial environment block stays
 * readable in /proc/<pid>/environ to processes of the same user, as DATA_DIR is.
 */
export const CLUSTER_SECRET_ENV = "GATEWAY_CLUSTER_INTERNAL_SECRET"

const given = process.env[CLUSTER_SECRET_ENV]
delete process.env[CLUSTER_SECRET_ENV]

/** What the primary gave this process, once it is known to be a cluster worker (with a channel to its primary); else undefined. */
export const clusterSecret = (): string | undefined =>
  process.env.GATEWAY_WORKER_ID !== undefined && typeof process.send === "function" && given !== undefined && /^[0-9a-f]{64}$/.test(given)
    ? given
    : undefined
