import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Layer from "effect/Layer"
import { ManagementApi } from "./Api.js"
import { managementAuthLayer, playgroundAuthLayer } from "./AuthMiddleware.js"
import * as AccountingHttp from "./accounting/Http.js"
import * as AcpHttp from "./acp/Http.js"
import * as AuthHttp from "./auth/Http.js"
import * as SsoHttp from "./sso/Http.js"
import * as BackupsHttp from "./backups/Http.js"
import * as CliToolsHttp from "./clitools/Http.js"
import * as CloudHttp from "./cloud/Http.js"
import * as CombosHttp from "./combos/Http.js"
import * as CompatHttp from "./compat/Http.js"
import * as ComplianceHttp from "./compliance/Http.js"
import * as ContextHttp from "./context/Http.js"
import * as EvalsHttp from "./evals/Http.js"
import * as FlagsHttp from "./flags/Http.js"
import * as HealthHttp from "./health/Http.js"
import * as InspectorHttp from "./inspector/Http.js"
import * as KeysHttp from "./keys/Http.js"
import * as McpStatusHttp from "./mcp/Http.js"
import * as MetricsHttp from "./metrics/Http.js"
import * as ModelsHttp from "./models/Http.js"
import * as NodesHttp from "./nodes/Http.js"
import * as OAuthHttp from "./oauth/Http.js"
import * as PlaygroundHttp from "./playground/Http.js"
import * as PluginsHttp from "./plugins/Http.js"
import * as PoliciesHttp from "./policies/Http.js"
import * as ProvidersHttp from "./providers/Http.js"
import * as ProxiesHttp from "./proxies/Http.js"
import * as ReplayHttp from "./replay/Http.js"
import * as ResilienceHttp from "./resilience/Http.js"
import * as SessionsHttp from "./sessions/Http.js"
import * as SettingsHttp from "./settings/Http.js"
import * as ShadowHttp from "./shadow/Http.js"
import * as SkillsHttp from "./skills/Http.js"
import * as SyncHttp from "./sync/Http.js"
import * as SystemHttp from "./system/Http.js"
import * as TeamsHttp from "./teams/Http.js"
import * as TunnelsHttp from "./tunnels/Http.js"
import * as UsageHttp from "./usage/Http.js"
import * as WebhooksHttp from "./webhooks/Http.js"

/** The management API with every area's groups implemented. */
export const layer = HttpApiBuilder.api(ManagementApi).pipe(
  Layer.provide([
    HealthHttp.layer,
    MetricsHttp.layer,
    AuthHttp.layer,
    SsoHttp.layer,
    KeysHttp.layer,
    TeamsHttp.layer,
    ProvidersHttp.layer,
    FlagsHttp.layer,
    CombosHttp.layer,
    ResilienceHttp.layer,
    UsageHttp.layer,
    AccountingHttp.layer,
    BackupsHttp.layer,
    ModelsHttp.layer,
    OAuthHttp.layer,
    SessionsHttp.layer,
    SystemHttp.layer,
    CloudHttp.layer,
    SyncHttp.layer,
    NodesHttp.layer,
    SettingsHttp.layer,
    PoliciesHttp.layer,
    ComplianceHttp.layer,
    EvalsHttp.layer,
    ShadowHttp.layer,
    ReplayHttp.layer,
    CompatHttp.layer,
    WebhooksHttp.layer,
    ProxiesHttp.layer,
    SkillsHttp.layer,
    CliToolsHttp.layer,
    AcpHttp.layer,
    McpStatusHttp.layer,
    ContextHttp.layer,
    InspectorHttp.layer,
    PluginsHttp.layer,
    PlaygroundHttp.layer,
    TunnelsHttp.layer
  ]),
  Layer.provide(managementAuthLayer),
  Layer.provide(playgroundAuthLayer)
)
