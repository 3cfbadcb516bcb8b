/**
 * Which local process opened a captured connection, from its ephemeral port through /proc (Linux only). It never throws nor holds a
 * capture up: any failure is `null` (docs/inspector.md#what-an-entry-holds).
 */
import { readdir, readFile, readlink } from "node:fs/promises"
import * as path from "node:path"

export interface ProcessInfo {
  readonly pid: number
  /** `/proc/<pid>/comm`: the executable's name as the kernel keeps it (at most 15 characters). */
  readonly name: string
}

export interface ProcessAttribution {
  /**
   * The process owning the client side of a loopback connection. `localPort` is the client's
   * ephemeral port (the remote port of the socket the gateway accepted); `serverPort`, when given,
   * is the port the client connected to and only breaks ties between sockets sharing the local port.
   */
  readonly lookup: (localPort: number, serverPort?: number) => Promise<ProcessInfo | null>
}

export interface ProcessAttributionOptions {
  /** Where procfs is mounted (tests point it at a crafted directory). */
  readonly procRoot?: string
  /** How long TCP tables, the inode→pid map and per-port answers are reused (spec: 1 s). */
  readonly ttlMs?: number
  /** Defaults to `process.platform`; anything but `linux` answers null. */
  readonly platform?: string
  /** Most descriptor links read by one scan of /proc, so a host with huge fd tables cannot stall it. */
  readonly maxFds?: number
  /** Longest one scan of /proc may run; what was found so far is used. */
  readonly scanBudgetMs?: number
}

/** One row of a kernel TCP table, as far as attribution needs it. */
export interface TcpRow {
  readonly localPort: number
  readonly remotePort: number
  /** Hex state: `01` ESTABLISHED, `0A` LISTEN, ... */
  readonly state: string
  readonly inode: number
  readonly remoteLoopback: boolean
}

const ESTABLISHED = "01"
const LISTEN = "0A"
const IPV6_LOOPBACK = "00000000000000000000000001000000"
/** `::ffff:127.x.x.x` in the kernel's word order. */
const IPV4_MAPPED_PREFIX = "0000000000000000FFFF0000"

/** Loopback addresses in the kernel's hex notation (IPv4 is one little-endian word: `0100007F` is 127.0.0.1). */
const isLoopbackHex = (addr: string): boolean => {
  const a = addr.toUpperCase()
  if (a.length === 8) return a.endsWith("7F")
  return a === IPV6_LOOPBACK || (a.startsWith(IPV4_MAPPED_PREFIX) && a.endsWith("7F"))
}

const splitEndpoint = (field: string): { addr: string; port: number } | null => {
  const i = field.lastIndexOf(":")
  if (i <= 0) return null
  const port = Number.parseInt(field.slice(i + 1), 16)
  return Number.isNaN(port) ? null : { addr: field.slice(0, i), port }
}

/** Parses `/proc/net/tcp` or `/proc/net/tcp6` text (same layout; the header line and malformed rows are skipped). */
export const parseTcpTable = (text: string): TcpRow[] => {
  const rows: TcpRow[] = []
  for (const line of text.split("\n")) {
    const f = line.trim().split(/\s+/)
    if (f.length < 10 || !/^\d+:$/.test(f[0]!)) continue
    const local = splitEndpoint(f[1]!)
    const remote = splitEndpoint(f[2]!)
    const inode = Number.parseInt(f[9]!, 10)
    if (local === null || remote === null || Number.isNaN(inode)) continue
    rows.push({
      localPort: local.port,
      remotePort: remote.port,
      state: f[3]!.toUpperCase(),
      inode,
      remoteLoopback: isLoopbackHex(remote.addr)
    })
  }
  return rows
}

/**
 * The row of the client's socket among those with that local port. A listening socket is never
 * the client's, and inode 0 (TIME_WAIT) has no owner left. Beyond that nothing is required, only
 * preferred: a connected socket, to the given server port, with a loopback peer.
 */
export const pickRow = (rows: ReadonlyArray<TcpRow>, localPort: number, serverPort?: number): TcpRow | null => {
  let best: TcpRow | null = null
  let bestScore = -1
  for (const r of rows) {
    if (r.localPort !== localPort || r.inode === 0 || r.state === LISTEN) continue
    const score =
      (serverPort !== undefined && r.remotePort === serverPort ? 4 : 0) + (r.state === ESTABLISHED ? 2 : 0) + (r.remoteLoopback ? 1 : 0)
    if (score > bestScore) (best = r), (bestScore = score)
  }
  return best
}

/**
 * A value read from the system, shared by concurrent callers. `recent()` accepts a read started
 * within the ttl; `since(t)` needs one started at or after `t` (the connection being looked up
 * existed at `t`, so an older read may not show it). Reads never overlap and start at most once per
 * `minGapMs`, so a flood of unattributable connections costs one read at a time, not one each.
 */
