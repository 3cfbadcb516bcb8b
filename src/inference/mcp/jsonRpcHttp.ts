/**
 * What both MCP endpoints over streamable HTTP (`/mcp`, `/v1/mcp`) answer before the SDK's transport
 * takes a request: errors as the transport answers its own (a JSON-RPC error with no id), and a
 * POST's body read within a limit and parsed under the depth limit.
 */
import * as Effect from "effect/Effect"
import type * as http from "node:http"
import { jsonTooDeep, TOO_DEEP_MESSAGE } from "../../kernel/untrusted.js"
import { readBody } from "../io.js"

/** An error as the SDK's transport answers its own: a JSON-RPC error with no id. */
export const reply = (
  res: http.ServerResponse,
  status: number,
  code: number,
  message: string,
  headers: Record<string, string> = {},
  data?: unknown
) => {
  if (res.headersSent) return void res.end()
  const body = JSON.stringify({ jsonrpc: "2.0", error: { code, message, ...(data === undefined ? {} : { data }) }, id: null })
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers })
  res.end(body)
}

/** An initialize request (or a batch holding one): what may open a session. The SDK checks the rest. */
export const isInitialize = (body: unknown): boolean =>
  Array.isArray(body)
    ? body.some(isInitialize)
    : typeof body === "object" && body !== null && (body as { method?: unknown }).method === "initialize"

/** A POST's JSON-RPC body, or `undefined` once the refusal (too large, too deep, not JSON) was written. */
export const readJsonRpc = (req: http.IncomingMessage, res: http.ServerResponse, limit: number) =>
  Effect.map(Effect.either(readBody(req, limit)), (read): { readonly body: unknown } | undefined => {
    if (read._tag === "Left") return void reply(res, read.left.status, -32000, read.left.message)
    const text = read.right.toString("utf8")
    if (jsonTooDeep(text)) return void reply(res, 400, -32700, `Parse error: request body is ${TOO_DEEP_MESSAGE}`)
    try {
      return { body: JSON.parse(text) }
    } catch (e) {
      return void reply(res, 400, -32700, `Parse error: request body is not valid JSON: ${(e as Error).message}`)
    }
  })
