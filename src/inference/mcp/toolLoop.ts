/**
 * The MCP tool loop of a Responses request (docs/mcp.md, "MCP tools in model requests"): the
 * tools of the named servers the caller may use offered as function tools, each round a
 * non-streamed Responses request through the gateway's own route, the model's calls checked,
 * forwarded and recorded as `/v1/mcp` calls are, their results fed back, until the model answers
 * without calling them, a call waits for approval, it calls the client's own tools, or the limit.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import * as Effect from "effect/Effect"
import { errorKindForStatus, newId, type Usage } from "../../domain/canonical.js"
import type { McpServerRecord } from "../../domain/mcpServers.js"
import { badRequest, InferenceError } from "../../kernel/errors.js"
import { INTERNAL_HEADER, INTERNAL_REQUEST_ID_HEADER, ON_BEHALF_HEADER, type OwnRoutesShape } from "../../kernel/internalCall.js"
import type { LevelsShape } from "../../services/accounting/Levels.js"
import type { ApiKeysShape } from "../../services/auth/ApiKeys.js"
import type { McpServersShape } from "../../services/mcp/McpServers.js"
import type { McpUpstreamsShape } from "../../services/mcp/McpUpstreams.js"
import { arr, num, obj, str, tryJson } from "../../upstream/formats/common.js"
import { openAiResponses } from "../../upstream/formats/openai-responses.js"
import { usageFromResponses } from "../../upstream/formats/openai-responses-answers.js"
import type { HttpRequestContext } from "../io.js"
import type { ResponseStoreShape } from "../ResponseStore.js"
import { levelServerRefusal, type McpAccess, patternsReachServer, refusal } from "./access.js"
import { type CheckedCall, INVALID_PARAMS, MCP_REFUSED } from "./checkedCall.js"
import { type Finish, makeSink, type Sink } from "./responsesMcpSink.js"
import {
  approvalItem,
  type Conversation,
  callItem,
  callOutputText,
  functionNameOf,
  functionTool,
  type McpCallItem,
  type McpToolSpec,
  mcpToolSpecs,
  readConversation,
  refusedText,
  resultText
} from "./responsesTools.js"

export interface ToolLoopDeps {
  readonly servers: McpServersShape
  readonly upstreams: McpUpstreamsShape
  readonly checkedCall: CheckedCall
  readonly keys: ApiKeysShape
  /** The MCP access of the levels above a key. */
  readonly levels: LevelsShape
  /** Model rounds one request may take. */
  readonly maxRounds: number
}

/** One offered tool: the spec that offers it and the server's tool. */
interface Offered {
  readonly spec: McpToolSpec
  readonly tool: Tool
}

/** A server's listing for the answer's `mcp_list_tools` item. */
interface Listing {
  readonly spec: McpToolSpec
  readonly tools: ReadonlyArray<Tool>
  readonly error?: string
}

const invalid = (message: string, param: string) => badRequest(message, param)
const unauthorized = (message: string) => new InferenceError({ status: 401, kind: "authentication", code: "invalid_api_key", message })
const forbidden = (message: string, param: string) =>
  new InferenceError({ status: 403, kind: "permission", code: "mcp_tool_not_allowed", message, param })

/** Who calls: MCP servers reach the disk and the network, so a key is always needed (as on /v1/mcp). */
const accessOf = (keys: ApiKeysShape, levels: LevelsShape, ctx: HttpRequestContext): Effect.Effect<McpAccess, InferenceError> =>
  ctx.apiKeyId === null
    ? Effect.fail(unauthorized("mcp tools need a gateway API key, always: send it as 'Authorization: Bearer <key>' (or x-api-key)"))
    : Effect.flatMap(keys.byId(ctx.apiKeyId), (key) =>
        key === undefined
          ? Effect.fail(unauthorized("Invalid API key: the key is unknown, disabled or expired."))
          : Effect.succeed({
              keyId: key.id,
              keyName: key.name,
              ceiling: key.mcpAllow ?? null,
              narrowing: undefined,
              levels: levels.mcpAbove(key.id)
            })
      )

