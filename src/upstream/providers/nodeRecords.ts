import type * as Redacted from "effect/Redacted"
import type { CapabilityName } from "../../domain/models.js"
import type { NodeAuthStyle, NodeFamily } from "../../domain/nodes.js"
import { CUSTOM_DEFAULT_CONTEXT, CUSTOM_DEFAULT_OUTPUT } from "./customModels.js"
import type { ModelSpec, ProviderSpec } from "../../domain/catalog/modelSpec.js"

/**
 * Provider nodes (`/api/provider-nodes`): custom provider definitions, stored in the `kv` table
 * (namespace `provider_nodes`, one JSON record per node id), so database backups and cloud sync
 * carry them like the custom models. `Connections` reads them into its snapshot and resolves a
 * connection's provider id to a node's spec (`nodeSpec`) when the catalog does not know it.
 */
export const PROVIDER_NODES_NAMESPACE = "provider_nodes"

export interface NodeModelRecord {
  readonly id: string
  readonly name?: string | undefined
  readonly contextLength?: number | undefined
  readonly maxOutput?: number | undefined
  readonly capabilities?: ReadonlyArray<CapabilityName> | undefined
  readonly price?:
    | { readonly input?: number | undefined; readonly output?: number | undefined; readonly cachedInput?: number | undefined }
    | undefined
}

export interface NodeRecord {
  readonly id: string
  readonly name: string
  readonly prefix: string
  readonly baseUrl: string
  readonly family: NodeFamily
  readonly authStyle: NodeAuthStyle
  /** Header name → value encrypted with the storage key (`Secrets.encrypt`), like API keys. */
  readonly headers: Readonly<Record<string, string>>
  readonly models: ReadonlyArray<NodeModelRecord>
  readonly createdAt: number
  readonly updatedAt: number
}

/** Parses stored rows; a record that does not parse is skipped (a hand-edited row never breaks routing). */
export const parseNodes = (rows: ReadonlyArray<readonly [string, string]>): Array<NodeRecord> => {
  const out: Array<NodeRecord> = []
  for (const [, value] of rows) {
    try {
      const r = JSON.parse(value) as NodeRecord
      if (
        typeof r.id === "string" &&
        typeof r.prefix === "string" &&
        typeof r.baseUrl === "string" &&
        typeof r.family === "string" &&
        Array.isArray(r.models)
      ) {
        out.push({ ...r, headers: r.headers ?? {} })
      }
    } catch {
      // skipped
    }
  }
  return out.sort((a, b) => a.createdAt - b.createdAt)
}

/** A node model as a catalog model spec (chat; unset sizes as for custom models). */
export const nodeModelSpec = (m: NodeModelRecord): ModelSpec => {
  const has = (c: CapabilityName) => m.capabilities?.includes(c) ?? false
  const input = m.price?.input ?? 0
  const output = m.price?.output ?? 0
  return {
    id: m.id,
    name: m.name ?? m.id,
    kind: "chat",
    contextWindow: m.contextLength ?? CUSTOM_DEFAULT_CONTEXT,
    maxOutput: m.maxOutput ?? CUSTOM_DEFAULT_OUTPUT,
    capabilities: m.capabilities
      ? {
          tools: has("tools"),
          vision: has("vision"),
          reasoning: has("reasoning"),
          json: has("json"),
          audio: has("audio"),
          pdf: has("pdf"),
          realtime: has("realtime")
        }
      : { tools: true, vision: false, reasoning: false, json: true },
    pricing: m.price?.cachedInput !== undefined ? { input, output, cachedInput: m.price.cachedInput } : { input, output },
    tier: input === 0 && output === 0 ? "free" : input >= 2 ? "premium" : "standard"
  }
}

/** The provider spec a node defines, with its default headers decrypted (kept `Redacted`). */
export const nodeSpec = (r: NodeRecord, headers: Readonly<Record<string, Redacted.Redacted<string>>>): ProviderSpec => ({
  id: r.id,
  name: r.name,
  format: r.family,
  baseUrl: r.baseUrl,
  authStyle: r.authStyle,
  authClass: r.family === "ollama" && r.authStyle === "none" ? "local" : "apikey",
  category: "custom",
  requiresApiKey: false,
  requiresBaseUrl: false,
  docsUrl: "",
  offers: ["chat", "embedding"],
  models: r.models.map(nodeModelSpec),
  node: { prefix: r.prefix, headers }
})
