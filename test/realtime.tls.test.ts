import * as ConfigProvider from "effect/ConfigProvider"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { overridesFrom } from "../src/cli/root.js"
import { AppConfig } from "../src/platform/config/AppConfig.js"

const configFrom = (env: Record<string, string>, overrides: Parameters<typeof AppConfig.layer>[0] = {}) =>
  Effect.runPromise(
    Effect.either(
      Effect.provide(
        AppConfig,
        AppConfig.layer(overrides).pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))
      )
    )
  )

describe('HTTPS configuration (docs/realtime.md, "HTTPS")', () => {
  it("takes the certificate and key from GATEWAY_TLS_CERT and GATEWAY_TLS_KEY, as absolute paths", async () => {
    const c = await configFrom({ GATEWAY_TLS_CERT: "certs/gw.pem", GATEWAY_TLS_KEY: "certs/gw.key" })
    expect(c._tag).toBe("Right")
    if (c._tag === "Right") {
      expect(c.right.tlsCert).toBe(path.resolve("certs/gw.pem"))
      expect(c.right.tlsKey).toBe(path.resolve("certs/gw.key"))
    }
  })

  it("refuses a certificate without a key (and the reverse), naming both settings", async () => {
    const c = await configFrom({ GATEWAY_TLS_CERT: "certs/gw.pem" })
    expect(c._tag).toBe("Left")
    expect(String(c._tag === "Left" ? c.left : "")).toMatch(/GATEWAY_TLS_KEY/)
    const k = await configFrom({ GATEWAY_TLS_KEY: "certs/gw.key" })
    expect(k._tag).toBe("Left")
  })

  it("--tls-cert and --tls-key override the environment", async () => {
    const overrides = overridesFrom({
      port: Option.none(),
      host: Option.none(),
      dataDir: Option.none(),
      tlsCert: Option.some("/etc/gw/cert.pem"),
      tlsKey: Option.some("/etc/gw/key.pem")
    })
    expect(overrides).toEqual({ tlsCert: "/etc/gw/cert.pem", tlsKey: "/etc/gw/key.pem" })
    const c = await configFrom({ GATEWAY_TLS_CERT: "other.pem", GATEWAY_TLS_KEY: "other.key" }, overrides)
    expect(c._tag === "Right" && [c.right.tlsCert, c.right.tlsKey]).toEqual(["/etc/gw/cert.pem", "/etc/gw/key.pem"])
  })

  it("serves plain HTTP without either", async () => {
    const c = await configFrom({})
    expect(c._tag === "Right" && c.right.tlsCert).toBeUndefined()
  })
})