/** Why the caller may use nothing of a server (an admin exposed nothing, the key's mcp.allow does not reach it); undefined when it may. */
const serverRefusal = (record: McpServerRecord, listed: ReadonlyArray<Tool>, access: McpAccess): string | undefined => {
  const label = record.name
  if (record.allowedTools.length === 0)
    return `nothing of the MCP server ${label} is allowed yet (its allowedTools are empty; an admin allows tools with \`gateway mcp servers allow ${label}\`)`
  if (access.ceiling !== null && !patternsReachServer(access.ceiling, label))
    return `key ${access.keyName} may not use the MCP server ${label} (its mcp.allow is ${JSON.stringify(access.ceiling)})`
  const level = levelServerRefusal(access, label)
  if (level !== undefined) return level
  const first = listed[0]
  if (first !== undefined && listed.every((t) => refusal(access, label, t.name, record.allowedTools) !== undefined))
    return refusal(access, label, first.name, record.allowedTools)
  return undefined
}

/** The tools each spec offers the caller, under their function names, and the listings; or the 403 naming the rule that hides a server. */
const offeringsOf = (upstreams: McpUpstreamsShape, specs: ReadonlyArray<McpToolSpec>, access: McpAccess) => {
  const offered = new Map<string, Offered>()
  const lists: Array<Listing> = []
  for (const spec of specs) {
    const { label, record } = spec
    const listed = upstreams.offerings(label).tools
    const refused = serverRefusal(record, listed, access)
    if (refused !== undefined) return forbidden(refused, `tools[${spec.index}].server_label`)
    const tools = listed.filter((t) => refusal(access, label, t.name, record.allowedTools) === undefined && spec.allows(t))
    const health = upstreams.health(label)
    const error =
      listed.length === 0 && health?.state !== "ready"
        ? `the MCP server ${label} is not connected (${health?.state ?? "starting"}${health?.reason ? `: ${health.reason}` : ""})`
        : undefined
    for (const tool of tools) offered.set(functionNameOf(label, tool.name), { spec, tool })
    lists.push({ spec, tools, ...(error === undefined ? {} : { error }) })
  }
  return { offered, lists }
}

/**
 * The first round's `tool_choice`: `{type: "mcp", server_label, name}` becomes that tool's
 * function, `{type: "mcp", server_label}` `required`; anything else as sent. Later rounds take
 * `auto` (or `none` when it was `none`).
 */
const firstChoice = (choice: unknown, offered: ReadonlyMap<string, Offered>): unknown => {
  const o = obj(choice)
  if (o?.["type"] !== "mcp") return choice
  const label = str(o["server_label"]) ?? ""
  const name = str(o["name"])
  if (name === undefined) return "required"
  const fn = functionNameOf(label, name)
  return offered.has(fn)
    ? { type: "function", name: fn }
    : invalid(`tool_choice: ${label} offers no tool ${name} to this request`, "tool_choice")
}

/** What a request asks for, checked: who, which servers and tools, the conversation. */
interface Plan {
  readonly access: McpAccess
  readonly offered: ReadonlyMap<string, Offered>
  readonly lists: ReadonlyArray<Listing>
  /** The request's other tools (functions, custom tools), offered as sent. */
  readonly others: ReadonlyArray<unknown>
  readonly choice: unknown
  readonly maxToolCalls: number | undefined
  /** The body with previous_response_id resolved; `input`, the whole conversation as the client would have sent it. */
  readonly expanded: { readonly body: Record<string, unknown>; readonly input: ReadonlyArray<unknown> }
  readonly conversation: Conversation
}

