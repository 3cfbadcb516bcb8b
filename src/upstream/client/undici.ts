/**
 * The parts of undici the gateway sends with, imported from their own modules. undici's index
 * loads all it has when it is imported (fetch and the web platform's classes, WebSocket,
 * EventSource, the cache stores, the mocks, the interceptors): evaluated at every start, for
 * nothing on the way to an upstream (docs/performance.md, "Start: what loads on first use"). fetch, which a
 * few features use (src/upstream/client/UpstreamHttp.ts's `fetch`), loads on its first call.
 * Types come from undici's index as before (`import type { Dispatcher } from "undici"`).
 */
import type * as Undici from "undici"
import api from "undici/lib/api/index.js"
import connect from "undici/lib/core/connect.js"
import errorClasses from "undici/lib/core/errors.js"
import coreUtil from "undici/lib/core/util.js"
import agent from "undici/lib/dispatcher/agent.js"
import dispatcher from "undici/lib/dispatcher/dispatcher.js"
import proxyAgent from "undici/lib/dispatcher/proxy-agent.js"
// What undici's index also does: this undici's Agent as the process's global dispatcher, which
// node's own fetch uses (the own routes' calls, MCP OAuth, the tunnels, openid-client).
import "undici/lib/global.js"

// What undici's index does: every dispatcher gets request, stream, pipeline, upgrade and connect
// (ProxyAgent opens its tunnel with `connect`).
Object.assign(dispatcher.prototype, api)

export const Agent = agent
export const ProxyAgent = proxyAgent
/** The base class of dispatchers (the type is undici's `Dispatcher`). */
export const DispatcherClass = dispatcher
export const buildConnector = connect
export const errors = errorClasses
export const util = { parseHeaders: coreUtil.parseHeaders }

/** undici's fetch, loaded on the first call. */
export const fetch = ((input, init) =>
  import("undici/lib/web/fetch/index.js").then(({ default: fetchModule }) => fetchModule.fetch(input, init))) as typeof Undici.fetch