const makeSnapshot = <T>(read: () => Promise<T>, ttlMs: number, minGapMs: number) => {
  interface Read {
    startedAt: number | null
    value: Promise<T>
  }
  let current: Read | undefined
  let queued: Read | undefined

  const since = (t: number): Promise<T> => {
    if (current?.startedAt != null && current.startedAt >= t) return current.value
    if (queued !== undefined) return queued.value
    const previous = current
    const entry: Read = { startedAt: null, value: Promise.resolve(undefined as T) }
    // Queued before the body runs: with nothing to wait for, it becomes `current` synchronously.
    queued = entry
    entry.value = (async () => {
      if (previous !== undefined) {
        await previous.value.catch(() => undefined)
        const wait = (previous.startedAt ?? 0) + minGapMs - Date.now()
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
      }
      entry.startedAt = Date.now()
      current = entry
      queued = undefined
      return read()
    })()
    return entry.value
  }

  const recent = (): { value: Promise<T>; startedAt: number } => {
    const now = Date.now()
    if (current?.startedAt != null && now - current.startedAt < ttlMs) return { value: current.value, startedAt: current.startedAt }
    return { value: since(now), startedAt: now }
  }

  return { since, recent }
}

const readText = (file: string): Promise<string | null> => readFile(file, "utf8").catch(() => null)

const SOCKET_LINK = /^socket:\[(\d+)\]$/

/** Runs `fn` over `items` `width` at a time, stopping early when `stop()` says so. */
const inChunks = async <A>(items: ReadonlyArray<A>, width: number, stop: () => boolean, fn: (a: A) => Promise<void>): Promise<void> => {
  for (let i = 0; i < items.length && !stop(); i += width) await Promise.all(items.slice(i, i + width).map(fn))
}

export const makeProcessAttribution = (opts: ProcessAttributionOptions = {}): ProcessAttribution => {
  const procRoot = opts.procRoot ?? "/proc"
  const ttlMs = opts.ttlMs ?? 1000
  const maxFds = opts.maxFds ?? 100_000
  const scanBudgetMs = opts.scanBudgetMs ?? 500
  if ((opts.platform ?? process.platform) !== "linux") return { lookup: async () => null }

  const readTables = async (): Promise<TcpRow[]> => {
    const [v4, v6] = await Promise.all([readText(path.join(procRoot, "net", "tcp")), readText(path.join(procRoot, "net", "tcp6"))])
    return [...parseTcpTable(v4 ?? ""), ...parseTcpTable(v6 ?? "")]
  }

  /** Every socket inode held open by a readable process → its pid (the lowest pid when shared, e.g. across a fork). */
  const scanSockets = async (): Promise<Map<number, number>> => {
    const owners = new Map<number, number>()
    const deadline = Date.now() + scanBudgetMs
    let links = 0
    const exhausted = () => links >= maxFds || Date.now() > deadline
    const entries = await readdir(procRoot).catch(() => [] as string[])
    const pids = entries
      .filter((e) => /^\d+$/.test(e))
      .map(Number)
      .sort((a, b) => a - b)
    await inChunks(pids, 32, exhausted, async (pid) => {
      const fdDir = path.join(procRoot, String(pid), "fd")
      // Another user's process (EACCES) or one that exited meanwhile (ENOENT): skipped.
      const fds = await readdir(fdDir).catch(() => [] as string[])
      const budget = Math.max(0, Math.min(fds.length, maxFds - links))
      links += budget
      await inChunks(
        fds.slice(0, budget),
        256,
        () => Date.now() > deadline,
        async (fd) => {
          const target = await readlink(path.join(fdDir, fd)).catch(() => null)
          const m = target === null ? null : SOCKET_LINK.exec(target)
          if (m === null) return
          const inode = Number(m[1])
          const known = owners.get(inode)
          if (known === undefined || pid < known) owners.set(inode, pid)
        }
      )
    })
    return owners
  }

  // Re-reading the tables is cheap; a scan of every process's descriptors is not, so scans are spaced further apart.
  const tables = makeSnapshot(readTables, ttlMs, Math.min(ttlMs, 50))
  const sockets = makeSnapshot(scanSockets, ttlMs, Math.min(ttlMs, 200))
  const answers = new Map<number, { at: number; value: Promise<ProcessInfo | null> }>()

  const attribute = async (localPort: number, serverPort: number | undefined, askedAt: number): Promise<ProcessInfo | null> => {
    const cachedRows = tables.recent()
    let row = pickRow(await cachedRows.value, localPort, serverPort)
    if (row === null && cachedRows.startedAt < askedAt) row = pickRow(await tables.since(askedAt), localPort, serverPort)
    if (row === null) return null
    const cachedOwners = sockets.recent()
    let pid = (await cachedOwners.value).get(row.inode)
    if (pid === undefined && cachedOwners.startedAt < askedAt) pid = (await sockets.since(askedAt)).get(row.inode)
    if (pid === undefined) return null
    const comm = await readText(path.join(procRoot, String(pid), "comm"))
    return comm === null ? null : { pid, name: comm.trim() }
  }

  const lookup = (localPort: number, serverPort?: number): Promise<ProcessInfo | null> => {
    if (!Number.isInteger(localPort) || localPort < 1 || localPort > 65535) return Promise.resolve(null)
    const now = Date.now()
    const key = serverPort === undefined ? localPort : localPort * 65536 + serverPort
    const hit = answers.get(key)
    if (hit !== undefined && now - hit.at < ttlMs) return hit.value
    if (answers.size > 4096) for (const [k, v] of answers) if (now - v.at >= ttlMs) answers.delete(k)
    const value = attribute(localPort, serverPort, now).catch(() => null)
    answers.set(key, { at: now, value })
    return value
  }

  return { lookup }
}
