import * as crypto from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"

/** One request a receiver got: headers and the raw body, as sent. */
export interface Delivery {
  readonly headers: http.IncomingHttpHeaders
  readonly raw: string
  readonly body: any
  readonly at: number
}

/** What the receiver answers to its n-th request (0-based): a status, or "hang" (never answers). */
export type Answer = number | "hang"

/**
 * A webhook receiver on 127.0.0.1: records every delivery and answers as scripted (200 by default).
 * `waitFor` waits on the observable condition (the n-th delivery), never a fixed time.
 */
export class Receiver {
  readonly deliveries: Array<Delivery> = []
  answer: (n: number, d: Delivery) => Answer = () => 200
  private readonly waiters = new Set<() => void>()
  private readonly hanging = new Set<http.ServerResponse>()

  private constructor(private readonly server: http.Server) {}

  static async start(port = 0): Promise<Receiver> {
    const server = http.createServer()
    const receiver = new Receiver(server)
    server.on("request", (req, res) => receiver.handle(req, res))
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      server.listen(port, "127.0.0.1", () => resolve())
    })
    return receiver
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const raw = Buffer.concat(chunks).toString("utf8")
      let body: any
      try {
        body = JSON.parse(raw)
      } catch {
        body = undefined
      }
      const d: Delivery = { headers: req.headers, raw, body, at: Date.now() }
      const n = this.deliveries.length
      this.deliveries.push(d)
      for (const w of this.waiters) w()
      const a = this.answer(n, d)
      if (a === "hang") {
        this.hanging.add(res)
        return
      }
      res.writeHead(a, { "content-type": "application/json" }).end(JSON.stringify({ received: true }))
    })
  }

  /** Resolves once `n` deliveries (in all) matching `where` arrived; fails after `ms`. */
  waitFor(n: number, where: (d: Delivery) => boolean = () => true, ms = 15_000): Promise<ReadonlyArray<Delivery>> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const got = this.deliveries.filter(where)
        if (got.length >= n) {
          this.waiters.delete(check)
          clearTimeout(timer)
          resolve(got)
          return true
        }
        return false
      }
      const timer = setTimeout(() => {
        this.waiters.delete(check)
        reject(new Error(`receiver: ${this.deliveries.filter(where).length} of ${n} deliveries after ${ms} ms`))
      }, ms)
      if (!check()) this.waiters.add(check)
    })
  }

  /** Answers every request left hanging so far with `status`. */
  release(status = 200): void {
    for (const res of this.hanging) res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ received: true }))
    this.hanging.clear()
  }

  of(event: string): ReadonlyArray<Delivery> {
    return this.deliveries.filter((d) => d.headers["x-webhook-event"] === event)
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy()
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

/** Checks the spec's `X-Webhook-Signature` with node:crypto, in constant time, over the raw body. */
export const verifySpec = (secret: string, d: Delivery): boolean => {
  const header = String(d.headers["x-webhook-signature"] ?? "")
  const expected = `sha256=${crypto.createHmac("sha256", secret).update(d.raw).digest("hex")}`
  return header.length === expected.length && crypto.timingSafeEqual(Buffer.from(header), Buffer.from(expected))
}

/**
 * Checks the Standard Webhooks headers with node:crypto: the key is the base64 after `whsec_`
 * (or the secret's own bytes for another secret), signed content `id.timestamp.body`.
 */
export const verifyStandardByHand = (secret: string, d: Delivery): boolean => {
  const rest = secret.startsWith("whsec_") ? secret.slice(6) : undefined
  const key =
    rest !== undefined && rest.length % 4 === 0 && /^[A-Za-z0-9+/]+={0,2}$/.test(rest) ? Buffer.from(rest, "base64") : Buffer.from(secret)
  const id = String(d.headers["webhook-id"])
  const ts = String(d.headers["webhook-timestamp"])
  const expected = `v1,${crypto.createHmac("sha256", key).update(`${id}.${ts}.${d.raw}`).digest("base64")}`
  const given = String(d.headers["webhook-signature"] ?? "")
  return given.split(" ").some((s) => s.length === expected.length && crypto.timingSafeEqual(Buffer.from(s), Buffer.from(expected)))
}

/** Checks with the official `standardwebhooks` verifier (throws on a bad signature or a stale timestamp). */
export const verifyWithLibrary = (secret: string, d: Delivery): unknown => {
  const wh = secret.startsWith("whsec_") ? new Webhook(secret) : new Webhook(secret, { format: "raw" })
  return wh.verify(d.raw, {
    "webhook-id": String(d.headers["webhook-id"]),
    "webhook-timestamp": String(d.headers["webhook-timestamp"]),
    "webhook-signature": String(d.headers["webhook-signature"])
  })
}
