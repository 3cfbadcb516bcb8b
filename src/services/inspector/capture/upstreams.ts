/**
 * The origin connections of one capture server (the HTTP proxy, the custom-host MITM server, the
 * transparent listener): pooled agents with the extra CAs, the sockets outside them, and, while
 * the transparent capture runs, connections dialled with its bypass mark.
 */
import * as fs from "node:fs"
import * as http from "node:http"
import * as https from "node:https"
import type * as net from "node:net"
import type * as stream from "node:stream"
import * as tls from "node:tls"

/** Upstream connections of one capture server: pooled per server, and all destroyed when it closes. */
export interface Upstreams {
  readonly http: http.Agent
  readonly https: https.Agent
  /** Node's CA store plus the extra CAs; undefined when there are none (node's defaults then apply as they are). */
  readonly secureContext: tls.SecureContext | undefined
  /** Sockets outside the agents (tunnels, upgraded connections) that `destroy` must close too. */
  readonly track: (socket: stream.Duplex) => void
  readonly destroy: () => void
  /** How origins are dialled when not by a plain `net.connect` (a socket carrying the transparent capture's bypass mark), read per
   * connection. */
  readonly dial: () => Dial | undefined
  /** An agent for one request outside the pool (an upgrade): one that dials through `dial` while it gives one; else none (node's `agent:
   * false`). */
  readonly oneShot: (tlsTarget: boolean) => http.Agent | false
}

/** Opens a TCP connection to an origin (an IP literal and a port), connected when it resolves. */
export type Dial = (address: string, port: number, timeoutMs: number) => Promise<net.Socket>

type AgentCallback = (error: Error | null, socket?: stream.Duplex) => void

/**
 * An agent whose connections come from `dial()` while it gives one (node's agents take an
 * asynchronous `createConnection`, which returns nothing and calls back, while a per-request
 * `createConnection` is ignored as soon as an agent is involved), and are the agent's usual ones
 * otherwise. HTTPS runs TLS over the dialled socket with the request's TLS options (server name,
 * verification, CA store, ALPN).
 */
const dialingAgent = (
  tlsTarget: boolean,
  dial: () => Dial | undefined,
  options: http.AgentOptions & { readonly connectTimeoutMs: number }
): http.Agent => {
  const agent: http.Agent = tlsTarget ? new https.Agent(options) : new http.Agent(options)
  const usual = (agent as unknown as { createConnection: (opts: unknown, callback: AgentCallback) => stream.Duplex | undefined })
    .createConnection
  const connect = (opts: http.ClientRequestArgs & tls.ConnectionOptions, callback: AgentCallback): stream.Duplex | undefined => {
    const d = dial()
    if (d === undefined) return usual.call(agent, opts, callback)
    d(String(opts.host), Number(opts.port), options.connectTimeoutMs).then(
      (socket) => callback(null, tlsTarget ? tls.connect({ ...opts, socket }) : socket),
      (error: Error) => callback(error)
    )
    return undefined
  }
  ;(agent as unknown as { createConnection: typeof connect }).createConnection = connect
  return agent
}

/**
 * `tls.rootCertificates` is node's bundled store only: certificates of NODE_EXTRA_CA_CERTS would be
 * lost once a `ca` list replaces the default, so they are read and added back.
 */
const extraEnvCas = (): Array<string> => {
  const file = process.env["NODE_EXTRA_CA_CERTS"]
  if (file === undefined || file === "") return []
  try {
    return [fs.readFileSync(file, "utf8")]
  } catch {
    return []
  }
}

export const createUpstreams = (options: {
  readonly upstreamCa?: ReadonlyArray<string> | undefined
  readonly idleTimeoutMs: number
  /** How origins are dialled, read per connection: a dial (a marked socket), or undefined for the usual connect. */
  readonly dial?: (() => Dial | undefined) | undefined
}): Upstreams => {
  const extra = options.upstreamCa ?? []
  const secureContext =
    extra.length === 0 ? undefined : tls.createSecureContext({ ca: [...tls.rootCertificates, ...extraEnvCas(), ...extra] })
  const agentOptions = { keepAlive: true, timeout: options.idleTimeoutMs, scheduling: "lifo" as const }
  const dial = options.dial ?? (() => undefined)
  const dialOptions = { ...agentOptions, connectTimeoutMs: options.idleTimeoutMs }
  const httpAgent = options.dial ? dialingAgent(false, dial, dialOptions) : new http.Agent(agentOptions)
  const httpsAgent = options.dial ? (dialingAgent(true, dial, dialOptions) as https.Agent) : new https.Agent(agentOptions)
  const tracked = new Set<stream.Duplex>()
  return {
    http: httpAgent,
    https: httpsAgent,
    secureContext,
    track: (socket) => {
      tracked.add(socket)
      socket.once("close", () => tracked.delete(socket))
    },
    destroy: () => {
      httpAgent.destroy()
      httpsAgent.destroy()
      for (const socket of tracked) socket.destroy()
      tracked.clear()
    },
    dial,
    oneShot: (tlsTarget) => (dial() !== undefined ? dialingAgent(tlsTarget, dial, { ...dialOptions, keepAlive: false }) : false)
  }
}
