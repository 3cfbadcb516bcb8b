/**
 * Calls a feature makes to the gateway's own routes over loopback, with the internal credential, so
 * they are routed, limited and charged as a client's (docs/files-batches.md). Features never import the server.
 */
export { GatewayServer, type GatewayServerShape } from "./GatewayServer.js"
export { INTERNAL_HEADER, INTERNAL_REQUEST_ID_HEADER, InternalCalls, type InternalCallsShape, ON_BEHALF_HEADER } from "./InternalCalls.js"
export { bindOwnRoutes, loopbackHost, type OwnRouteRequest, OwnRoutes, type OwnRoutesShape, type TakesOwnRoutes } from "./OwnRoutes.js"
