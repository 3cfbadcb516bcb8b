/**
 * Calls a feature makes to the gateway's own routes (a batch line, an eval case, the summarizer's
 * chat completion; later the playground and the inspector's replay): an HTTP request on loopback
 * to the server this process runs, carrying the process's internal credential, so routing,
 * resilience, guardrails, usage rows and cost apply to it exactly as to a client's request. The
 * caller names whose request it is (`onBehalfOf`: an API key id, charged and limited as that key).
 *
 * The server publishes where it listens (`GatewayServer`, provided by src/server/Server.ts);
 * features depend on this module, never on the server itself.
 */
export { GatewayServer, type GatewayServerShape } from "./GatewayServer.js"
export { INTERNAL_HEADER, INTERNAL_REQUEST_ID_HEADER, InternalCalls, type InternalCallsShape, ON_BEHALF_HEADER } from "./InternalCalls.js"
export { bindOwnRoutes, loopbackHost, type OwnRouteRequest, OwnRoutes, type OwnRoutesShape, type TakesOwnRoutes } from "./OwnRoutes.js"
