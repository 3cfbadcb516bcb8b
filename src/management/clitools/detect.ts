import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import type { ToolDetection } from "../../domain/clitools.js"
import { redactText } from "../../kernel/redact.js"

/**
 * Is a command installed (an executable on PATH, or the absolute path given) and does it run
 * (`<command> --version` exits 0 within the timeout)? The version is the first dotted number
 * it prints. A command that does not answer in time is killed, with its process group.
 */

export interface DetectOptions {
  /** The PATH searched (and given to the command). */
  readonly path: string
  readonly home: string
  readonly timeoutMs: number
}

const isExecutable = (file: string): boolean => {
  try {
    return fs.statSync(file).isFile() && (fs.accessSync(file, fs.constants.X_OK), true)
  } catch {
    return false
  }
}

/** The executable `command` names: itself when absolute, else the first match on `pathVar`. */
export const findOnPath = (command: string, pathVar: string): string | undefined => {
  if (path.isAbsolute(command)) return isExecutable(command) ? command : undefined
  for (const dir of pathVar.split(path.delimiter)) {
    if (!dir) continue
    const candidate = path.join(dir, command)
    if (isExecutable(candidate)) return candidate
  }
  return undefined
}

/** Modification time of the resolved executable (0 when unknown): part of the status cache key. */
export const mtimeOf = (file: string): number => {
  try {
    return fs.statSync(file).mtimeMs
  } catch {
    return 0
  }
}

const VERSION = /\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.-]+)?/
const MAX_OUTPUT = 64 * 1024

/** One line of what a command printed, cut short and with anything key-shaped masked. */
export const sanitise = (text: string): string => redactText((text.trim().split(/\r?\n/)[0] ?? "").slice(0, 400))

interface Ran {
  readonly code: number | null
  readonly output: string
}

/** Runs `file --version`; interruption (the timeout) kills its process group. */
const runVersion = (file: string, opts: DetectOptions) =>
  Effect.async<Ran, Error>((resume) => {
    let output = ""
    const child = spawn(file, ["--version"], {
      env: { PATH: opts.path, HOME: opts.home, NO_COLOR: "1", TERM: "dumb" },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    const collect = (c: Buffer) => {
      if (output.length < MAX_OUTPUT) output += c.toString("utf8")
    }
    child.stdout.on("data", collect)
    child.stderr.on("data", collect)
    child.on("error", (e) => resume(Effect.fail(e)))
    child.on("close", (code) => resume(Effect.succeed({ code, output })))
    return Effect.sync(() => {
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL")
      } catch {
        child.kill("SIGKILL")
      }
    })
  })

export const detect = (command: string, opts: DetectOptions): Effect.Effect<ToolDetection> => {
  const commandPath = findOnPath(command, opts.path)
  if (commandPath === undefined) {
    return Effect.succeed({ installed: false, runnable: false, command, reason: `'${command}' was not found on the PATH` })
  }
  const found = { installed: true, command, commandPath }
  const seconds = opts.timeoutMs % 1000 === 0 ? `${opts.timeoutMs / 1000} s` : `${opts.timeoutMs} ms`
  return runVersion(commandPath, opts).pipe(
    Effect.timeoutFail({
      duration: Duration.millis(opts.timeoutMs),
      onTimeout: () => new Error(`'${command} --version' did not answer within ${seconds}`)
    }),
    Effect.map((ran): ToolDetection => {
      const version = VERSION.exec(ran.output)?.[0]
      return ran.code === 0
        ? { ...found, runnable: true, ...(version ? { version } : {}) }
        : {
            ...found,
            runnable: false,
            reason: `'${command} --version' exited with ${ran.code ?? "a signal"}${ran.output.trim() ? `: ${sanitise(ran.output)}` : ""}`
          }
    }),
    Effect.catchAll((e) => Effect.succeed<ToolDetection>({ ...found, runnable: false, reason: sanitise(e.message) })),
    Effect.withSpan("CliTools.detect", { attributes: { command } })
  )
}
