/**
 * The gateway's connections to the registered MCP servers (docs/mcp.md): one SDK client per
 * enabled server over stdio (a supervised child process), streamable HTTP or HTTP+SSE,
 * reconnected on a backoff Schedule, with its health and what it offers (tools, resources,
 * prompts, listed at connect and again on `list_changed`).
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { RequestOptions } from "@modelcontextprotocol/sdk/shared/protocol.js"
import type {
  CallToolResult,
  GetPromptResult,
  Prompt,
  ReadResourceResult,
  Resource,
  ResourceTemplate,
  Tool
} from "@modelcontextprotocol/sdk/types.js"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as path from "node:path"
import type { McpServerHealth } from "../../domain/mcpServers.js"
import { AppConfig } from "../../platform/config/AppConfig.js"
import { McpOAuth, type McpOAuthShape } from "./McpOAuth.js"
import { McpServers, type McpServersShape } from "./McpServers.js"
import { processRecord } from "./processes.js"
import { EMPTY_OFFERINGS, initialHealth, makeSupervisor } from "./supervisor.js"
import { scrubberOf } from "./mcpServerSecrets.js"

/** A call that failed upstream or could not be made: the message names the server. */
export class McpUpstreamError extends Data.TaggedError("McpUpstreamError")<{
  readonly server: string
  /** `unknown_server`, `unavailable` (not connected), `timeout`, `cancelled`, `upstream` (the server's own JSON-RPC error). */
  readonly reason: "unknown_server" | "unavailable" | "timeout" | "cancelled" | "upstream"
  readonly message: string
  /** The server's JSON-RPC error code, when it answered with one. */
  readonly code?: number
}> {}

/** What a server offers, as it listed it last. */
export interface McpOfferings {
  readonly tools: ReadonlyArray<Tool>
  readonly resources: ReadonlyArray<Resource>
  readonly resourceTemplates: ReadonlyArray<ResourceTemplate>
  readonly prompts: ReadonlyArray<Prompt>
}

/** How one forwarded request goes: its cancellation, its progress notifications, its time limit (else the server's timeoutMs). */
export interface McpCallOptions {
  readonly signal?: AbortSignal
  readonly onProgress?: (progress: { progress: number; total?: number; message?: string }) => void
  readonly timeoutMs?: number
}

export interface McpUpstreamsShape {
  /** The server's health now (a server not registered: undefined). */
  readonly health: (server: string) => McpServerHealth | undefined
  /** What it offers (empty until listed). */
  readonly offerings: (server: string) => McpOfferings
  readonly callTool: (
    server: string,
    tool: string,
    args: Record<string, unknown> | undefined,
    options?: McpCallOptions
  ) => Effect.Effect<CallToolResult, McpUpstreamError>
  readonly readResource: (server: string, uri: string, options?: McpCallOptions) => Effect.Effect<ReadResourceResult, McpUpstreamError>
  readonly getPrompt: (
    server: string,
    prompt: string,
    args: Record<string, string> | undefined,
    options?: McpCallOptions
  ) => Effect.Effect<GetPromptResult, McpUpstreamError>
  /** Close and connect again now (a stdio server: a new process). */
  readonly restart: (server: string) => Effect.Effect<void, McpUpstreamError>
  /** Called with the server's name when what it offers changed (listed again) or its health changed; returns the unsubscribe. */
  readonly onChange: (listener: (server: string) => void) => () => void
}

export class McpUpstreams extends Context.Tag("gateway/McpUpstreams")<McpUpstreams, McpUpstreamsShape>() {
  /**
   * The connections of this gateway process, reconciled with the registry as it changes, closed
   * (stdio processes stopped) with the layer. Nothing is loaded and nothing runs while no server
   * is registered: the SDK is imported at the first connection. With McpOAuth (the gateway's
   * sign-ins to remote servers), an http or sse server it holds a token for connects with it,
   * and a sign-in, sign-out or lost sign-in reaches the connection.
   */
  static readonly layer: Layer.Layer<McpUpstreams, never, McpServers | AppConfig> = Layer.scoped(
    McpUpstreams,
    Effect.gen(function* () {
      const servers = yield* McpServers
      const { dataDir } = yield* AppConfig
      const oauth = Option.getOrUndefined(yield* Effect.serviceOption(McpOAuth))
      return yield* makeMcpUpstreams(servers, path.join(dataDir, "mcp", "processes"), oauth)
    })
  )
}

