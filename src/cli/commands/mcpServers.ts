import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { McpServerName, McpServerTransport } from "../../domain/mcpServers.js"
import { lazy } from "../handler.js"
import { json, remoteOptions, ServerUrl } from "../options.js"
import { schemaArg, schemaOption, schemaOptions } from "../schema.js"

const impl = () => import("./mcpServers.impl.js")
const name = schemaArg("name", McpServerName).pipe(
  Args.withDescription("The server's name in the registry: lower-case letters, digits and dashes (what <server>__<tool> uses).")
)

/** `K=V`: a name and its value (the value may hold `=`); the API checks the name. */
const Pair = Schema.transformOrFail(Schema.String, Schema.Tuple(Schema.String, Schema.String), {
  strict: true,
  decode: (s, _, ast) => {
    const at = s.indexOf("=")
    return at <= 0
      ? ParseResult.fail(new ParseResult.Type(ast, s, `expected NAME=VALUE (got ${JSON.stringify(s)})`))
      : ParseResult.succeed([s.slice(0, at), s.slice(at + 1)] as const)
  },
  encode: ([k, v]) => ParseResult.succeed(`${k}=${v}`)
})

export const addOptions = {
  // `--url` is the MCP server's here: the gateway's address is `--gateway-url`.
  gatewayUrl: schemaOption("gateway-url", ServerUrl).pipe(
    Options.withDescription("The gateway's address (default http://127.0.0.1:<port>)."),
    Options.optional
  ),
  apiKey: remoteOptions.apiKey,
  name,
  transport: schemaOption("transport", McpServerTransport).pipe(
    Options.withDescription("stdio (the default with --command), http (the default with --url: streamable HTTP) or sse (HTTP+SSE)."),
    Options.optional
  ),
  command: Options.text("command").pipe(Options.withDescription("stdio: the program the gateway runs."), Options.optional),
  arg: Options.text("arg").pipe(Options.withDescription("stdio: an argument of the command; repeat, in order."), Options.repeated),
  env: schemaOptions("env", Pair).pipe(
    Options.withDescription("stdio: NAME=VALUE in the process's environment; repeat. Stored encrypted, listed masked.")
  ),
  cwd: Options.text("cwd").pipe(Options.withDescription("stdio: the directory the command runs in."), Options.optional),
  url: Options.text("url").pipe(Options.withDescription("http, sse: the server's http(s) address."), Options.optional),
  header: schemaOptions("header", Pair).pipe(
    Options.withDescription(
      "http, sse: NAME=VALUE sent with every request (Authorization=Bearer ...); repeat. Stored encrypted, listed masked."
    )
  ),
  allow: Options.text("allow").pipe(
    Options.withDescription("A tool (prompt, resource URI) to expose at once, `*` for all; repeat. Default: nothing until `allow`."),
    Options.repeated
  ),
  oauthClientId: Options.text("oauth-client-id").pipe(
    Options.withDescription(
      "http, sse: the OAuth client registered with the server's authorization server, to sign in with (default: registered dynamically)."
    ),
    Options.optional
  ),
  oauthClientSecret: Options.text("oauth-client-secret").pipe(
    Options.withDescription("http, sse: that client's secret (a confidential client). Stored encrypted, listed masked."),
    Options.optional
  ),
  oauthScope: Options.text("oauth-scope").pipe(
    Options.withDescription("http, sse: a scope to ask for when signing in (default: those the server advertises); repeat."),
    Options.repeated
  ),
  json
}
export const listOptions = { ...remoteOptions, json }
export const nameOptions = { ...remoteOptions, name, json }
export const allowOptions = {
  ...remoteOptions,
  name,
  all: Options.boolean("all").pipe(Options.withDescription("Expose everything the server offers (`*`).")),
  tool: Options.text("tool").pipe(Options.withDescription("A tool, prompt or resource URI to expose; repeat."), Options.repeated),
  add: Options.boolean("add").pipe(Options.withDescription("Add the --tool names to what is allowed instead of replacing it.")),
  json
}
export const loginOptions = {
  ...remoteOptions,
  name,
  open: Options.boolean("open").pipe(Options.withDescription("Open the sign-in page in this machine's browser too.")),
  timeout: schemaOption("timeout", Schema.NumberFromString.pipe(Schema.int(), Schema.between(5, 3600))).pipe(
    Options.withDescription("Seconds to wait for the sign-in to complete (default 300)."),
    Options.withDefault(300)
  ),
  json
}
export const callOptions = {
  ...remoteOptions,
  name,
  tool: Args.text({ name: "tool" }).pipe(Args.withDescription("The tool's name on the server (not the exposed <server>__<tool>).")),
  args: Options.text("args").pipe(Options.withDescription("The tool's arguments as a JSON object."), Options.optional),
  json
}

const add = Command.make(
  "add",
  addOptions,
  lazy(impl, (m) => m.add)
).pipe(
  Command.withDescription(
    "Register an MCP server: --command (stdio, with --arg, --env, --cwd) or --url (http, or sse with --transport sse, with --header)."
  )
)
const list = Command.make(
  "list",
  listOptions,
  lazy(impl, (m) => m.list)
).pipe(Command.withDescription("The registered MCP servers: transport, target, health, what each offers and allows."))
const remove = Command.make(
  "remove",
  nameOptions,
  lazy(impl, (m) => m.remove)
).pipe(Command.withDescription("Remove an MCP server from the registry."))
const allow = Command.make(
  "allow",
  allowOptions,
  lazy(impl, (m) => m.allow)
).pipe(Command.withDescription("Choose what of a server the gateway exposes: --all, or --tool names (replacing, or with --add adding)."))
const tools = Command.make(
  "tools",
  nameOptions,
  lazy(impl, (m) => m.tools)
).pipe(Command.withDescription("What a server offers (tools, prompts, resources) with their exposed names and whether each is allowed."))
const call = Command.make(
  "call",
  callOptions,
  lazy(impl, (m) => m.call)
).pipe(
  Command.withDescription("Call one of a server's tools through the gateway and print its result (exit 1 when the tool reports an error).")
)

const login = Command.make(
  "login",
  loginOptions,
  lazy(impl, (m) => m.login)
).pipe(
  Command.withDescription(
    "Sign in to an http or sse server that asks for OAuth: prints the address to open in a browser and waits until the sign-in completes."
  )
)
const logout = Command.make(
  "logout",
  nameOptions,
  lazy(impl, (m) => m.logout)
).pipe(Command.withDescription("Forget the gateway's OAuth tokens for a server (its connection then asks for a sign-in again)."))

/**
 * `gateway mcp servers add|list|remove|allow|tools|call|login|logout`: over `/api/mcp/servers`
 * (docs/mcp.md, "MCP servers behind the gateway").
 */
export const serversCommand = Command.make("servers").pipe(
  Command.withDescription("Upstream MCP servers the running gateway serves to its clients."),
  Command.withSubcommands([add, list, remove, allow, tools, call, login, logout])
)
