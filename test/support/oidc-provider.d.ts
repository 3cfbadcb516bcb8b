/** The part of `oidc-provider` (a development dependency without type declarations) the tests use. */
declare module "oidc-provider" {
  import type * as http from "node:http"

  interface Grant {
    addOIDCScope(scope: string): void
    addOIDCClaims(claims: ReadonlyArray<string>): void
    save(): Promise<string>
  }
  interface KoaContext {
    readonly oidc: {
      readonly result?: { readonly consent?: { readonly grantId?: string } }
      readonly session?: { grantIdFor(clientId: string): string | undefined; readonly accountId?: string }
      readonly client?: { readonly clientId: string }
      readonly provider: Provider
    }
  }
  interface Account {
    readonly accountId: string
    claims(): Promise<Record<string, unknown>>
  }
  interface Configuration {
    readonly [setting: string]: unknown
    readonly findAccount?: (ctx: KoaContext, sub: string) => Promise<Account | undefined>
    readonly loadExistingGrant?: (ctx: KoaContext) => Promise<Grant | undefined>
  }
  class Provider {
    constructor(issuer: string, configuration: Configuration)
    readonly Client: unknown
    readonly Grant: { new (init: { clientId: string; accountId: string }): Grant; find(id: string): Promise<Grant | undefined> }
    callback(): (req: http.IncomingMessage, res: http.ServerResponse) => void
  }
  export default Provider
}
