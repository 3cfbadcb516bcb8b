import * as fs from "node:fs"
import * as path from "node:path"

/**
 * The gateway's log file (docs/operations.md, "Sessions and system"): JSON lines in
 * `DATA_DIR/logs/gateway.log`, rotated by size (`gateway.log.1` is the newest older file) with
 * a number of files kept. The logger only appends to a buffer (no I/O on the request path);
 * Logging.ts flushes it a moment after a line is queued (`onQueued`) and at shutdown.
 */
export interface LogFileOptions {
  readonly file: string
  readonly maxBytes: number
  /** Rotated files kept besides the current one. */
  readonly keep: number
  /** Called when a line is queued into an empty buffer: the owner arms a flush then, and sleeps while nothing is logged. */
  readonly onQueued?: () => void
}

export const logFileOf = (dataDir: string): string => path.join(dataDir, "logs", "gateway.log")

/** The log files, oldest first (`gateway.log.<keep>` ... `gateway.log.1`, `gateway.log`). */
export const logFiles = (file: string): ReadonlyArray<string> => {
  const dir = path.dirname(file)
  const base = path.basename(file)
  let names: Array<string>
  try {
    names = fs.readdirSync(dir)
  } catch {
    return []
  }
  const rotated = names
    .map((n) => (n.startsWith(`${base}.`) ? Number(n.slice(base.length + 1)) : NaN))
    .filter((n) => Number.isInteger(n) && n > 0)
    .sort((a, b) => b - a)
    .map((n) => `${file}.${n}`)
  return names.includes(base) ? [...rotated, file] : rotated
}

export class LogFile {
  private pending: Array<string> = []
  private size = -1

  constructor(readonly options: LogFileOptions) {}

  /** Queues one line (no I/O). A burst beyond 10,000 unflushed lines drops the oldest. */
  push(line: string): void {
    if (this.pending.length === 0) this.options.onQueued?.()
    else if (this.pending.length >= 10_000) this.pending.shift()
    this.pending.push(line)
  }

  /**
   * Writes what is queued, rotating whenever the next line would pass the size limit, so no file
   * grows past it however many lines one flush carries (a line longer than the limit gets a file
   * of its own).
   */
  flush(): void {
    if (this.pending.length === 0) return
    const lines = this.pending
    this.pending = []
    const { file, maxBytes } = this.options
    if (this.size < 0) {
      fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
      try {
        this.size = fs.statSync(file).size
      } catch {
        this.size = 0
      }
    }
    let chunk = ""
    let chunkBytes = 0
    const write = () => {
      if (chunkBytes === 0) return
      fs.appendFileSync(file, chunk, { mode: 0o600 })
      this.size += chunkBytes
      chunk = ""
      chunkBytes = 0
    }
    for (const line of lines) {
      const text = line + "\n"
      const bytes = Buffer.byteLength(text)
      if (this.size + chunkBytes > 0 && this.size + chunkBytes + bytes > maxBytes) {
        write()
        this.rotate()
      }
      chunk += text
      chunkBytes += bytes
    }
    write()
  }

  private rotate(): void {
    const { file, keep } = this.options
    for (const old of logFiles(file)) {
      if (old === file) continue
      const n = Number(old.slice(file.length + 1))
      if (n >= keep) fs.rmSync(old, { force: true })
      else fs.renameSync(old, `${file}.${n + 1}`)
    }
    if (keep > 0) fs.renameSync(file, `${file}.1`)
    else fs.rmSync(file, { force: true })
    this.size = 0
  }
}
