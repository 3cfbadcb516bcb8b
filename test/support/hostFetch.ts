import * as http from "node:http"
import { Readable } from "node:stream"

/**
 * A `fetch` that sends the `Host` header it is given (the platform's fetch replaces it with the
 * URL's), for clients that take a fetch of their own (the MCP SDK's transports): what a browser
 * sends after DNS rebinding, a name that resolves to 127.0.0.1. Only loopback URLs.
 */
export const fetchWithHost =
  (host: string) =>
  (input: string | URL | Request, init: RequestInit = {}): Promise<Response> =>
    new Promise((resolve, reject) => {
      const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url)
      if (!["127.0.0.1", "[::1]", "localhost"].includes(url.hostname))
        return reject(new Error(`fetchWithHost is for loopback URLs only, not ${url.hostname}`))
      const headers: Record<string, string> = {}
      new Headers(init.headers).forEach((v, k) => (headers[k] = v))
      headers["host"] = host
      const req = http.request(
        {
          host: url.hostname.replace(/^\[|\]$/g, ""),
          port: url.port,
          path: url.pathname + url.search,
          method: init.method ?? "GET",
          headers,
          agent: false
        },
        (res) => {
          const out = new Headers()
          for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) out.set(k, Array.isArray(v) ? v.join(", ") : v)
          const status = res.statusCode ?? 0
          const body =
            status === 204 || status === 304 || init.method === "HEAD" ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>)
          resolve(new Response(body, { status, headers: out }))
        }
      )
      req.on("error", reject)
      init.signal?.addEventListener("abort", () => req.destroy(new Error("aborted")))
      req.end(typeof init.body === "string" ? init.body : undefined)
    })
