import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import * as fs from "node:fs"
import { logFileOf, logFiles } from "../../services/observability/LogFile.js"
import type { Parsed } from "../handler.js"
import { appConfig } from "../root.js"
import type { logsOptions } from "./logs.js"

const pretty = (raw: string): string => {
  let e: Record<string, unknown>
  try {
    const v = JSON.parse(raw)
    if (!v || typeof v !== "object") return raw
    e = v
  } catch {
    return raw
  }
  const message = Array.isArray(e.message) ? e.message.join(" ") : String(e.message ?? "")
  const annotations =
    e.annotations && typeof e.annotations === "object"
      ? Object.entries(e.annotations as object).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
      : []
  return [String(e.timestamp ?? ""), String(e.logLevel ?? "").padEnd(7), message, ...annotations].join(" ").trim()
}

/**
 * Follows `file` from `offset`: new complete lines go to `emit`. A rotation (the file replaced,
 * another inode, or cut shorter) starts the new file from its top. Polled on a Schedule until
 * interrupted (Ctrl-C: the runtime interrupts the fiber, the command exits 0).
 */
const follow = (
  file: string,
  from: { readonly ino: number; readonly size: number } | undefined,
  emit: (line: string) => Effect.Effect<void>
) =>
  Effect.suspend(() => {
    let at = from
    let offset = from?.size ?? 0
    let partial = ""
    const poll = Effect.gen(function* () {
      const now = fs.existsSync(file) ? fs.statSync(file) : undefined
      if (!now) return
      if (!at || now.ino !== at.ino || now.size < offset) {
        offset = 0
        partial = ""
      }
      at = now
      if (now.size === offset) return
      const fd = fs.openSync(file, "r")
      const buf = Buffer.alloc(now.size - offset)
      try {
        fs.readSync(fd, buf, 0, buf.length, offset)
      } finally {
        fs.closeSync(fd)
      }
      offset = now.size
      const parts = (partial + buf.toString("utf8")).split("\n")
      partial = parts.pop() ?? ""
      for (const l of parts) yield* emit(l)
    })
    return Effect.repeat(poll, Schedule.spaced("100 millis")).pipe(Effect.asVoid)
  })

/** A file's text with the identity and size it had when read (one descriptor, no race with a writer). */
const readWhole = (f: string) => {
  const fd = fs.openSync(f, "r")
  try {
    const { ino, size } = fs.fstatSync(fd)
    const buf = Buffer.alloc(size)
    fs.readSync(fd, buf, 0, size, 0)
    return { text: buf.toString("utf8"), ino, size }
  } finally {
    fs.closeSync(fd)
  }
}

export const logs = (opts: Parsed<typeof logsOptions>) =>
  Effect.gen(function* () {
    const file = process.env.GATEWAY_LOG_FILE?.trim() || logFileOf((yield* appConfig).dataDir)
    const needle = Option.map(opts.search, (s) => s.toLowerCase())
    const keep = (raw: string) =>
      raw.trim() !== "" && Option.match(needle, { onNone: () => true, onSome: (n) => raw.toLowerCase().includes(n) })
    const print = (raw: string) => (keep(raw) ? Console.log(opts.json ? raw : pretty(raw)) : Effect.void)
    const files = logFiles(file)
    if (files.length === 0 && !opts.follow) return yield* Console.error(`no log file at ${file} yet (the server writes it)`)
    // Oldest first; the current file is read up to a size that following then starts from.
    let current: { readonly ino: number; readonly size: number } | undefined
    let lines: Array<string> = []
    for (const f of files) {
      const { text, ino, size } = readWhole(f)
      if (f === file) current = { ino, size }
      lines.push(...text.split("\n").filter(keep))
    }
    if (Option.isSome(opts.lines)) lines = opts.lines.value === 0 ? [] : lines.slice(-opts.lines.value)
    for (const l of lines) yield* print(l)
    if (opts.follow) yield* follow(file, current, print)
  })
