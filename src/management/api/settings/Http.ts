import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import type * as http from "node:http"
import { BadRequest } from "../../../domain/errors.js"
import type { SettingsDocument } from "../../../domain/settings.js"
import { FeatureFlags } from "../../../platform/flags/FeatureFlags.js"
import { clientAddress } from "../../../platform/http/request.js"
import { purgeRequestHistory } from "../../../services/usage/purge.js"
import { Egress } from "../../../upstream/egress/Egress.js"
import { testProxy } from "../../../upstream/egress/proxyTest.js"
import { Settings } from "../../../platform/settings/Settings.js"
import { ManagementApi } from "../Api.js"
import { actor } from "../Principal.js"

/** Global settings (docs/operations.md, "Settings"). */
export const layer = HttpApiBuilder.group(ManagementApi, "settings", (handlers) =>
  Effect.gen(function* () {
    const settings = yield* Settings
    const egress = yield* Egress
    const flags = yield* FeatureFlags
    const sql = yield* SqlClient.SqlClient

    /** The caller's address as the IP filter sees it: a change that would refuse it is a 400. */
    const caller = Effect.gen(function* () {
      const req = yield* HttpServerRequest.HttpServerRequest
      return clientAddress(req.source as http.IncomingMessage, yield* flags.enabled("GATEWAY_TRUST_PROXY_HEADERS"))
    })
    const save = (doc: SettingsDocument) =>
      Effect.gen(function* () {
        return yield* settings.replace(doc, yield* actor, yield* caller)
      })
    /** PUT of one section: the rest of the document as it is. */
    const putSection = <K extends keyof SettingsDocument>(key: K, value: SettingsDocument[K]) =>
      Effect.gen(function* () {
        const current = yield* settings.get
        return settings.view(yield* save({ ...current, [key]: value }))[key]
      })
    const getSection = <K extends keyof SettingsDocument>(key: K) => Effect.map(settings.get, (doc) => settings.view(doc)[key])

    return handlers
      .handle("get", () => Effect.map(settings.get, settings.view))
      .handle("replace", ({ payload }) => {
        const { info: _, ...doc } = payload
        return Effect.map(save(doc), settings.view)
      })
      .handle("patch", ({ payload }) =>
        Effect.gen(function* () {
          return settings.view(yield* settings.patch(payload, yield* actor, yield* caller))
        })
      )
      .handle("get-proxy", () => getSection("proxy"))
      .handle("put-proxy", ({ payload }) => putSection("proxy", payload))
      .handle("test-proxy", ({ payload }) =>
        Effect.gen(function* () {
          const configured = (yield* settings.get).proxy
          const proxy = payload.proxy ?? configured.url
          if (!proxy)
            return yield* new BadRequest({ message: "proxy: no proxy is configured (PUT /api/settings/proxy) and none was given" })
          const family = payload.family ?? (payload.proxy ? "auto" : configured.family)
          return yield* testProxy(proxy, payload.url, payload.timeoutMs ?? 10_000, { family, lookup: egress.lookup })
        })
      )
      .handle("get-ip-filter", () => getSection("ipFilter"))
      .handle("put-ip-filter", ({ payload }) => putSection("ipFilter", payload))
      .handle("get-thinking-budget", () => getSection("thinkingBudget"))
      .handle("put-thinking-budget", ({ payload }) => putSection("thinkingBudget", payload))
      .handle("get-system-prompt", () => getSection("systemPrompt"))
      .handle("put-system-prompt", ({ payload }) => putSection("systemPrompt", payload))
      .handle("get-compression", () => getSection("compression"))
      .handle("put-compression", ({ payload }) => putSection("compression", payload))
      .handle("get-backups", () => getSection("backups"))
      .handle("put-backups", ({ payload }) => putSection("backups", payload))
      .handle("get-require-login", () => Effect.map(settings.get, (doc) => ({ requireLogin: doc.requireLogin })))
      .handle("put-require-login", ({ payload }) =>
        Effect.map(putSection("requireLogin", payload.requireLogin), (requireLogin) => ({ requireLogin }))
      )
      .handle("purge-request-history", ({ payload }) =>
        Effect.gen(function* () {
          const result = yield* purgeRequestHistory(sql, payload.olderThanDays, Date.now())
          yield* Effect.logInfo(`request history purged by ${yield* actor}: ${result.removed} usage rows before ${result.keptSince}`)
          return result
        })
      )
  })
)
