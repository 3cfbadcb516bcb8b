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
  "onMcpCall",
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
  /** The SDK module's source (SDK_FILE), read by the gateway: the sandbox reads nothing outside the plugin's folder. */
  readonly sdkSource: string
}

export type ParentMessage =
  | LoadRequest
  | { readonly t: "call"; readonly id: number; readonly hook: string; readonly ctx: unknown; readonly timeoutMs: number }

export type ChildMessage =
  | {
      readonly t: "loaded"
      readonly name: string
      readonly priority: number
      readonly enabled: boolean
      readonly hooks: ReadonlyArray<PluginHook>
    }
  | { readonly t: "error"; readonly message: string }
  | { readonly t: "result"; readonly id: number; readonly value: unknown }
  | { readonly t: "failed"; readonly id: number; readonly message: string }
  | { readonly t: "log"; readonly level: string; readonly text: string }

/** The SDK a plugin imports: the package's public entry (`sdk/plugin-sdk.js`, exported as `gateway/plugin-sdk`), its text evaluated in the
 * sandbox. */
export const SDK_FILE = "sdk/plugin-sdk.js"

/** One script run to its end (./run.ts): what the gateway sends once the process started. */
export interface RunRequest {
  readonly t: "run"
  /** The folder (absolute) the script may read and import from. */
  readonly dir: string
  /** The script, relative to `dir`. */
  readonly script: string
  /** `process.argv` in the script: Node's shape, the arguments from index 2. */
  readonly argv: ReadonlyArray<string>
  readonly stdin: string
  readonly timeoutMs: number
  readonly memoryLimitBytes: number
  /** Set: every fetch fails with this message (no network). Else fetches go to `hosts` only. */
  readonly networkOff: string | null
  /** `host:port` (or a bare host: its scheme's default port) the script may fetch from. */
  readonly hosts: ReadonlyArray<string>
}

export type RunMessage =
  | { readonly t: "out"; readonly stream: "stdout" | "stderr"; readonly text: string }
  /** A fetch the script asked for, and whether it went out. */
  | { readonly t: "fetch"; readonly target: string; readonly allowed: boolean }
  | { readonly t: "done"; readonly exitCode: number | null; readonly error: string | null; readonly stopped: "time" | "memory" | null }
