// A closed loop of chat requests against a gateway target (lib/targets.mjs), for the benches that
// compare conditions on one gateway (policies.mjs, webhooks.mjs): CONCURRENCY workers each send
// the next request when the last one answered, for SECONDS; requests per second and p50/p99.
import * as http from "node:http"

/** `--name <number>` from the command line, else the default. */
export const numberArg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : dflt
}

export const makeClosedLoop = ({ seconds, concurrency }) => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency })
  const post = (url, headers, body) =>
    new Promise((resolve, reject) => {
      const u = new URL(url)
      const req = http.request(
        {
          host: u.hostname,
          port: u.port,
          path: u.pathname,
          method: "POST",
          headers: { ...headers, "content-length": Buffer.byteLength(body) },
          agent
        },
        (res) => {
          res.resume()
          res.on("end", () => resolve(res.statusCode))
        }
      )
      req.on("error", reject)
      req.end(body)
    })
  /** A management call with the target's admin headers: its JSON answer; anything but 2xx throws. */
  const admin = async (t, method, p, body) => {
    const res = await fetch(`${t.baseUrl}${p}`, {
      method,
      headers: t.adminHeaders,
      body: body === undefined ? undefined : JSON.stringify(body)
    })
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`)
    return res.json().catch(() => undefined)
  }
  const load = async (t, body) => {
    const latencies = []
    const until = Date.now() + seconds * 1000
    let errors = 0
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (Date.now() < until) {
          const started = process.hrtime.bigint()
          const status = await post(t.chatUrl, t.headers, body)
          if (status !== 200) errors++
          latencies.push(Number(process.hrtime.bigint() - started) / 1e6)
        }
      })
    )
    latencies.sort((a, b) => a - b)
    return {
      rps: latencies.length / seconds,
      p50: latencies[Math.floor(latencies.length * 0.5)],
      p99: latencies[Math.floor(latencies.length * 0.99)],
      errors
    }
  }
  return { agent, admin, load }
}
