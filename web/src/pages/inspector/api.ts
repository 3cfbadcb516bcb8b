import type { Res } from "../govern/types"

/** Where the inspector's routes are (docs/inspector.md): its requests, sessions and capture modes, and its WebSocket feed at `${BASE}/ws`.
 * */
export const BASE = "/api/tools/traffic-inspector"

export type Summary = Res<"/api/tools/traffic-inspector/requests", "get">["requests"][number]
export type Detail = Res<"/api/tools/traffic-inspector/requests/{id}", "get">
export type Body = NonNullable<Detail["requestBody"]>
export type Session = Res<"/api/tools/traffic-inspector/sessions", "get">["sessions"][number]
export type Modes = Res<"/api/tools/traffic-inspector/capture-modes", "get">
export type Replayed = Res<"/api/tools/traffic-inspector/requests/{id}/replay", "post">
export type Source = Summary["source"]

// The parts the OpenAPI document leaves open (Schema.Unknown), as src/services/inspector/types.ts
// and Capture.ts make them.
export type Block =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "reasoning"; readonly text: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
  | { readonly type: "tool_result"; readonly toolUseId: string; readonly content: string; readonly isError?: boolean }
  | { readonly type: "image"; readonly mediaType?: string | null }
export interface Turn {
  readonly role: "system" | "user" | "assistant" | "tool"
  readonly blocks: ReadonlyArray<Block>
}
export interface Upstream {
  readonly attempt: number
  readonly provider: string
  readonly connection: string
  readonly model: string
  readonly url: string | null
  readonly requestBody: Body | null
  readonly status: number | null
  readonly responseBody: Body | null
  readonly error: string | null
}
export interface HttpProxyState {
  readonly running: boolean
  readonly host: string
  readonly port: number
  readonly error: string | null
  readonly url: string | null
}
export interface SystemProxyState {
  readonly applied: boolean
  readonly appliedAt: number | null
  readonly guardMinutes: number
  readonly revertsAt: number | null
  readonly changes: ReadonlyArray<{ readonly kind: string; readonly target: string; readonly detail: string }>
  readonly notes: ReadonlyArray<string>
  readonly error: string | null
}
export interface MitmState {
  readonly running: boolean
  readonly port: number
  readonly error: string | null
}
