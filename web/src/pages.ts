import type { ComponentType } from "preact"

/**
 * Every page of the dashboard: its path below /dashboard, its name in the navigation, and its
 * module (loaded on first visit, so the first screen downloads only what it shows).
 */
export interface PageEntry {
  readonly path: string
  readonly title: string
  readonly group: "Monitor" | "Route" | "Access" | "Operate"
  readonly load: () => Promise<{ default: ComponentType }>
  /** The route (`group.endpoint`) the page reads first: shown only to roles that may call it (docs/teams.md). */
  readonly needs?: string
}

export const PAGES: ReadonlyArray<PageEntry> = [
  { path: "/", title: "Overview", group: "Monitor", load: () => import("./pages/Overview"), needs: "usage.health" },
  { path: "/usage", title: "Usage & cost", group: "Monitor", load: () => import("./pages/Usage"), needs: "usage.history" },
  { path: "/logs", title: "Request log", group: "Monitor", load: () => import("./pages/Logs"), needs: "usage.logs" },
  { path: "/inspector", title: "Inspector", group: "Monitor", load: () => import("./pages/inspector/Inspector"), needs: "inspector.list" },
  { path: "/resilience", title: "Resilience", group: "Monitor", load: () => import("./pages/Resilience"), needs: "resilience.status" },
  { path: "/providers", title: "Providers", group: "Route", load: () => import("./pages/Providers"), needs: "providers.list" },
  { path: "/models", title: "Models & aliases", group: "Route", load: () => import("./pages/Models"), needs: "models.catalog" },
  { path: "/combos", title: "Combos", group: "Route", load: () => import("./pages/Combos"), needs: "combos.list" },
  { path: "/shadow", title: "Shadow traffic", group: "Route", load: () => import("./pages/Shadow"), needs: "shadow.report" },
  { path: "/compat", title: "Client compatibility", group: "Route", load: () => import("./pages/Compat"), needs: "compat.matrix" },
  { path: "/cache", title: "Cache", group: "Route", load: () => import("./pages/Cache"), needs: "accounting.cacheStats" },
  { path: "/compression", title: "Compression", group: "Route", load: () => import("./pages/Compression"), needs: "context.analytics" },
  { path: "/playground", title: "Playground", group: "Route", load: () => import("./pages/Playground"), needs: "playground.listPresets" },
  { path: "/keys", title: "API keys", group: "Access", load: () => import("./pages/Keys"), needs: "keys.list" },
  { path: "/people", title: "People & teams", group: "Access", load: () => import("./pages/People"), needs: "users.list" },
  { path: "/guardrails", title: "Guardrails & audit", group: "Access", load: () => import("./pages/Guardrails"), needs: "policies.list" },
  { path: "/tools", title: "Coding tools", group: "Access", load: () => import("./pages/Tools"), needs: "cliTools.allStatuses" },
  { path: "/skills", title: "Skills", group: "Access", load: () => import("./pages/Skills") },
  { path: "/mcp-servers", title: "MCP servers", group: "Access", load: () => import("./pages/McpServers"), needs: "mcpServers.list" },
  { path: "/settings", title: "Settings", group: "Operate", load: () => import("./pages/Settings"), needs: "settings.get" },
  { path: "/flags", title: "Feature flags", group: "Operate", load: () => import("./pages/Flags"), needs: "featureFlags.list" },
  { path: "/webhooks", title: "Webhooks", group: "Operate", load: () => import("./pages/Webhooks"), needs: "webhooks.list" },
  { path: "/plugins", title: "Plugins", group: "Operate", load: () => import("./pages/Plugins"), needs: "plugins.list" },
  { path: "/tunnels", title: "Tunnels", group: "Operate", load: () => import("./pages/Tunnels"), needs: "tunnels.quickStatus" },
  { path: "/backups", title: "Backups", group: "Operate", load: () => import("./pages/Backups"), needs: "backups.list" }
]
