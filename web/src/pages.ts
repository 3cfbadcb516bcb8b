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
}

export const PAGES: ReadonlyArray<PageEntry> = [
  { path: "/", title: "Overview", group: "Monitor", load: () => import("./pages/Overview") },
  { path: "/usage", title: "Usage & cost", group: "Monitor", load: () => import("./pages/Usage") },
  { path: "/logs", title: "Request log", group: "Monitor", load: () => import("./pages/Logs") },
  { path: "/inspector", title: "Inspector", group: "Monitor", load: () => import("./pages/inspector/Inspector") },
  { path: "/resilience", title: "Resilience", group: "Monitor", load: () => import("./pages/Resilience") },
  { path: "/providers", title: "Providers", group: "Route", load: () => import("./pages/Providers") },
  { path: "/models", title: "Models & aliases", group: "Route", load: () => import("./pages/Models") },
  { path: "/combos", title: "Combos", group: "Route", load: () => import("./pages/Combos") },
  { path: "/shadow", title: "Shadow traffic", group: "Route", load: () => import("./pages/Shadow") },
  { path: "/compat", title: "Client compatibility", group: "Route", load: () => import("./pages/Compat") },
  { path: "/cache", title: "Cache", group: "Route", load: () => import("./pages/Cache") },
  { path: "/compression", title: "Compression", group: "Route", load: () => import("./pages/Compression") },
  { path: "/playground", title: "Playground", group: "Route", load: () => import("./pages/Playground") },
  { path: "/keys", title: "API keys", group: "Access", load: () => import("./pages/Keys") },
  { path: "/guardrails", title: "Guardrails & audit", group: "Access", load: () => import("./pages/Guardrails") },
  { path: "/tools", title: "Coding tools", group: "Access", load: () => import("./pages/Tools") },
  { path: "/skills", title: "Skills", group: "Access", load: () => import("./pages/Skills") },
  { path: "/mcp-servers", title: "MCP servers", group: "Access", load: () => import("./pages/McpServers") },
  { path: "/settings", title: "Settings", group: "Operate", load: () => import("./pages/Settings") },
  { path: "/flags", title: "Feature flags", group: "Operate", load: () => import("./pages/Flags") },
  { path: "/webhooks", title: "Webhooks", group: "Operate", load: () => import("./pages/Webhooks") },
  { path: "/plugins", title: "Plugins", group: "Operate", load: () => import("./pages/Plugins") },
  { path: "/tunnels", title: "Tunnels", group: "Operate", load: () => import("./pages/Tunnels") },
  { path: "/backups", title: "Backups", group: "Operate", load: () => import("./pages/Backups") }
]
