/**
 * Hooks that see each call through `/v1/mcp` before it is forwarded (docs/mcp.md, "What is
 * recorded"; plugins register theirs as `onMcpCall`, docs/plugins.md): each may let the call go,
 * refuse it, or answer it with a result of its own. Registered here, below the plugins and the
 * endpoint, so both can reach it.
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/** What a hook sees of a call. */
export interface McpCallView {
  readonly server: string
  /** `tool`, `resource` or `prompt`. */
  readonly kind: string
  /** The server's own name (a resource's URI). */
  readonly name: string
  /** The name on `/v1/mcp`. */
  readonly exposedName: string
  readonly arguments: unknown
  readonly apiKeyId: string
}

/** A hook's verdict: nothing (the call goes), `block` (refused with `message`), or `result` (the client gets it instead of the server's). */
export type McpCallVerdict = { readonly block?: boolean; readonly message?: string; readonly result?: unknown } | undefined

export interface McpCallHook {
  readonly name: string
  readonly onMcpCall: (call: McpCallView) => Promise<McpCallVerdict>
}

export interface McpCallHooksShape {
  /** Adds a hook; answers its removal (calling it twice is harmless). */
  readonly register: (hook: McpCallHook) => () => void
  /** The hooks now registered, in registration order. */
  readonly current: () => ReadonlyArray<McpCallHook>
}

export const makeMcpCallHooks = (): McpCallHooksShape => {
  let hooks: ReadonlyArray<McpCallHook> = []
  return {
    register: (hook) => {
      hooks = [...hooks, hook]
      let removed = false
      return () => {
        if (removed) return
        removed = true
        hooks = hooks.filter((h) => h !== hook)
      }
    },
    current: () => hooks
  }
}

export class McpCallHooks extends Context.Tag("gateway/McpCallHooks")<McpCallHooks, McpCallHooksShape>() {
  static readonly layer = Layer.effect(McpCallHooks, Effect.sync(makeMcpCallHooks))
}
