/**
 * undici's own modules that src/upstream/client/undici.ts imports, typed from undici's index (the
 * package types its index alone). Each module's `module.exports` is its default export.
 */
declare module "undici/lib/dispatcher/agent.js" {
  import type { Agent } from "undici"
  const agent: typeof Agent
  export default agent
}
declare module "undici/lib/dispatcher/proxy-agent.js" {
  import type { ProxyAgent } from "undici"
  const proxyAgent: typeof ProxyAgent
  export default proxyAgent
}
declare module "undici/lib/dispatcher/dispatcher.js" {
  import type { Dispatcher } from "undici"
  const dispatcher: typeof Dispatcher
  export default dispatcher
}
declare module "undici/lib/core/connect.js" {
  import type { buildConnector } from "undici"
  const connect: typeof buildConnector
  export default connect
}
declare module "undici/lib/core/errors.js" {
  import type { errors } from "undici"
  const errorClasses: typeof errors
  export default errorClasses
}
declare module "undici/lib/core/util.js" {
  import type { util } from "undici"
  const coreUtil: typeof util
  export default coreUtil
}
declare module "undici/lib/api/index.js" {
  /** The request, stream, pipeline, upgrade and connect calls undici's index puts on `Dispatcher.prototype`. */
  const api: Record<"request" | "stream" | "pipeline" | "upgrade" | "connect", (...args: Array<never>) => unknown>
  export default api
}
declare module "undici/lib/web/fetch/index.js" {
  import type { fetch } from "undici"
  const fetchModule: { readonly fetch: typeof fetch }
  export default fetchModule
}
