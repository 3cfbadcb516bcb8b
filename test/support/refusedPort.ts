/**
 * A port on 127.0.0.1 that refuses connections, and keeps refusing them while the suite runs.
 *
 * A port taken with `listen(0)` and closed again is free only until the next `listen(0)` or
 * outgoing connection of any test process picks it: under a loaded `npm test` another file's
 * server answered on it (a 404, not a refusal). Ports are handed out that way only from the
 * kernel's ephemeral range, so this one is chosen outside it (below it, or above it when the range
 * starts low), where only an explicit `listen` on that very number could take it, and is checked
 * to refuse before it is returned. Every file gets the same port: never `listen` on it.
 */
import { readFileSync } from "node:fs"
import * as net from "node:net"

/** The kernel's ephemeral range (Linux); elsewhere the IANA range, 49152-65535. */
const ephemeralRange = (): readonly [number, number] => {
  try {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number)
    if (Number.isInteger(low) && Number.isInteger(high)) return [low!, high!]
  } catch {
    // Not Linux.
  }
  return [49152, 65535]
}

/** Whether a connection to `port` is refused now (a second without an answer: not refused). */
const refuses = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port })
    s.setTimeout(1000, () => {
      s.destroy()
      resolve(false)
    })
    s.once("connect", () => {
      s.destroy()
      resolve(false)
    })
    s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code === "ECONNREFUSED"))
  })

/** The first port outside the ephemeral range that refuses a connection now. */
export const refusedPort = async (): Promise<number> => {
  const [low, high] = ephemeralRange()
  const candidates: Array<number> = []
  if (low > 2048) for (let port = low - 1; port > low - 200; port--) candidates.push(port)
  if (high < 65335) for (let port = high + 1; port < high + 200; port++) candidates.push(port)
  if (candidates.length === 0)
    throw new Error(`the ephemeral port range ${low}-${high} leaves no port outside it that a test could keep refusing`)
  for (const port of candidates) if (await refuses(port)) return port
  throw new Error(`no port refusing connections next to the ephemeral range ${low}-${high} on 127.0.0.1`)
}
