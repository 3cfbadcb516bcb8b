/**
 * A port on 127.0.0.1 that refuses connections, and keeps refusing them while the suite runs.
 *
 * A port taken with `listen(0)` and closed again is free only until the next `listen(0)` or
 * outgoing connection of any test process picks it: under a loaded `npm test` another file's
 * server answered on it (a 404, not a refusal). Ports are handed out that way only from the
 * kernel's ephemeral range, so this one is chosen below it, where only an explicit `listen` on
 * that very number could take it, and is checked to refuse before it is returned.
 */
import { readFileSync } from "node:fs"
import * as net from "node:net"

const ephemeralLow = (): number => {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0])
    return Number.isInteger(low) && low > 2048 ? low : 32768
  } catch {
    return 32768
  }
}

const refuses = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const s = net.connect({ host: "127.0.0.1", port })
    s.once("connect", () => {
      s.destroy()
      resolve(false)
    })
    s.once("error", (e: NodeJS.ErrnoException) => resolve(e.code === "ECONNREFUSED"))
  })

/** The first port below the ephemeral range that refuses a connection now. */
export const refusedPort = async (): Promise<number> => {
  const low = ephemeralLow()
  for (let port = low - 1; port > low - 200; port--) if (await refuses(port)) return port
  throw new Error(`no port refusing connections below ${low} on 127.0.0.1`)
}
