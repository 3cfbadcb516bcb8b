import * as Context from "effect/Context"

/** Where the gateway's server listens, once it is bound. */
export interface GatewayServerShape {
  readonly host: string
  readonly port: number
  readonly url: string
}

export class GatewayServer extends Context.Tag("gateway/GatewayServer")<GatewayServer, GatewayServerShape>() {}
