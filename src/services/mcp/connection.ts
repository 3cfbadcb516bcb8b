/**
 * Everything of the MCP SDK the upstream connections use (docs/mcp.md, "Connections to the
 * upstream servers"): the client over its transport (ordered: a notification is handled before
 * what follows it), the listings with their cursors, closing, and what an error means. The layer loads this module at its first connection (`loadConnection`), so a
 * gateway with no server registered, and every CLI command, never loads the SDK.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { type OAuthClientProvider, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Transport, TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js"
import {
  ErrorCode,
  type JSONRPCMessage,
  type MessageExtraInfo,
  McpError,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ToolListChangedNotificationSchema
} from "@modelcontextprotocol/sdk/types.js"
import type { McpServerRecord } from "../../domain/mcpServers.js"
import { VERSION } from "../../kernel/version.js"
import type { McpOfferings } from "./McpUpstreams.js"
import type { StdioProcess } from "./processes.js"
import { ProcessTransport } from "./stdioTransport.js"

export type { Client }

/** What a list_changed notification asks to list again. */
export type ListKind = "tools" | "resources" | "prompts"

export interface Connection {
  readonly client: Client
  readonly transport: Transport
}

/**
 * The client for `record` over its transport (not yet connected); stdio over the process the caller
 * spawned; http and sse with the server's OAuth provider when the gateway holds a token for it
 * (its token on every request; a 401 refreshes it through the SDK).
 */
export const createConnection = (
  record: McpServerRecord,
  child: StdioProcess | undefined,
  authProvider?: OAuthClientProvider
): Connection => {
  const client = new Client({ name: "gateway", version: VERSION }, { capabilities: {} })
  let transport: Transport
  if (record.transport === "stdio") {
    if (child === undefined) throw new Error("a stdio server needs its process")
    transport = new ProcessTransport(child)
  } else {
    const url = new URL(record.url ?? "")
    const requestInit: RequestInit = { headers: { ...record.headers } }
    const options = { requestInit, ...(authProvider ? { authProvider } : {}) }
    transport = record.transport === "sse" ? new SSEClientTransport(url, options) : new StreamableHTTPClientTransport(url, options)
  }
  return { client, transport: new OrderedTransport(transport) }
}

/**
 * The transport as the client needs it: the SDK runs a notification's handler a microtask after
 * it arrived but a response's at once, so a progress notification read in the same chunk as its
 * request's answer would find its handler already gone (and the last progress never reach the
 * caller). After each notification the next message waits for the handler to have run.
 */
class OrderedTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void
  private readonly queue: Array<[JSONRPCMessage, MessageExtraInfo | undefined]> = []
  private draining = false
  private closed = false

  constructor(readonly inner: Transport) {}

  get sessionId() {
    return this.inner.sessionId
  }

  setProtocolVersion = (version: string) => this.inner.setProtocolVersion?.(version)

  start(): Promise<void> {
    this.inner.onmessage = (message, extra) => {
      this.queue.push([message, extra])
      if (!this.draining) this.drain()
    }
    this.inner.onerror = (e) => this.onerror?.(e)
    this.inner.onclose = () => {
      this.closed = true
      if (!this.draining) this.closeNow()
    }
    return this.inner.start()
  }

  private drain() {
    this.draining = true
    for (;;) {
      const next = this.queue.shift()
      if (next === undefined) break
      this.onmessage?.(next[0], next[1])
      if ("method" in next[0] && !("id" in next[0])) {
        // What arrives meanwhile (the rest of this chunk, the next) waits in the queue.
        setImmediate(() => this.drain())
        return
      }
    }
    this.draining = false
    if (this.closed) this.closeNow()
  }

  private closeSent = false
  private closeNow() {
    if (this.closeSent) return
    this.closeSent = true
    this.onclose?.()
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    return this.inner.send(message, options)
  }

  close(): Promise<void> {
    return this.inner.close()
  }
}

/** Registers `onChanged` for each list_changed notification (before connect: none is missed). */
export const onListChanged = (client: Client, onChanged: (kind: ListKind) => void) => {
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => onChanged("tools"))
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => onChanged("resources"))
  client.setNotificationHandler(PromptListChangedNotificationSchema, () => onChanged("prompts"))
}