const plan = (deps: ToolLoopDeps, ctx: HttpRequestContext, body: Record<string, unknown>, store: ResponseStoreShape) =>
  Effect.gen(function* () {
    if (body["background"] === true)
      return yield* invalid(
        "background: a request with mcp tools is answered while it runs; background is not supported with them",
        "background"
      )
    const access = yield* accessOf(deps.keys, deps.levels, ctx)
    const tools = arr(body["tools"])
    const specs = mcpToolSpecs(tools, deps.servers.byName)
    if (specs instanceof InferenceError) return yield* specs
    const offers = offeringsOf(deps.upstreams, specs, access)
    if (offers instanceof InferenceError) return yield* offers
    const others = tools.filter((t) => obj(t)?.["type"] !== "mcp")
    const clash = others.map((t) => str(obj(t)?.["name"])).find((n) => n !== undefined && offers.offered.has(n))
    if (clash !== undefined)
      return yield* invalid(`tools: the function ${clash} has the name the gateway gives an MCP tool; rename it`, "tools")
    const choice = firstChoice(body["tool_choice"], offers.offered)
    if (choice instanceof InferenceError) return yield* choice
    // previous_response_id is resolved here: the gateway made that answer.
    const expanded = yield* store.expand(body, openAiResponses, true)
    const conversation = readConversation(expanded.input, functionNameOf)
    if (conversation instanceof InferenceError) return yield* conversation
    return { access, ...offers, others, choice, maxToolCalls: num(body["max_tool_calls"]), expanded, conversation } satisfies Plan
  })

/** A call's item as it ended: the tool's result, its own failure, or why the call did not go. */
const ended = (opened: McpCallItem, outcome: Effect.Effect.Success<ReturnType<typeof callOutcome>>): McpCallItem => {
  if (outcome === "bad-arguments")
    return {
      ...opened,
      status: "failed",
      error: { type: "mcp_protocol_error", code: INVALID_PARAMS, message: `the arguments are not a JSON object: ${opened.arguments}` }
    }
  if (outcome._tag === "Left")
    return { ...opened, status: "failed", error: { type: "mcp_protocol_error", code: outcome.left.code, message: outcome.left.message } }
  const result = outcome.right
  return result.isError === true
    ? { ...opened, status: "failed", output: resultText(result), error: { type: "mcp_tool_execution_error", content: result.content } }
    : { ...opened, status: "completed", output: resultText(result) }
}

/** The call itself, checked and forwarded (checkedCall.ts); arguments that are not a JSON object do not go. */
const callOutcome = (deps: ToolLoopDeps, access: McpAccess, server: string, name: string, args: string) => {
  const parsed = obj(tryJson(args))
  if (parsed === undefined && args.trim() !== "") return Effect.succeed("bad-arguments" as const)
  const input = parsed ?? {}
  return Effect.either(deps.checkedCall(access, "tool", server, name, input, () => deps.upstreams.callTool(server, name, input)))
}

/** Runs the calls of one request, each shown on the sink as it goes, counting them. */
const makeCaller = (deps: ToolLoopDeps, access: McpAccess, sink: Sink, announce: () => void) => {
  let count = 0
  const run = (spec: McpToolSpec, name: string, args: string, approvalRequestId: string | null) =>
    Effect.gen(function* () {
      announce()
      const opened = callItem(spec.label, name, args, approvalRequestId)
      const handle = sink.callOpened(opened)
      count += 1
      const done = ended(opened, yield* callOutcome(deps, access, spec.record.name, name, args))
      sink.callDone(handle, done)
      return done
    })
  return { run, count: () => count }
}

/** The conversation for the first round: answered approval requests become their calls (run, or refused) and results. */
const firstInput = (p: Plan, run: ReturnType<typeof makeCaller>["run"]) =>
  Effect.gen(function* () {
    const input: Array<unknown> = []
    for (const entry of p.conversation.items) {
      if (entry.kind === "item") {
        input.push(entry.item)
        continue
      }
      const label = str(entry.request["server_label"]) ?? ""
      const name = str(entry.request["name"]) ?? ""
      const args = str(entry.request["arguments"]) ?? "{}"
      const callId = str(entry.request["id"]) ?? newId("mcpr_")
      const fn = functionNameOf(label, name)
      input.push({ type: "function_call", call_id: callId, name: fn, arguments: args })
      const o = p.offered.get(fn)
      let output: string
      if (!entry.approve) output = refusedText(entry.reason)
      else if (o === undefined) output = `Error: this request does not offer ${name} of the MCP server ${label}, so the call was not run.`
      else output = callOutputText(yield* run(o.spec, name, args, callId))
      input.push({ type: "function_call_output", call_id: callId, output })
    }
    return input
  })