/**
 * The service over the registry; `processDir` records this process's stdio servers (processes.ts);
 * `oauth` holds the sign-ins to http and sse servers.
 */
export const makeMcpUpstreams = (servers: McpServersShape, processDir: string, oauth?: McpOAuthShape) =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const processes = processRecord(processDir)
    // Servers a previous run left running (it crashed or was killed): stopped, in the background.
    yield* Effect.forkScoped(
      Effect.promise(() => processes.reap()).pipe(
        Effect.flatMap((n) =>
          n === 0
            ? Effect.void
            : Effect.logWarning(`MCP servers: stopped ${n} stdio process${n === 1 ? "" : "es"} a previous run left running`)
        )
      )
    )

    const listeners = new Set<(server: string) => void>()
    const changed = (server: string) => {
      for (const f of [...listeners]) {
        try {
          f(server)
        } catch {
          // a listener's failure is its own
        }
      }
    }
    const supervisor = makeSupervisor({
      all: servers.all,
      processes,
      scope,
      changed,
      ...(oauth ? { authProvider: oauth.providerFor } : {})
    })

    // The registry's changes, reconciled one at a time (a burst of them: once).
    const wake = yield* Queue.sliding<void>(1)
    const unsubscribe = servers.onChange(() => void Queue.unsafeOffer(wake, undefined))
    yield* supervisor.reconcile
    yield* Effect.forkScoped(Effect.forever(Queue.take(wake).pipe(Effect.zipRight(supervisor.reconcile))))
    // Signed in or out: connected again (with the token, or to be told to sign in); a sign-in lost: needs-auth with why.
    const runFork = yield* FiberSet.makeRuntime<never>()
    const unsubscribeOAuth = oauth?.onEvent((event) =>
      runFork(
        event.kind === "needs-auth" ? supervisor.needsAuth(event.server, event.reason) : Effect.asVoid(supervisor.restart(event.server))
      )
    )
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unsubscribe()
        unsubscribeOAuth?.()
      }).pipe(Effect.zipRight(supervisor.stopAll))
    )

    const health = (server: string): McpServerHealth | undefined => {
      const record = servers.byName(server)
      if (record === undefined) return undefined
      return supervisor.entries.get(server)?.health ?? initialHealth(record)
    }

    /** One request forwarded through the server's client, with its time limit, cancellation and progress. */
    const forward = <A>(
      server: string,
      what: string,
      options: McpCallOptions | undefined,
      send: (client: Client, request: RequestOptions) => Promise<A>
    ): Effect.Effect<A, McpUpstreamError> =>
      Effect.suspend(() => {
        const record = servers.byName(server)
        if (record === undefined)
          return Effect.fail(
            new McpUpstreamError({ server, reason: "unknown_server", message: `no MCP server named "${server}" is registered` })
          )
        const live = supervisor.entries.get(server)?.live
        if (live === undefined) {
          const h = health(server)
          const state = h === undefined ? "not connected" : `${h.state}${h.reason ? `: ${h.reason}` : ""}`
          return Effect.fail(
            new McpUpstreamError({ server, reason: "unavailable", message: `MCP server "${server}" is not connected (${state})` })
          )
        }
        const limit = options?.timeoutMs ?? record.timeoutMs
        const cancelled = () =>
          new McpUpstreamError({ server, reason: "cancelled", message: `${what} on MCP server "${server}" was cancelled` })
        if (options?.signal?.aborted) return Effect.fail(cancelled())
        return Effect.async<A, McpUpstreamError>((resume, interrupted) => {
          // Interrupted (the time limit, the caller gone) or cancelled: the SDK sends notifications/cancelled.
          const signal = options?.signal ? AbortSignal.any([interrupted, options.signal]) : interrupted
          const onProgress = options?.onProgress
          send(live.conn.client, {
            signal,
            // The SDK's own limit a little later than ours: ours decides, and names the server.
            timeout: limit + 1000,
            ...(onProgress
              ? {
                  onprogress: (p) =>
                    onProgress({
                      progress: p.progress,
                      ...(p.total !== undefined ? { total: p.total } : {}),
                      ...(p.message !== undefined ? { message: p.message } : {})
                    })
                }
              : {})
          }).then(
            (a) => resume(Effect.succeed(a)),
            (e: unknown) => {
              if (options?.signal?.aborted) return resume(Effect.fail(cancelled()))
              const m = live.sdk.meaningOf(e)
              switch (m.kind) {
                case "upstream":
                  return resume(
                    Effect.fail(
                      new McpUpstreamError({ server, reason: "upstream", code: m.code, message: `MCP server "${server}": ${m.message}` })
                    )
                  )
                case "timeout":
                  return resume(Effect.fail(timedOut(server, what, limit)))
                case "unauthorized":
                  live.unauthorized(m.message)
                  break
                case "connection":
                  live.suspect(m.message)
              }
              // The connection's own failure may quote the server's url or a header: scrubbed of its secrets.
              const why = scrubberOf(record)(m.message)
              resume(Effect.fail(new McpUpstreamError({ server, reason: "unavailable", message: `MCP server "${server}": ${why}` })))
            }
          )
        }).pipe(Effect.timeoutFail({ duration: Duration.millis(limit), onTimeout: () => timedOut(server, what, limit) }))
      })

    const service: McpUpstreamsShape = {
      health,
      offerings: (server) =>
        servers.byName(server) === undefined ? EMPTY_OFFERINGS : (supervisor.entries.get(server)?.offerings ?? EMPTY_OFFERINGS),
      callTool: (server, tool, args, options) =>
        forward(
          server,
          `the tool ${JSON.stringify(tool)}`,
          options,
          (client, request) =>
            client.callTool(
              { name: tool, ...(args !== undefined ? { arguments: args } : {}) },
              undefined,
              request
            ) as Promise<CallToolResult>
        ).pipe(Effect.withSpan("McpUpstreams.callTool", { attributes: { server, tool } })),
      readResource: (server, uri, options) =>
        forward(server, `reading ${JSON.stringify(uri)}`, options, (client, request) => client.readResource({ uri }, request)).pipe(
          Effect.withSpan("McpUpstreams.readResource", { attributes: { server, uri } })
        ),
      getPrompt: (server, prompt, args, options) =>
        forward(server, `the prompt ${JSON.stringify(prompt)}`, options, (client, request) =>
          client.getPrompt({ name: prompt, ...(args !== undefined ? { arguments: args } : {}) }, request)
        ).pipe(Effect.withSpan("McpUpstreams.getPrompt", { attributes: { server, prompt } })),
      restart: (server) =>
        Effect.gen(function* () {
          const record = servers.byName(server)
          if (record === undefined)
            return yield* new McpUpstreamError({
              server,
              reason: "unknown_server",
              message: `no MCP server named "${server}" is registered`
            })
          // A server registered a moment ago that the reconciliation has not reached yet: reached now.
          if (!supervisor.entries.has(server)) yield* supervisor.reconcile
          const done = yield* supervisor.restart(server)
          if (!done) return yield* new McpUpstreamError({ server, reason: "unavailable", message: `MCP server "${server}" is disabled` })
        }).pipe(Effect.withSpan("McpUpstreams.restart", { attributes: { server } })),
      onChange: (listener) => {
        listeners.add(listener)
        return () => void listeners.delete(listener)
      }
    }
    return service
  })

const timedOut = (server: string, what: string, limit: number) =>
  new McpUpstreamError({ server, reason: "timeout", message: `MCP server "${server}" did not answer ${what} within ${limit} ms` })
