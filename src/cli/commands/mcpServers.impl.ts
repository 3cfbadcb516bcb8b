import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { spawn } from "node:child_process"
import { BadRequest } from "../../domain/errors.js"
import { CreateMcpServer, type McpServerView } from "../../domain/mcpServers.js"
import { connectionProblem } from "../../services/mcp/McpServers.js"
import type { Parsed } from "../handler.js"
import { exitWith, orDash, printJson, table } from "../output.js"
import { explain, remote, withHttp } from "../remote.js"
import { decodeInput, UsageError } from "../schema.js"
import type { addOptions, allowOptions, callOptions, listOptions, loginOptions, nameOptions } from "./mcpServers.js"

/** Payload fields to the flags that set them, for messages. */
const FLAGS: Readonly<Record<string, string>> = {
  transport: "--transport",
  command: "--command",
  args: "--arg",
  env: "--env",
  cwd: "--cwd",
  url: "--url",
  headers: "--header",
  allowedTools: "--allow",
  oauth: "--oauth-client-id"
}

/** What a server runs or is reached at. */
const target = (s: McpServerView) => (s.transport === "stdio" ? [s.command ?? "", ...s.args].join(" ") : (s.url ?? ""))

const health = (s: McpServerView) => `${s.health.state}${s.health.reason ? ` (${s.health.reason})` : ""}`

export const add = (opts: Parsed<typeof addOptions>) =>
  Effect.gen(function* () {
    const transport = Option.getOrUndefined(opts.transport) ?? (Option.isSome(opts.url) ? "http" : "stdio")
    const payload = yield* decodeInput(
      CreateMcpServer,
      FLAGS
    )({
      name: opts.name,
      transport,
      command: Option.getOrUndefined(opts.command),
      args: opts.arg.length > 0 ? opts.arg : undefined,
      env: opts.env.length > 0 ? Object.fromEntries(opts.env) : undefined,
      cwd: Option.getOrUndefined(opts.cwd),
      url: Option.getOrUndefined(opts.url),
      headers: opts.header.length > 0 ? Object.fromEntries(opts.header) : undefined,
      allowedTools: opts.allow.length > 0 ? opts.allow : undefined,
      oauth:
        Option.isSome(opts.oauthClientId) || Option.isSome(opts.oauthClientSecret) || opts.oauthScope.length > 0
          ? {
              clientId: Option.getOrUndefined(opts.oauthClientId),
              clientSecret: Option.getOrUndefined(opts.oauthClientSecret),
              scopes: opts.oauthScope.length > 0 ? opts.oauthScope : undefined
            }
          : undefined
    })
    // The registry's rules, checked before any request and said in the flags' names.
    const problem = connectionProblem({
      transport: payload.transport,
      command: payload.command ?? null,
      args: payload.args ?? [],
      env: payload.env ?? {},
      cwd: payload.cwd ?? null,
      url: payload.url ?? null,
      headers: payload.headers ?? {},
      oauth:
        payload.oauth === undefined
          ? null
          : {
              clientId: payload.oauth.clientId ?? null,
              clientSecret: payload.oauth.clientSecret ?? null,
              scopes: payload.oauth.scopes ?? []
            }
    })
    if (problem !== undefined) {
      const [field, ...rest] = problem.split(": ")
      const flag = field === "oauth.clientSecret" ? "--oauth-client-secret" : FLAGS[field!.split(".")[0]!]
      return yield* new UsageError({ message: flag ? `${flag}: ${rest.join(": ")}` : problem })
    }
    const { url, client } = yield* remote({ url: opts.gatewayUrl, apiKey: opts.apiKey })
    const created = yield* client.mcpServers.create({ payload }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(created)
    yield* Console.log(`added ${created.name} (${created.transport}: ${target(created)})`)
    if (created.allowedTools.length === 0)
      yield* Console.error(`nothing of it is exposed yet: gateway mcp servers tools ${created.name}, then gateway mcp servers allow`)
  }).pipe(withHttp)

export const list = (opts: Parsed<typeof listOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const { servers } = yield* client.mcpServers.list().pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson({ servers })
    if (servers.length === 0)
      return yield* Console.log("no MCP servers are registered (gateway mcp servers add <name> --command ... | --url ...)")
    yield* Console.log(
      table(
        ["NAME", "TRANSPORT", "TARGET", "ENABLED", "HEALTH", "TOOLS", "RESOURCES", "PROMPTS", "ALLOWED"],
        servers.map((s) => [
          s.name,
          s.transport,
          target(s),
          s.enabled ? "yes" : "no",
          health(s),
          String(s.tools),
          String(s.resources),
          String(s.prompts),
          orDash(s.allowedTools.join(","))
        ])
      )
    )
  }).pipe(withHttp)

export const remove = (opts: Parsed<typeof nameOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const { removed } = yield* client.mcpServers.remove({ path: { name: opts.name } }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson({ removed })
    yield* Console.log(`removed ${removed.name}`)
  }).pipe(withHttp)

