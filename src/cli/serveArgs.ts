/**
 * The command lines that only start the server (`gateway`, `gateway --port 3000 --host 0.0.0.0`):
 * read without @effect/cli, so that they run the server alone (src/cli/main.ts) and, built, from
 * its code cache (dist/bundle/gateway.mjs imports this file on its own; scripts/bundle-cli.mjs).
 * Anything else, or anything here in another form (`--port=3000`, a value the CLI would refuse or
 * read as a command's name, a flag twice, `--workers`, `--tls-cert`, `--json`, a subcommand), is
 * left to the CLI's parser, which answers it as it always has. Imports nothing: the loader reads
 * it before anything else.
 */

/** The root options such a command line sets (the others at their defaults). */
export interface ServeArgs {
  readonly port?: number
  readonly host?: string
  readonly dataDir?: string
  readonly noOpen: boolean
}

/**
 * The names of the top-level commands (src/cli/app.ts `subcommands`; test/cli.serveArgs.test.ts
 * keeps the two the same). @effect/cli splits a command line at the first word that names one,
 * even as an option's value (`gateway --data-dir backup` is `gateway --data-dir` and `backup`, a
 * usage error): a value that names one is left to the CLI, so it is answered as before.
 */
export const COMMAND_NAMES: ReadonlySet<string> = new Set([
  "setup",
  "doctor",
  "providers",
  "keys",
  "users",
  "teams",
  "login",
  "logout",
  "status",
  "combo",
  "compression",
  "context",
  "quota",
  "usage",
  "cache",
  "backup",
  "restore",
  "db",
  "reset-password",
  "reset-encrypted-columns",
  "config",
  "env",
  "health",
  "logs",
  "inspect",
  "models",
  "provider",
  "eval",
  "shadow",
  "replay",
  "tunnel",
  "plugins",
  "test",
  "update",
  "completion",
  "a2a",
  "mcp",
  "setup-codex",
  "setup-claude",
  "setup-gemini",
  "setup-opencode",
  "setup-qwen",
  "setup-kilo",
  "setup-cline",
  "setup-continue",
  "setup-cursor",
  "setup-copilot",
  "launch",
  "launch-codex"
])

/** A port as the CLI takes it (root.ts `Port`), written as plain decimal digits. */
const PORT = /^(0|[1-9][0-9]{0,4})$/

/**
 * The root options of `args` (process.argv after the script) when it holds nothing but `--port
 * <0-65535>`, `--host <text>`, `--data-dir <text>` and `--no-open`, each at most once, each value
 * a separate word that does not start with `-` and names no command (`COMMAND_NAMES`); undefined
 * for any other command line.
 */
export const serveArgs = (args: ReadonlyArray<string>): ServeArgs | undefined => {
  let port: number | undefined
  let host: string | undefined
  let dataDir: string | undefined
  let noOpen = false
  for (let i = 0; i < args.length; i++) {
    const flag = args[i]
    if (flag === "--no-open") {
      if (noOpen) return undefined
      noOpen = true
      continue
    }
    const value = args[i + 1]
    if (value === undefined || value === "" || value.startsWith("-") || COMMAND_NAMES.has(value.toLowerCase())) return undefined
    i++
    if (flag === "--port") {
      if (port !== undefined || !PORT.test(value) || Number(value) > 65535) return undefined
      port = Number(value)
    } else if (flag === "--host") {
      if (host !== undefined) return undefined
      host = value
    } else if (flag === "--data-dir") {
      if (dataDir !== undefined) return undefined
      dataDir = value
    } else return undefined
  }
  return {
    ...(port !== undefined ? { port } : {}),
    ...(host !== undefined ? { host } : {}),
    ...(dataDir !== undefined ? { dataDir } : {}),
    noOpen
  }
}
