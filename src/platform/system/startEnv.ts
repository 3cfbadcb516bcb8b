import { CLUSTER_SECRET_ENV } from "../../kernel/clusterSecret.js"

/**
 * A copy without the workers' credential: this module may load before src/kernel/clusterSecret.ts
 * has taken it (a bundle's chunks are not evaluated in import order).
 */
const copyOf = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => {
  const copy = { ...env }
  delete copy[CLUSTER_SECRET_ENV]
  return copy
}

/**
 * The environment the process started with, before the env file was loaded into it: a restarted
 * gateway reads the env file afresh, so a changed value takes effect (set by the CLI's main.ts,
 * read by serve.ts). Its own module so that the CLI records it without loading the server.
 */
let startEnv: NodeJS.ProcessEnv = copyOf(process.env)

export const rememberStartEnv = (env: NodeJS.ProcessEnv) => {
  startEnv = copyOf(env)
}

export const startingEnv = (): NodeJS.ProcessEnv => startEnv
