/**
 * What the gateway and a plugin's process (./child.ts) say to each other over IPC, and the SDK
 * module a plugin imports inside its sandbox (`gateway/plugin-sdk`, docs/plugins.md).
 */

export const SDK_MODULE = "gateway/plugin-sdk"

/** The permissions of a manifest's `requires.permissions` (spec document 3). */
export const PLUGIN_PERMISSIONS = ["network", "file-read", "file-write", "env", "exec"] as const
export type PluginPermission = (typeof PLUGIN_PERMISSIONS)[number]

/** The hooks a plugin may define: the request path's, then the lifecycle's. */
export const PLUGIN_HOOKS = [
  "onRequest",
  "onModelSelect",
  "onComboResolve",
  "onRateLimit",
  "onQuotaExhaust",
  "onProviderError",
  "onStreamStart",
  "onStreamEnd",
  "onResponse",
  "onError",
  "onInstall",
  "onActivate",
  "onDeactivate",
  "onUninstall"
] as const
export type PluginHook = (typeof PLUGIN_HOOKS)[number]

export interface LoadRequest {
  readonly t: "load"
  /** The plugin's folder (absolute). */
  readonly dir: string
  /** Its entry file, relative to `dir`. */
  readonly main: string
  readonly permissions: ReadonlyArray<PluginPermission>
  /** Where `file-write` writes (absolute). */
  readonly dataDir: string
  readonly config: Readonly<Record<string, unknown>>
  /** The process's resident memory past which the plugin's code is interrupted (also QuickJS's own heap limit). */
  readonly memoryLimitBytes: number
  /** How long evaluating the module may take. */
  readonly timeoutMs: number
}

export type ParentMessage = LoadRequest | { readonly t: "call"; readonly id: number; readonly hook: string; readonly ctx: unknown; readonly timeoutMs: number }

export type ChildMessage =
  | { readonly t: "loaded"; readonly name: string; readonly priority: number; readonly enabled: boolean; readonly hooks: ReadonlyArray<PluginHook> }
  | { readonly t: "error"; readonly message: string }
  | { readonly t: "result"; readonly id: number; readonly value: unknown }
  | { readonly t: "failed"; readonly id: number; readonly message: string }
  | { readonly t: "log"; readonly level: string; readonly text: string }

/**
 * The SDK inside the sandbox. `definePlugin` checks the definition and fills the spec's defaults
 * (kebab-case name, priority 100, enabled true); the helpers return tagged results the gateway
 * reads (`blockRequest`, `modifyBody`, `addMetadata`). `config` is the plugin's configuration.
 */
export const SDK_SOURCE = `
const KEBAB = /^[a-z0-9]+(-[a-z0-9]+)*$/
export const definePlugin = (definition) => {
  if (definition === null || typeof definition !== "object") throw new TypeError("definePlugin takes an object")
  if (typeof definition.name !== "string" || !KEBAB.test(definition.name)) throw new TypeError("definePlugin: name must be kebab-case, e.g. my-plugin")
  const priority = definition.priority === undefined ? 100 : definition.priority
  if (typeof priority !== "number" || !Number.isFinite(priority)) throw new TypeError("definePlugin: priority must be a number")
  return Object.freeze({ ...definition, priority, enabled: definition.enabled !== false })
}
export const blockRequest = (response) => ({ __gateway: "block", response: response === undefined ? null : response })
export const modifyBody = (body) => ({ __gateway: "modify", body })
export const addMetadata = (metadata) => ({ __gateway: "metadata", metadata })
export const config = globalThis.__pluginConfig
`
