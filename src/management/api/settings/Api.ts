import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as Schema from "effect/Schema"
import { BadRequest } from "../../../domain/errors.js"
import {
  BackupSettings,
  CompressionSettings,
  IpFilterSettings,
  ProxySettings,
  ProxyTestRequest,
  ProxyTestResult,
  PurgeRequest,
  PurgeResult,
  RequireLogin,
  SettingsDocument,
  SettingsPatch,
  SettingsView,
  SystemPromptSettings,
  ThinkingBudgetSettings
} from "../../../domain/settings.js"
import { ManagementAuth } from "../Principal.js"
import { CONFIGURATION, Roles } from "../Roles.js"

/** `GET` and `PUT` of one section: PUT replaces it (fields it lacks take their defaults) and answers it as GET does. */
const section = <const Name extends string, A, I>(name: Name, path: `/api/settings/${string}`, schema: Schema.Schema<A, I>) =>
  [
    HttpApiEndpoint.get(`get-${name}`, path).addSuccess(Schema.typeSchema(schema)),
    HttpApiEndpoint.put(`put-${name}`, path).setPayload(schema).addSuccess(Schema.typeSchema(schema)).addError(BadRequest)
  ] as const

const [getProxy, putProxy] = section("proxy", "/api/settings/proxy", ProxySettings)
const [getIpFilter, putIpFilter] = section("ip-filter", "/api/settings/ip-filter", IpFilterSettings)
const [getThinking, putThinking] = section("thinking-budget", "/api/settings/thinking-budget", ThinkingBudgetSettings)
const [getSystem, putSystem] = section("system-prompt", "/api/settings/system-prompt", SystemPromptSettings)
const [getCompression, putCompression] = section("compression", "/api/settings/compression", CompressionSettings)
const [getBackups, putBackups] = section("backups", "/api/settings/backups", BackupSettings)
const [getRequireLogin, putRequireLogin] = section("require-login", "/api/settings/require-login", RequireLogin)

/**
 * Global settings (docs/operations.md, "Settings"): the whole document, one route per section,
 * the proxy test and the request-history purge. `/api/settings/feature-flags` is the flags group's.
 */
export class SettingsGroup extends HttpApiGroup.make("settings")
  .add(HttpApiEndpoint.get("get", "/api/settings").addSuccess(SettingsView))
  .add(HttpApiEndpoint.put("replace", "/api/settings").setPayload(SettingsDocument).addSuccess(SettingsView).addError(BadRequest))
  .add(HttpApiEndpoint.patch("patch", "/api/settings").setPayload(SettingsPatch).addSuccess(SettingsView).addError(BadRequest))
  .add(getProxy)
  .add(putProxy)
  .add(
    HttpApiEndpoint.post("test-proxy", "/api/settings/proxy/test")
      .setPayload(ProxyTestRequest)
      .addSuccess(ProxyTestResult)
      .addError(BadRequest)
  )
  .add(getIpFilter)
  .add(putIpFilter)
  .add(getThinking)
  .add(putThinking)
  .add(getSystem)
  .add(putSystem)
  .add(getCompression)
  .add(putCompression)
  .add(getBackups)
  .add(putBackups)
  .add(getRequireLogin)
  .add(putRequireLogin)
  .add(
    HttpApiEndpoint.post("purge-request-history", "/api/settings/purge-request-history").setPayload(PurgeRequest).addSuccess(PurgeResult)
  )
  .middleware(ManagementAuth)
  .annotate(Roles, CONFIGURATION) {}
