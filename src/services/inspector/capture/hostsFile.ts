/**
 * The custom-host mode's hosts file edits: custom hosts pointed at loopback inside one marked block, always replaced whole; every
 * line outside it is kept byte for byte (docs/inspector.md#2-custom-hosts).
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"
import * as Data from "effect/Data"

export const BLOCK_BEGIN = "# >>> gateway inspector custom hosts (managed; removed on stop) >>>"
export const BLOCK_END = "# <<< gateway inspector custom hosts <<<"

/**
 * A hosts file edit that failed. `reason`: `permission` (the file or its directory is not
 * writable: the gateway needs elevated rights), `invalid-host` (a name refused before any write),
 * `io` (anything else).
 */
export class HostsFileError extends Data.TaggedError("HostsFileError")<{
  readonly reason: "permission" | "invalid-host" | "io"
  readonly message: string
  readonly file: string
}> {}

/**
 * A custom host name, lowercase and without a trailing dot. Letters, digits, dots and hyphens,
 * labels of 1 to 63 characters, 253 at most in all. IP literals are refused: a hosts file maps
 * names, and an address cannot be redirected by it.
 */
export const validateHostName = (host: string, file = ""): string => {
  const h = host.trim().toLowerCase().replace(/\.$/, "")
  const refuse = (why: string) =>
    new HostsFileError({ reason: "invalid-host", file, message: `invalid host ${JSON.stringify(host.slice(0, 100))}: ${why}` })
  if (net.isIP(h.replace(/^\[|\]$/g, "")) !== 0) throw refuse("an IP address cannot be redirected through the hosts file; give a host name")
  if (h.length === 0) throw refuse("empty")
  if (h.length > 253) throw refuse("longer than 253 characters")
  if (!/^[a-z0-9.-]+$/.test(h)) throw refuse("only letters, digits, dots and hyphens are allowed")
  for (const label of h.split(".")) {
    if (label.length === 0) throw refuse("empty label (two dots in a row, or a leading dot)")
    if (label.length > 63) throw refuse("a label is longer than 63 characters")
    if (label.startsWith("-") || label.endsWith("-")) throw refuse("a label starts or ends with a hyphen")
  }
  return h
}

/** One line of the file and the terminator it had (`""` for a last line without one). */
interface Line {
  readonly text: string
  eol: string
}

const splitLines = (content: string): Array<Line> => {
  const lines: Array<Line> = []
  const re = /\r?\n/g
  let start = 0
  let m: RegExpExecArray | null
  while ((m = re.exec(content))) {
    lines.push({ text: content.slice(start, m.index), eol: m[0] })
    start = m.index + m[0].length
  }
  if (start < content.length) lines.push({ text: content.slice(start), eol: "" })
  return lines
}

const joinLines = (lines: ReadonlyArray<Line>): string => lines.map((l) => l.text + l.eol).join("")

const ENTRY = /^\s*(?:127\.0\.0\.1|::1)\s+(\S+)\s*$/

/** The block's line range `[begin, end]` (inclusive). A begin marker without its end (a hand-edited file) spans the entry lines after it.
 * */
const findBlock = (lines: ReadonlyArray<Line>): { begin: number; end: number } | undefined => {
  const begin = lines.findIndex((l) => l.text.trim() === BLOCK_BEGIN)
  if (begin < 0) return undefined
  const close = lines.findIndex((l, i) => i > begin && l.text.trim() === BLOCK_END)
  if (close >= 0) return { begin, end: close }
  let end = begin
  while (end + 1 < lines.length && ENTRY.test(lines[end + 1]!.text)) end++
  return { begin, end }
}

const fsError = (file: string, error: unknown, doing: string): HostsFileError => {
  const code = (error as NodeJS.ErrnoException)?.code
  if (code === "EACCES" || code === "EPERM") {
    return new HostsFileError({
      reason: "permission",
      file,
      message: `cannot ${doing} ${file} (${code}): editing the hosts file needs elevated rights; run the gateway as root (Administrator on Windows) or make the file writable by its user`
    })
  }
  if (code === "EROFS")
    return new HostsFileError({ reason: "permission", file, message: `cannot ${doing} ${file}: it is on a read-only file system` })
  return new HostsFileError({ reason: "io", file, message: `cannot ${doing} ${file}: ${(error as Error)?.message ?? String(error)}` })
}

const read = async (file: string): Promise<string> => {
  try {
    return await fs.readFile(file, "utf8")
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return ""
    throw fsError(file, error, "read")
  }
}