/** Request headers a round carries on: the client's `x-gateway-*` options and its trace, never the internal credential. */
const roundHeaders = (ctx: HttpRequestContext): Record<string, string> => {
  const out: Record<string, string> = {}
  const internal = new Set([INTERNAL_HEADER, ON_BEHALF_HEADER, INTERNAL_REQUEST_ID_HEADER, "x-gateway-progress"])
  for (const [name, value] of Object.entries(ctx.headers))
    if (
      typeof value === "string" &&
      (name === "traceparent" || name === "tracestate" || (name.startsWith("x-gateway-") && !internal.has(name)))
    )
      out[name] = value
  return out
}

/**
 * One model round through the own route, on behalf of the client's key (its budget, limits and
 * usage row; request id `<request>_mcp<n>`): the answer, or the error the client gets (the
 * route's own error body as it answered it).
 */
const modelRound = (routes: OwnRoutesShape, ctx: HttpRequestContext, keyId: string, n: number, body: Record<string, unknown>) =>
  Effect.flatMap(
    Effect.tryPromise({
      try: async (signal) => {
        const res = await routes.fetch("/v1/responses", {
          onBehalfOf: keyId,
          requestId: `${ctx.requestId}_mcp${n}`,
          headers: roundHeaders(ctx),
          signal,
          body
        })
        return { status: res.status, retryAfter: res.headers.get("retry-after"), json: obj(tryJson(await res.text())) }
      },
      catch: (e) =>
        new InferenceError({
          status: 502,
          kind: "server",
          code: "mcp_round_failed",
          message: `model round ${n} of the MCP tool loop could not be made: ${e instanceof Error ? e.message : String(e)}`
        })
    }),
    ({ status, retryAfter, json }) => {
      if (status === 200 && json !== undefined && str(json["status"]) !== "failed") return Effect.succeed(json)
      const error = obj(json?.["error"])
      const s = status === 200 ? 502 : status
      return Effect.fail(
        new InferenceError({
          status: s,
          kind: errorKindForStatus(s),
          code: str(error?.["code"]) ?? null,
          message: str(error?.["message"]) ?? `model round ${n} failed with ${status}`,
          ...(retryAfter ? { headers: { "retry-after": retryAfter } } : {}),
          ...(status !== 200 && json !== undefined ? { body: json } : {})
        })
      )
    }
  )

const addUsage = (a: Partial<Usage>, b: Partial<Usage> | undefined): Partial<Usage> => {
  if (b === undefined) return a
  const out: Record<string, number> = { ...(a as Record<string, number>) }
  for (const [k, v] of Object.entries(b)) if (typeof v === "number") out[k] = (out[k] ?? 0) + v
  return out as Partial<Usage>
}

/** The calls of a round past the limit: shown as not run. */
const notRun = (sink: Sink, o: Offered, args: string, maxRounds: number) => {
  const opened = callItem(o.spec.label, o.tool.name, args)
  sink.callDone(sink.callOpened(opened), {
    ...opened,
    status: "failed",
    error: {
      type: "mcp_protocol_error",
      code: MCP_REFUSED,
      message: `not run: the gateway's limit of ${maxRounds} model rounds per request was reached (GATEWAY_MCP_MAX_TOOL_ROUNDS)`
    }
  })
}

