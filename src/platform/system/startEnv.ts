/**
 * The environment the process started with, before the env file was loaded into it: a restarted
 * gateway reads the env file afresh, so a changed value takes effect (set by the CLI's main.ts,
 * read by serve.ts). Its own module so that the CLI records it without loading the server.
 */
let startEnv: NodeJS.ProcessEnv = { ...process.env }

export const rememberStartEnv = (env: NodeJS.ProcessEnv) => {
  startEnv = { ...env }
}

export const startingEnv = (): NodeJS.ProcessEnv => startEnv
