import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { describe, expect, it } from "vitest"
import { HostPolicy, hostRefusal, type HostPolicyInput } from "../src/platform/http/HostPolicy.js"

/** The DNS-rebinding rule (src/platform/http/HostPolicy.ts) over its inputs; /mcp's use of it is in test/mcp.test.ts. */
const input = (config: Partial<HostPolicyInput["config"]> = {}, publicHosts: ReadonlyArray<string> = []): HostPolicyInput => ({
  config: { host: "127.0.0.1", allowedOrigins: [], allowedHosts: [], publicBaseUrl: undefined, ...config },
  publicHosts: new Map(publicHosts.map((h) => [h, 1]))
})
const code = (i: HostPolicyInput, host: string | undefined, origin?: string) => hostRefusal(i, host, origin)?.code ?? "ok"

describe("hostRefusal", () => {
  it("on a loopback bind: loopback names and the bound address pass, any other Host is refused", () => {
    const i = input()
    for (const host of ["127.0.0.1:20128", "localhost", "LOCALHOST:1", "[::1]:20128", "127.9.9.9", undefined])
      expect(code(i, host), String(host)).toBe("ok")
    for (const host of ["evil.example.com", "127.0.0.1.evil.example", "192.168.1.10:20128", "user@localhost", "localhost/x", ""])
      expect(code(i, host), host).toBe("host_not_allowed")
    expect(code(input({ host: "localhost" }), "localhost:3000")).toBe("ok")
  })

  it("Origin: loopback origins, GATEWAY_ALLOWED_ORIGINS and NEXT_PUBLIC_BASE_URL's pass; null, other schemes and look-alikes do not", () => {
    const i = input({ allowedOrigins: ["https://app.example"], publicBaseUrl: "https://gw.example.net" })
    for (const origin of [
      "http://127.0.0.1:20128",
      "http://localhost:5173",
      "https://app.example",
      "https://gw.example.net",
      "https://gw.example.net:8443"
    ])
      expect(code(i, "localhost", origin), origin).toBe("ok")
    for (const origin of [
      "http://evil.example.com",
      "null",
      "file://",
      "chrome-extension://abc",
      "https://app.example.evil",
      "https://gw.example.net.evil"
    ])
      expect(code(i, "localhost", origin), origin).toBe("origin_not_allowed")
    expect(code(input({ allowedOrigins: ["*"] }), "localhost", "http://anything.example")).toBe("ok")
  })

  it("on a non-loopback bind Host is not checked (keys are required there), and an Origin on the request's own Host is same-origin", () => {
    const i = input({ host: "0.0.0.0" })
    expect(code(i, "gateway.example.com")).toBe("ok")
    expect(code(i, "gateway.example.com", "https://gateway.example.com")).toBe("ok")
    expect(code(i, "gateway.example.com:8443", "https://gateway.example.com:8443")).toBe("ok")
    expect(code(i, "gateway.example.com", "https://evil.example.com")).toBe("origin_not_allowed")
    // On a loopback bind the same pair is what DNS rebinding looks like.
    expect(code(input(), "evil.example.com", "http://evil.example.com")).toBe("host_not_allowed")
  })

  it("a tunnel's public host passes while its scope is open, and no longer after", async () => {
    const policy = HostPolicy.make(input().config)
    const req = (host: string, origin?: string) => ({ headers: { host, ...(origin ? { origin } : {}) } }) as never
    expect(policy.refusal(req("abc.tunnel.example", "https://abc.tunnel.example"))?.code).toBe("host_not_allowed")
    const scope = Effect.runSync(Scope.make())
    Effect.runSync(Scope.extend(policy.addPublicHost("abc.tunnel.example"), scope))
    Effect.runSync(Scope.extend(policy.addPublicHost("ABC.tunnel.example:443"), scope))
    expect(policy.publicHosts()).toEqual(["abc.tunnel.example"])
    expect(policy.refusal(req("abc.tunnel.example", "https://abc.tunnel.example"))).toBeUndefined()
    Effect.runSync(Scope.close(scope, Exit.void))
    expect(policy.publicHosts()).toEqual([])
    expect(policy.refusal(req("abc.tunnel.example"))?.code).toBe("host_not_allowed")
  })
})