export const makeToolLoop =
  (deps: ToolLoopDeps) => (ctx: HttpRequestContext, body: Record<string, unknown>, store: ResponseStoreShape, routes: OwnRoutesShape) =>
    Effect.gen(function* () {
      const p = yield* plan(deps, ctx, body, store)
      const responseId = newId("resp_")
      const custom = new Set(
        p.others.flatMap((t) => (obj(t)?.["type"] === "custom" && str(obj(t)?.["name"]) ? [str(obj(t)?.["name"])!] : []))
      )
      const sink = makeSink(ctx, body, responseId, custom)
      // The listings go out before the first thing that happens; a server the conversation already listed is not listed again.
      let announced = false
      const announce = () => {
        if (announced) return
        announced = true
        for (const l of p.lists) if (!p.conversation.listed.has(l.spec.label)) sink.list(l.spec.label, l.tools, l.error)
      }
      const caller = makeCaller(deps, p.access, sink, announce)
      const input = yield* firstInput(p, caller.run)
      const {
        tools: _t,
        tool_choice: _c,
        stream: _s,
        stream_options: _o,
        store: _st,
        max_tool_calls: _m,
        input: _i,
        ...rest
      } = p.expanded.body
      const tools = [...p.others, ...[...p.offered].map(([name, o]) => functionTool(name, o.tool))]
      const offeredCall = (item: Record<string, unknown>) =>
        item["type"] === "function_call" ? p.offered.get(str(item["name"]) ?? "") : undefined
      let usage: Partial<Usage> = {}
      let finish: Finish | undefined
      for (let n = 1; finish === undefined; n++) {
        const capped = p.maxToolCalls !== undefined && caller.count() >= p.maxToolCalls
        const choice = n === 1 ? (capped && p.choice !== "none" ? "none" : p.choice) : p.choice === "none" || capped ? "none" : "auto"
        const round = yield* Effect.either(
          modelRound(routes, ctx, p.access.keyId, n, {
            ...rest,
            input,
            ...(tools.length > 0 ? { tools } : {}),
            ...(choice === undefined || tools.length === 0 ? {} : { tool_choice: choice }),
            stream: false,
            store: false
          })
        )
        if (round._tag === "Left") return yield* sink.fail(round.left)
        const answer = round.right
        usage = addUsage(usage, usageFromResponses(answer["usage"]))
        const items = arr(answer["output"]).flatMap((i) => (obj(i) ? [obj(i)!] : []))
        announce()
        if (!items.some((i) => offeredCall(i) !== undefined) || str(answer["status"]) === "incomplete") {
          // The answer. Calls in a cut one are not run (their arguments may be cut too), nor shown under their function names.
          sink.model(items.filter((i) => offeredCall(i) === undefined))
          const cut = str(answer["status"]) === "incomplete"
          finish = cut ? { incomplete: str(obj(answer["incomplete_details"])?.["reason"]) ?? "max_output_tokens" } : {}
          break
        }
        if (n >= deps.maxRounds) {
          // Past the round limit: the answer as it is, its calls shown as not run.
          for (const item of items) {
            const o = offeredCall(item)
            if (o === undefined) sink.model([item])
            else notRun(sink, o, str(item["arguments"]) ?? "{}", deps.maxRounds)
          }
          finish = { incomplete: "max_tool_rounds" }
          break
        }
        input.push(...items)
        let waiting = false
        let theirs = false
        for (const item of items) {
          const o = offeredCall(item)
          if (o === undefined) {
            if (item["type"] === "function_call" || item["type"] === "custom_tool_call") theirs = true
            sink.model([item])
            continue
          }
          const args = str(item["arguments"]) ?? "{}"
          const callId = str(item["call_id"]) ?? ""
          if (o.spec.needsApproval(o.tool)) {
            sink.approval(approvalItem(o.spec.label, o.tool.name, args))
            waiting = true
          } else if (p.maxToolCalls !== undefined && caller.count() >= p.maxToolCalls)
            input.push({
              type: "function_call_output",
              call_id: callId,
              output: `Error: not run: max_tool_calls (${p.maxToolCalls}) was reached`
            })
          else {
            const done = yield* caller.run(o.spec, o.tool.name, args, null)
            input.push({ type: "function_call_output", call_id: callId, output: callOutputText(done) })
          }
        }
        // A call waits for the client's approval, or the model called the client's own tools: the client answers next.
        if (waiting || theirs) finish = {}
      }
      store.remember(responseId, p.expanded.input, sink.finish(finish, usage))
    })
