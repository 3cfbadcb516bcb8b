import * as HttpApi from "@effect/platform/HttpApi"
import { AccountingGroup } from "./accounting/Api.js"
import { AcpGroup } from "./acp/Api.js"
import { AuthGroup } from "./auth/Api.js"
import { SsoGroup, SsoPublicGroup } from "./sso/Api.js"
import { BackupsGroup } from "./backups/Api.js"
import { CliToolsGroup } from "./clitools/Api.js"
import { CloudGroup } from "./cloud/Api.js"
import { CombosGroup } from "./combos/Api.js"
import { ContextGroup } from "./context/Api.js"
import { FeatureFlagsGroup } from "./flags/Api.js"
import { HealthGroup } from "./health/Api.js"
import { InspectorGroup, InspectorOpenGroup, TproxyGroup } from "./inspector/Api.js"
import { PluginsGroup } from "./plugins/Api.js"
import { PlaygroundGroup } from "./playground/Api.js"
import { TunnelsGroup } from "./tunnels/Api.js"
import { MetricsGroup } from "./metrics/Api.js"
import { KeysGroup } from "./keys/Api.js"
import { McpGroup, McpOAuthCallbackGroup, McpServersGroup } from "./mcp/Api.js"
import { ModelsGroup } from "./models/Api.js"
import { OAuthCallbackGroup, OAuthGroup } from "./oauth/Api.js"
import { NodesGroup } from "./nodes/Api.js"
import { ComplianceGroup } from "./compliance/Api.js"
import { EvalsGroup } from "./evals/Api.js"
import { CompatGroup } from "./compat/Api.js"
import { ReplayGroup } from "./replay/Api.js"
import { ShadowGroup } from "./shadow/Api.js"
import { PoliciesGroup } from "./policies/Api.js"
import { ProvidersGroup } from "./providers/Api.js"
import { ProxiesGroup } from "./proxies/Api.js"
import { ResilienceGroup } from "./resilience/Api.js"
import { SessionsGroup } from "./sessions/Api.js"
import { InitGroup, SystemGroup } from "./system/Api.js"
import { SyncGroup } from "./sync/Api.js"
import { OrganisationGroup, TeamsGroup, UsersGroup } from "./teams/Api.js"
import { SettingsGroup } from "./settings/Api.js"
import { AgentSkillsGroup } from "./skills/Api.js"
import { UsageGroup } from "./usage/Api.js"
import { WebhooksGroup } from "./webhooks/Api.js"

export { ManagementAuth, Principal, type PrincipalShape } from "./Principal.js"

/**
 * The management API contract: one group per area, each declared in `<area>/Api.ts` and
 * implemented in `<area>/Http.ts` (composed in Http.ts). The server implements it, the CLI
 * derives its client from it, and both validate with the same schemas (src/domain).
 */
export class ManagementApi extends HttpApi.make("gateway")
  .add(HealthGroup)
  .add(MetricsGroup)
  .add(AuthGroup)
  .add(SsoPublicGroup)
  .add(SsoGroup)
  .add(KeysGroup)
  .add(UsersGroup)
  .add(TeamsGroup)
  .add(OrganisationGroup)
  .add(ProvidersGroup)
  .add(FeatureFlagsGroup)
  .add(CombosGroup)
  .add(ResilienceGroup)
  .add(UsageGroup)
  .add(AccountingGroup)
  .add(BackupsGroup)
  .add(ModelsGroup)
  .add(OAuthGroup)
  .add(OAuthCallbackGroup)
  .add(SessionsGroup)
  .add(InitGroup)
  .add(SystemGroup)
  .add(CloudGroup)
  .add(SyncGroup)
  .add(NodesGroup)
  .add(SettingsGroup)
  .add(PoliciesGroup)
  .add(ComplianceGroup)
  .add(EvalsGroup)
  .add(ShadowGroup)
  .add(ReplayGroup)
  .add(CompatGroup)
  .add(WebhooksGroup)
  .add(ProxiesGroup)
  .add(AgentSkillsGroup)
  .add(CliToolsGroup)
  .add(AcpGroup)
  .add(McpGroup)
  .add(McpServersGroup)
  .add(McpOAuthCallbackGroup)
  .add(ContextGroup)
  .add(InspectorGroup)
  .add(InspectorOpenGroup)
  .add(TproxyGroup)
  .add(PluginsGroup)
  .add(PlaygroundGroup)
  .add(TunnelsGroup) {}
