import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as Layer from "effect/Layer"
import { AccountingLive } from "./accounting/Http.js"
import { AcpLive } from "./acp/Http.js"
import { ManagementApi } from "./Api.js"
import { AuthLive } from "./auth/Http.js"
import { ManagementAuthLive, PlaygroundAuthLive } from "./Auth.js"
import { BackupsLive } from "./backups/Http.js"
import { CliToolsLive } from "./clitools/Http.js"
import { CloudLive } from "./cloud/Http.js"
import { CombosLive } from "./combos/Http.js"
import { FeatureFlagsLive } from "./flags/Http.js"
import { HealthLive } from "./health/Http.js"
import { InspectorLive, InspectorOpenLive, TproxyLive } from "./inspector/Http.js"
import { PluginsLive } from "./plugins/Http.js"
import { PlaygroundLive } from "./playground/Http.js"
import { TunnelsLive } from "./tunnels/Http.js"
import { MetricsLive } from "./metrics/Http.js"
import { KeysLive } from "./keys/Http.js"
import { McpLive } from "./mcp/Http.js"
import { ModelsLive } from "./models/Http.js"
import { OAuthCallbackLive, OAuthLive } from "./oauth/Http.js"
import { NodesLive } from "./nodes/Http.js"
import { ComplianceLive } from "./compliance/Http.js"
import { EvalsLive } from "./evals/Http.js"
import { CompatLive } from "./compat/Http.js"
import { ReplayLive } from "./replay/Http.js"
import { ShadowLive } from "./shadow/Http.js"
import { PoliciesLive } from "./policies/Http.js"
import { ProvidersLive } from "./providers/Http.js"
import { ProxiesLive } from "./proxies/Http.js"
import { ContextLive } from "./context/Http.js"
import { ResilienceLive } from "./resilience/Http.js"
import { SessionsLive } from "./sessions/Http.js"
import { InitLive, SystemLive } from "./system/Http.js"
import { SyncLive } from "./sync/Http.js"
import { SettingsLive } from "./settings/Http.js"
import { AgentSkillsLive } from "./skills/Http.js"
import { UsageLive } from "./usage/Http.js"
import { WebhooksLive } from "./webhooks/Http.js"

/** The management API with every area's group implemented. */
export const ManagementApiLive = HttpApiBuilder.api(ManagementApi).pipe(
  Layer.provide([
    HealthLive,
    MetricsLive,
    AuthLive,
    KeysLive,
    ProvidersLive,
    FeatureFlagsLive,
    CombosLive,
    ResilienceLive,
    UsageLive,
    AccountingLive,
    BackupsLive,
    ModelsLive,
    OAuthLive,
    OAuthCallbackLive,
    SessionsLive,
    InitLive,
    SystemLive,
    CloudLive,
    SyncLive,
    NodesLive,
    SettingsLive,
    PoliciesLive,
    ComplianceLive,
    EvalsLive,
    ShadowLive,
    ReplayLive,
    CompatLive,
    WebhooksLive,
    ProxiesLive,
    AgentSkillsLive,
    CliToolsLive,
    AcpLive,
    McpLive,
    ContextLive,
    InspectorLive,
    InspectorOpenLive,
    TproxyLive,
    PluginsLive,
    PlaygroundLive,
    TunnelsLive
  ]),
  Layer.provide(ManagementAuthLive),
  Layer.provide(PlaygroundAuthLive)
)
