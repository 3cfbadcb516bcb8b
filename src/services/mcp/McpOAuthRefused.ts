import * as Data from "effect/Data"

/** A sign-in or sign-out the gateway refuses: `status` is the HTTP status the API answers with (re-exported by McpOAuth.ts). */
export class McpOAuthRefused extends Data.TaggedError("McpOAuthRefused")<{
  readonly status: 400 | 404 | 502
  readonly message: string
}> {}

/** What the connections hear: a server signed in or out (connect again), or its sign-in lost (needs-auth, with why). */
export type McpOAuthEvent =
  | { readonly kind: "signed-in" | "signed-out"; readonly server: string }
  | { readonly kind: "needs-auth"; readonly server: string; readonly reason: string }

/** How a needs-auth reason says to sign in. */
export const signInHint = (server: string) => `sign in with \`gateway mcp servers login ${server}\` or the dashboard's MCP servers page`
