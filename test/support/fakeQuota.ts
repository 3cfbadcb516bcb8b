import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** One request a fake upstream received. */
export interface Received {
  readonly method: string
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

/**
 * Fake account endpoints on loopback, each in its provider's wire shape, under a prefix:
 *
 * - `/openrouter/api/v1/key` (and the older `/auth/key`): OpenRouter's key info
 *   (`data.limit`, `data.usage`, `data.limit_remaining`, `data.limit_reset`, `data.rate_limit`);
 * - `/deepseek/user/balance`: DeepSeek's balance (`is_available`, `balance_infos[]`, amounts as strings);
 * - `/compat/v1/models`: an OpenAI-compatible model list with `x-ratelimit-*` headers;
 * - `/anthropic/v1/messages/count_tokens`: a count with `anthropic-ratelimit-*` headers;
 * - `/refuse/v1/models`: a 401 in OpenAI's error shape that echoes the key it refused;
 * - `/github/repos/{owner}/{repo}/issues`: GitHub's create-issue API (201 with number and html_url).
 *
 * Every provider endpoint checks that its connection's key came in the provider's auth header.
 */
export class FakeQuota {
  readonly received: Array<Received> = []
  /** OpenRouter key info: `limit_remaining` (null: no limit). */
  openRouterRemaining: number | null = 7.5
  deepSeekAvailable = true
  /** `x-ratelimit-remaining-requests` on the compat model list. */
  compatRemainingRequests = 99
  /** The tracker's answer: 201 (filed) or an error status. */
  trackerStatus = 201
  private issues = 0

  private constructor(
    private readonly server: http.Server,
    readonly key: string,
    readonly trackerToken: string
  ) {}

  static async start(key: string, trackerToken: string): Promise<FakeQuota> {
    let fake!: FakeQuota
    const server = http.createServer((req, res) => {
      let body = ""
      req.setEncoding("utf8")
      req.on("data", (c: string) => (body += c))
      req.on("end", () => fake.handle(req, res, body))
    })
    fake = new FakeQuota(server, key, trackerToken)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    return fake
  }

  get origin(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections()
      this.server.close(() => resolve())
    })
  }

  /** The issue-creation requests received, parsed. */
  issuesFiled(): Array<{ path: string; headers: http.IncomingHttpHeaders; body: any }> {
    return this.received
      .filter((r) => r.path.startsWith("/github/"))
      .map((r) => ({ path: r.path, headers: r.headers, body: JSON.parse(r.body) }))
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse, body: string): void {
    const path = req.url ?? "/"
    this.received.push({ method: req.method ?? "GET", path, headers: req.headers, body })
    const json = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers })
      res.end(JSON.stringify(payload))
    }
    const bearer = req.headers["authorization"] === `Bearer ${this.key}`
    const unauthorized = () => json(401, { error: { message: "No auth credentials found", code: 401 } })

    if (path === "/openrouter/api/v1/key" || path === "/openrouter/api/v1/auth/key") {
      if (!bearer) return unauthorized()
      return json(200, {
        data: {
          label: "sk-or-v1-abc...xyz",
          limit: 10,
          usage: this.openRouterRemaining === null ? 1.25 : 10 - this.openRouterRemaining,
          limit_remaining: this.openRouterRemaining,
          limit_reset: "monthly",
          is_free_tier: false,
          is_provisioning_key: false,
          rate_limit: { requests: 200, interval: "10s" }
        }
      })
    }
    if (path === "/deepseek/user/balance") {
      if (!bearer) return json(401, { error: { message: "Authentication Fails (no such user)", type: "authentication_error" } })
      return json(200, {
        is_available: this.deepSeekAvailable,
        balance_infos: [
          { currency: "CNY", total_balance: "110.00", granted_balance: "10.00", topped_up_balance: "100.00" },
          {
            currency: "USD",
            total_balance: this.deepSeekAvailable ? "15.50" : "0.00",
            granted_balance: "0.50",
            topped_up_balance: this.deepSeekAvailable ? "15.00" : "0.00"
          }
        ]
      })
    }
    if (path === "/compat/v1/models") {
      if (!bearer) return unauthorized()
      return json(
        200,
        { object: "list", data: [{ id: "gpt-4o-mini", object: "model", created: 1, owned_by: "system" }] },
        {
          "x-ratelimit-limit-requests": "100",
          "x-ratelimit-remaining-requests": String(this.compatRemainingRequests),
          "x-ratelimit-reset-requests": "6m0s",
          "x-ratelimit-limit-tokens": "200000",
          "x-ratelimit-remaining-tokens": "150000",
          "x-ratelimit-reset-tokens": "20ms"
        }
      )
    }
    if (path === "/anthropic/v1/messages/count_tokens") {
      if (req.headers["x-api-key"] !== this.key || !req.headers["anthropic-version"]) {
        return json(401, { type: "error", error: { type: "authentication_error", message: "invalid x-api-key" } })
      }
      const parsed = JSON.parse(body || "{}")
      if (typeof parsed.model !== "string" || !Array.isArray(parsed.messages))
        return json(400, { type: "error", error: { type: "invalid_request_error", message: "model and messages required" } })
      return json(
        200,
        { input_tokens: 8 },
        {
          "anthropic-ratelimit-requests-limit": "50",
          "anthropic-ratelimit-requests-remaining": "49",
          "anthropic-ratelimit-requests-reset": "2030-01-01T00:00:30Z",
          "anthropic-ratelimit-tokens-limit": "40000",
          "anthropic-ratelimit-tokens-remaining": "0",
          "anthropic-ratelimit-tokens-reset": "2030-01-01T00:01:00Z"
        }
      )
    }
    if (path === "/refuse/v1/models") {
      const presented = String(req.headers["authorization"] ?? "").replace(/^Bearer /, "")
      return json(401, {
        error: {
          message: `Incorrect API key provided: ${presented}. You can find your API key at https://platform.example.com.`,
          type: "invalid_request_error",
          param: null,
          code: "invalid_api_key"
        }
      })
    }
    const issue = /^\/github\/repos\/([^/]+)\/([^/]+)\/issues$/.exec(path)
    if (issue && req.method === "POST") {
      if (req.headers["authorization"] !== `Bearer ${this.trackerToken}`)
        return json(401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest" })
      if (this.trackerStatus !== 201) return json(this.trackerStatus, { message: "Server Error" })
      const n = ++this.issues
      return json(201, {
        id: 1000 + n,
        number: n,
        html_url: `https://github.example/${issue[1]}/${issue[2]}/issues/${n}`,
        title: JSON.parse(body).title,
        state: "open"
      })
    }
    json(404, { error: { message: `no route ${req.method} ${path}` } })
  }
}
