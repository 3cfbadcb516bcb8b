// The harness's side of ../alloc-probe.cjs: the node arguments and environment that preload it,
// and opening and closing its window (SIGUSR2, then waiting for the probe's file to say so).
import { readFileSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const PROBE = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "alloc-probe.cjs")

/** Node arguments (before the script) and environment that load the probe writing to `file`. */
export const probeLaunch = (file) => ({ nodeArgs: ["--require", PROBE], env: { BENCH_ALLOC_PROBE_OUT: file } })

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const read = (file) => {
  try {
    return JSON.parse(readFileSync(file, "utf8"))
  } catch {
    return null
  }
}

const waitFor = async (file, ok, what, timeoutMs) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const s = read(file)
    if (s?.state === "error" || s?.state === "unsupported") throw new Error(`alloc probe: ${s.error}`)
    if (s && ok(s)) return s
    if (Date.now() > deadline)
      throw new Error(`alloc probe: ${what} not written to ${file} within ${timeoutMs} ms (last: ${JSON.stringify(s)})`)
    await sleep(5)
  }
}

/**
 * A process started with probeLaunch(file): `await p.ready()` once (the handler is installed:
 * a SIGUSR2 before it would kill the process), then `await p.open()` and `await p.close()` around
 * each measurement; close resolves with the window's figures (see ../alloc-probe.cjs).
 */
export const allocProbe = (pid, file, { timeoutMs = 10_000 } = {}) => {
  let seq = 0
  let isOpen = false
  return {
    ready: async () => {
      const s = await waitFor(file, (s) => s.pid === pid, "ready", timeoutMs)
      seq = s.seq
      isOpen = s.state === "open"
    },
    open: async () => {
      if (isOpen) throw new Error("alloc probe: window already open")
      process.kill(pid, "SIGUSR2")
      await waitFor(file, (s) => s.pid === pid && s.seq === seq + 1 && s.state === "open", "window open", timeoutMs)
      seq++
      isOpen = true
    },
    close: async () => {
      if (!isOpen) throw new Error("alloc probe: no window open")
      process.kill(pid, "SIGUSR2")
      isOpen = false
      return waitFor(file, (s) => s.pid === pid && s.seq === seq && s.state === "closed", "window result", timeoutMs)
    }
  }
}