/** Pages one listing follows at most (a server whose cursors never end is cut off there). */
const MAX_PAGES = 100

const allPages = async <T>(page: (cursor: string | undefined) => Promise<{ items: ReadonlyArray<T>; nextCursor?: string | undefined }>) => {
  const items: Array<T> = []
  const seen = new Set<string>()
  let cursor: string | undefined
  for (let i = 0; i < MAX_PAGES; i++) {
    const result = await page(cursor)
    items.push(...result.items)
    cursor = result.nextCursor
    if (cursor === undefined || seen.has(cursor)) break
    seen.add(cursor)
  }
  return items
}

/** Lists `kind` (all pages) if the server's capabilities declare it; one that declares none has none. */
export const listKind = async (
  client: Client,
  kind: ListKind,
  options: { readonly timeout: number; readonly signal?: AbortSignal }
): Promise<Partial<McpOfferings>> => {
  const caps = client.getServerCapabilities() ?? {}
  const o = { timeout: options.timeout, ...(options.signal ? { signal: options.signal } : {}) }
  switch (kind) {
    case "tools":
      if (caps.tools === undefined) return { tools: [] }
      return { tools: await allPages((cursor) => client.listTools(cursor ? { cursor } : {}, o).then((r) => ({ ...r, items: r.tools }))) }
    case "prompts":
      if (caps.prompts === undefined) return { prompts: [] }
      return {
        prompts: await allPages((cursor) => client.listPrompts(cursor ? { cursor } : {}, o).then((r) => ({ ...r, items: r.prompts })))
      }
    case "resources": {
      if (caps.resources === undefined) return { resources: [], resourceTemplates: [] }
      const resources = await allPages((cursor) =>
        client.listResources(cursor ? { cursor } : {}, o).then((r) => ({ ...r, items: r.resources }))
      )
      const resourceTemplates = await allPages((cursor) =>
        client.listResourceTemplates(cursor ? { cursor } : {}, o).then((r) => ({ ...r, items: r.resourceTemplates }))
      )
      return { resources, resourceTemplates }
    }
  }
}

/** Closes the connection: an HTTP session is ended (DELETE, at most a second), a stdio server stopped (its group). */
export const closeConnection = async ({ client, transport }: Connection): Promise<void> => {
  const inner = transport instanceof OrderedTransport ? transport.inner : transport
  if (inner instanceof StreamableHTTPClientTransport && inner.sessionId !== undefined) {
    await Promise.race([inner.terminateSession().catch(() => undefined), new Promise((r) => setTimeout(r, 1000).unref())])
  }
  await client.close().catch(() => undefined)
  // A transport the client never started (connect failed before it) is closed all the same.
  await transport.close().catch(() => undefined)
}

/** What an error of the SDK means for the gateway. */
export type ErrorMeaning =
  /** The server answered 401 (no token the gateway holds was taken or could be refreshed): a sign-in is needed, retrying will not help. */
  | { readonly kind: "unauthorized"; readonly message: string }
  /** The server's own JSON-RPC error. */
  | { readonly kind: "upstream"; readonly code: number; readonly message: string }
  /** The SDK's own time limit ran out. */
  | { readonly kind: "timeout"; readonly message: string }
  /** The connection is gone (closed, refused, an HTTP session the server forgot). */
  | { readonly kind: "connection"; readonly message: string }

const statusOf = (error: unknown): number | undefined => {
  const code = (error as { code?: unknown } | null)?.code
  if (typeof code === "number" && code >= 100 && code < 600) return code
  const m = /\(HTTP (\d{3})\)/.exec(error instanceof Error ? error.message : "")
  return m ? Number(m[1]) : undefined
}

export const meaningOf = (error: unknown): ErrorMeaning => {
  const message = error instanceof Error ? error.message : String(error)
  if (error instanceof UnauthorizedError) return { kind: "unauthorized", message }
  if (error instanceof McpError) {
    if (error.code === ErrorCode.RequestTimeout) return { kind: "timeout", message }
    // The SDK's own word when the connection closed with the request pending.
    if (error.code === ErrorCode.ConnectionClosed && /connection closed/i.test(message)) return { kind: "connection", message }
    return { kind: "upstream", code: error.code, message }
  }
  const status = statusOf(error)
  if (status === 401) return { kind: "unauthorized", message }
  return { kind: "connection", message }
}