export const allow = (opts: Parsed<typeof allowOptions>) =>
  Effect.gen(function* () {
    if (opts.all && opts.tool.length > 0) return yield* new UsageError({ message: "--all: give --all or --tool, not both" })
    if (!opts.all && opts.tool.length === 0) return yield* new UsageError({ message: "--tool: give the names to allow (repeat), or --all" })
    if (opts.all && opts.add) return yield* new UsageError({ message: "--add: goes with --tool" })
    const { url, client } = yield* remote(opts)
    const payload = opts.all ? { all: true } : { tools: opts.tool, ...(opts.add ? { add: true } : {}) }
    const updated = yield* client.mcpServers.allow({ path: { name: opts.name }, payload }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(updated)
    yield* Console.log(`${updated.name}: allowed ${updated.allowedTools.length === 0 ? "nothing" : updated.allowedTools.join(", ")}`)
  }).pipe(withHttp)

export const tools = (opts: Parsed<typeof nameOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const { offerings } = yield* client.mcpServers.tools({ path: { name: opts.name } }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson({ offerings })
    if (offerings.length === 0) {
      const server = yield* client.mcpServers.get({ path: { name: opts.name } }).pipe(Effect.mapError(explain(url)))
      return yield* Console.log(`${opts.name} offers nothing listed yet (health: ${health(server)})`)
    }
    yield* Console.log(
      table(
        ["KIND", "NAME", "EXPOSED AS", "ALLOWED", "DESCRIPTION"],
        offerings.map((o) => [
          o.kind,
          o.name,
          o.exposedName,
          o.allowed ? "yes" : "no",
          orDash((o.description ?? "").split("\n")[0]!.slice(0, 80))
        ])
      )
    )
  }).pipe(withHttp)

/** `--args`: a JSON object. */
const argumentsOf = (text: Option.Option<string>) =>
  Effect.suspend(() => {
    if (Option.isNone(text)) return Effect.succeed(undefined)
    let value: unknown
    try {
      value = JSON.parse(text.value)
    } catch (e) {
      return Effect.fail(new UsageError({ message: `--args: not JSON (${(e as Error).message})` }))
    }
    return value !== null && typeof value === "object" && !Array.isArray(value)
      ? Effect.succeed(value as Record<string, unknown>)
      : Effect.fail(new UsageError({ message: "--args: must be a JSON object of the tool's arguments" }))
  })

export const call = (opts: Parsed<typeof callOptions>) =>
  Effect.gen(function* () {
    const args = yield* argumentsOf(opts.args)
    const { url, client } = yield* remote(opts)
    const result = yield* client.mcpServers
      .call({ path: { name: opts.name }, payload: { tool: opts.tool, ...(args === undefined ? {} : { arguments: args }) } })
      .pipe(Effect.mapError(explain(url)))
    if (opts.json) yield* printJson(result)
    else {
      for (const item of result.content) {
        const part = item as { type?: string; text?: string }
        yield* Console.log(part.type === "text" && typeof part.text === "string" ? part.text : JSON.stringify(item))
      }
      if (result.content.length === 0 && result.structuredContent !== undefined) yield* printJson(result.structuredContent)
    }
    if (result.isError === true) yield* exitWith(1)
  }).pipe(withHttp)

/** Opens `url` in this machine's browser, if it has one (failures are the user's to see: the address is printed). */
const openBrowser = (url: string) =>
  Effect.sync(() => {
    const [cmd, args] =
      process.platform === "darwin"
        ? ["open", [url]]
        : process.platform === "win32"
          ? ["cmd", ["/c", "start", "", url]]
          : ["xdg-open", [url]]
    try {
      const child = spawn(cmd as string, args as Array<string>, { detached: true, stdio: "ignore" })
      child.on("error", () => undefined)
      child.unref()
    } catch {
      // no browser here: the printed address is enough
    }
  })

/** Whether a connection made again after a sign-in has settled (ready, or why not). */
const settled = (v: McpServerView) => v.health.state !== "starting" && v.health.state !== "restarting"

export const login = (opts: Parsed<typeof loginOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const path = { name: opts.name }
    const before = yield* client.mcpServers.get({ path }).pipe(Effect.mapError(explain(url)))
    const started = yield* client.mcpServers.oauthStart({ path }).pipe(Effect.mapError(explain(url)))
    // With --json, stdout is the result alone: the address goes to stderr.
    const say = opts.json ? Console.error : Console.log
    yield* say(`To sign in to ${opts.name}, open this address in a browser (waiting up to ${opts.timeout} s):`)
    yield* say(started.authorizationUrl)
    if (opts.open) yield* openBrowser(started.authorizationUrl)
    const get = client.mcpServers.get({ path }).pipe(Effect.mapError(explain(url)))
    yield* get.pipe(
      Effect.repeat(
        Schedule.recurUntil(
          (v: McpServerView) => v.oauth?.signedIn === true && v.oauth.signedInAt !== null && v.oauth.signedInAt !== before.oauth?.signedInAt
        ).pipe(Schedule.addDelay(() => Duration.seconds(1)))
      ),
      Effect.timeoutFail({
        duration: Duration.seconds(opts.timeout),
        onTimeout: () =>
          new BadRequest({ message: `the sign-in to ${opts.name} did not complete within ${opts.timeout} s: run the command again` })
      })
    )
    // The connection is made again with the token: its outcome, if it comes within a few seconds.
    const view = yield* get.pipe(
      Effect.repeat(Schedule.recurUntil(settled).pipe(Schedule.addDelay(() => Duration.millis(250)))),
      Effect.timeout(Duration.seconds(15)),
      Effect.catchTag("TimeoutException", () => get)
    )
    if (opts.json) return yield* printJson(view)
    const until = view.oauth?.expiresAt ? ` (token refreshed ahead of ${view.oauth.expiresAt})` : ""
    yield* Console.log(`signed in to ${opts.name}${until}; health: ${health(view)}`)
  }).pipe(withHttp)

export const logout = (opts: Parsed<typeof nameOptions>) =>
  Effect.gen(function* () {
    const { url, client } = yield* remote(opts)
    const view = yield* client.mcpServers.oauthLogout({ path: { name: opts.name } }).pipe(Effect.mapError(explain(url)))
    if (opts.json) return yield* printJson(view)
    yield* Console.log(`signed out of ${opts.name}`)
  }).pipe(withHttp)