/**
 * Writes `content` through a temporary file in the same directory and a rename, so a reader never
 * sees half a file. A hosts file bind-mounted into a container cannot be replaced (EBUSY, EXDEV),
 * and a directory the gateway may not write to (only the file is writable) refuses the temporary
 * file (EACCES, EPERM, EROFS): both fall back to writing the file in place.
 */
const write = async (file: string, content: string): Promise<void> => {
  let mode = 0o644
  try {
    mode = (await fs.stat(file)).mode & 0o7777
  } catch {
    // a new file keeps the usual hosts file mode
  }
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.gateway-${process.pid}-${crypto.randomBytes(4).toString("hex")}.tmp`)
  try {
    await fs.writeFile(tmp, content, { mode })
    await fs.chmod(tmp, mode)
    await fs.rename(tmp, file)
    return
  } catch (error) {
    await fs.rm(tmp, { force: true }).catch(() => undefined)
    const code = (error as NodeJS.ErrnoException).code
    if (code !== "EBUSY" && code !== "EXDEV" && code !== "EPERM" && code !== "EACCES" && code !== "EROFS")
      throw fsError(file, error, "write")
  }
  try {
    await fs.writeFile(file, content)
  } catch (error) {
    throw fsError(file, error, "write")
  }
}

/** Edits of one file run one after the other: two hosts added at once must both land. */
const queues = new Map<string, Promise<unknown>>()

const serialized = <A>(file: string, task: () => Promise<A>): Promise<A> => {
  const key = path.resolve(file)
  const run = (queues.get(key) ?? Promise.resolve()).then(task, task)
  const tail = run.catch(() => undefined)
  queues.set(key, tail)
  void tail.then(() => queues.get(key) === tail && queues.delete(key))
  return run
}

/** The hosts in the block, in file order, each once (a missing file or block: none). */
export const readBlockHosts = async (file: string): Promise<Array<string>> => {
  const lines = splitLines(await read(file))
  const block = findBlock(lines)
  if (block === undefined) return []
  const hosts: Array<string> = []
  for (let i = block.begin + 1; i <= block.end; i++) {
    const host = ENTRY.exec(lines[i]!.text)?.[1]?.toLowerCase()
    if (host !== undefined && !hosts.includes(host)) hosts.push(host)
  }
  return hosts
}

/** The file's content with the block holding exactly `hosts` (none: no block). */
export const withBlockHosts = (content: string, hosts: ReadonlyArray<string>): string => {
  const lines = splitLines(content)
  const eol = content.includes("\r\n") && !/(^|[^\r])\n/.test(content) ? "\r\n" : "\n"
  const block = findBlock(lines)
  let at = lines.length
  if (block !== undefined) {
    // A block that ended the file without a final newline had given the line before it one: take it back.
    const lastHadEol = lines[block.end]!.eol !== ""
    lines.splice(block.begin, block.end - block.begin + 1)
    at = block.begin
    if (!lastHadEol && at === lines.length && at > 0) lines[at - 1]!.eol = ""
  }
  if (hosts.length === 0) return joinLines(lines)
  const added: Array<Line> = [{ text: BLOCK_BEGIN, eol }]
  for (const host of hosts) added.push({ text: `127.0.0.1 ${host}`, eol }, { text: `::1 ${host}`, eol })
  added.push({ text: BLOCK_END, eol })
  if (at === lines.length && at > 0 && lines[at - 1]!.eol === "") {
    // Appended to a file without a final newline: the line before gets one, the block's last line none.
    lines[at - 1]!.eol = eol
    added[added.length - 1]!.eol = ""
  }
  lines.splice(at, 0, ...added)
  return joinLines(lines)
}

/**
 * Rewrites the block to point exactly `hosts` at 127.0.0.1 and ::1; an empty list removes the
 * block. Lines outside the block are never touched; nothing is written when nothing changes.
 * Every name is validated before the file is read.
 */
export const setBlockHosts = (file: string, hosts: ReadonlyArray<string>): Promise<void> => {
  let names: Array<string>
  try {
    names = [...new Set(hosts.map((h) => validateHostName(h, file)))]
  } catch (error) {
    return Promise.reject(error)
  }
  return serialized(file, async () => {
    const content = await read(file)
    const next = withBlockHosts(content, names)
    if (next !== content) await write(file, next)
  })
}

/** Removes the block (what stopping the mode, or a start after a crash, does). */
export const removeBlock = (file: string): Promise<void> => setBlockHosts(file, [])
