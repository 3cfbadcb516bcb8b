/**
 * A real OpenID provider on 127.0.0.1 for single sign-on tests: `oidc-provider` (a certified
 * implementation) with one confidential client, test accounts whose claims carry groups, PKCE
 * required, the device authorization grant on, and its development sign-in pages, which
 * `ProviderBrowser` drives with plain HTTP (a cookie jar, redirects followed, forms submitted).
 * `tamperIdToken` lets a test change the ID token of the next token responses (a claim changed
 * without signing again, or signed again with the provider's own key: `sign`).
 */
import { exportJWK, generateKeyPair, SignJWT } from "jose"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import Provider from "oidc-provider"

export interface TestAccount {
  readonly email: string
  readonly name: string
  readonly groups: ReadonlyArray<string>
}

export interface StartedOidcProvider {
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret: string
  /** The next token responses' ID token, changed by `f` (undefined: as issued). */
  tamperIdToken:
    | ((idToken: string, tools: { readonly sign: (claims: Record<string, unknown>) => Promise<string> }) => Promise<string>)
    | undefined
  /** Redirect URIs the client accepts (set before a sign-in). */
  readonly redirectUris: Array<string>
  readonly close: () => Promise<void>
}

const defaultAccounts: Record<string, TestAccount> = {
  alice: { email: "alice@example.test", name: "Alice Example", groups: ["engineering"] },
  bob: { email: "bob@example.test", name: "Bob Example", groups: ["gateway-admins"] },
  carol: { email: "carol@example.test", name: "Carol Example", groups: ["sales"] },
  // An account whose provider lets it claim the first admin's placeholder address.
  mallory: { email: "admin@localhost", name: "Mallory", groups: ["gateway-admins"] }
}

export const startOidcProvider = async (
  options: {
    readonly accounts?: Record<string, TestAccount>
    readonly redirectUris?: ReadonlyArray<string>
    readonly clientId?: string
    /** Whether the device authorization grant is offered (default true). */
    readonly deviceFlow?: boolean
  } = {}
): Promise<StartedOidcProvider> => {
  const accounts = options.accounts ?? defaultAccounts
  const { privateKey } = await generateKeyPair("RS256", { extractable: true })
  const jwk = { ...(await exportJWK(privateKey)), kid: "test-key", alg: "RS256", use: "sig" }
  const clientId = options.clientId ?? "gateway"
  const clientSecret = "test-client-secret-0123456789abcdef"
  const redirectUris: Array<string> = [...(options.redirectUris ?? [])]
  const server = http.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const client = {
    client_id: clientId,
    client_secret: clientSecret,
    // Registered at construction; `redirectUriAllowed` below reads the live list.
    redirect_uris: ["http://127.0.0.1/registered-later"],
    grant_types: [
      "authorization_code",
      "refresh_token",
      ...(options.deviceFlow === false ? [] : ["urn:ietf:params:oauth:grant-type:device_code"])
    ],
    response_types: ["code"],
    token_endpoint_auth_method: "client_secret_basic"
  }
  const provider = new Provider(issuer, {
    clients: [client],
    jwks: { keys: [jwk as never] },
    features: { devInteractions: { enabled: true }, deviceFlow: { enabled: options.deviceFlow ?? true } },
    pkce: { required: () => true },
    ttl: { IdToken: 3600, AccessToken: 3600, DeviceCode: 600, Interaction: 600, Session: 3600, Grant: 3600, AuthorizationCode: 60 },
    scopes: ["openid", "offline_access", "profile", "email", "groups"],
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name"], groups: ["groups"] },
    // The claims asked for by scope go in the ID token too (a provider's common setting for groups).
    conformIdTokenClaims: false,
    findAccount: async (_ctx, sub) => {
      const a = accounts[sub]
      if (a === undefined) return undefined
      return {
        accountId: sub,
        claims: async () => ({ sub, email: a.email, email_verified: true, name: a.name, groups: [...a.groups] })
      }
    },
    // Consent is taken as given for this one client (its own sign-in pages still ask the login).
    loadExistingGrant: async (ctx) => {
      const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session!.grantIdFor(ctx.oidc.client!.clientId)
      if (grantId) return ctx.oidc.provider.Grant.find(grantId)
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client!.clientId, accountId: ctx.oidc.session!.accountId! })
      grant.addOIDCScope("openid offline_access profile email groups")
      grant.addOIDCClaims(["sub", "email", "email_verified", "name", "groups"])
      await grant.save()
      return grant
    }
  })
  // The client's redirect URIs are this array at each request (tests add theirs once their gateway listens).
  const proto = (provider.Client as unknown as { prototype: { redirectUriAllowed: (uri: string) => boolean } }).prototype
  proto.redirectUriAllowed = (uri: string) => redirectUris.includes(uri)
  const handler = provider.callback()
  const started: StartedOidcProvider = {
    issuer,
    clientId,
    clientSecret,
    tamperIdToken: undefined,
    redirectUris,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
  const sign = (claims: Record<string, unknown>) =>
    new SignJWT(claims).setProtectedHeader({ alg: "RS256", kid: "test-key" }).sign(privateKey)
  server.on("request", (req, res) => {
    const tamper = started.tamperIdToken
    if (tamper !== undefined && req.method === "POST" && req.url?.startsWith("/token")) {
      // The token response's ID token changed before it leaves (its length too).
      const end = res.end.bind(res) as (chunk?: unknown) => http.ServerResponse
      ;(res as { end: unknown }).end = (chunk?: unknown) => {
        const text = Buffer.isBuffer(chunk) ? chunk.toString("utf8") : typeof chunk === "string" ? chunk : ""
        let body: { id_token?: string } | undefined
        try {
          body = JSON.parse(text) as { id_token?: string }
        } catch {
          body = undefined
        }
        if (body?.id_token === undefined) return end(chunk)
        void tamper(body.id_token, { sign }).then((idToken) => {
          const out = JSON.stringify({ ...body, id_token: idToken })
          res.setHeader("content-length", Buffer.byteLength(out))
          end(out)
        })
        return res
      }
    }
    handler(req, res)
  })
  return started
}

/** The claims of a JWT (not verified: the test's own look at what the provider issued). */
export const claimsOf = (jwt: string): Record<string, unknown> =>
  JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString("utf8")) as Record<string, unknown>

/** A JWT with one claim changed and the signature left as it was. */
export const withClaimChanged = (jwt: string, claim: string, value: unknown): string => {
  const [h, , s] = jwt.split(".")
  const claims = { ...claimsOf(jwt), [claim]: value }
  return `${h}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.${s}`
}

interface Form {
  readonly action: string
  readonly fields: Record<string, string>
}

/** The forms of a page: their action and hidden (or pre-filled) inputs. */
const formsOf = (html: string, base: string): Array<Form & { readonly id: string | undefined }> =>
  [...html.matchAll(/<form([^>]*)>([\s\S]*?)<\/form>/g)].map((m) => {
    const attrs = m[1]!
    const action = /action="([^"]*)"/.exec(attrs)?.[1] ?? base
    const id = /id="([^"]*)"/.exec(attrs)?.[1]
    const fields: Record<string, string> = {}
    for (const input of m[2]!.matchAll(/<input([^>]*)>/g)) {
      const name = /name="([^"]*)"/.exec(input[1]!)?.[1]
      const value = /value="([^"]*)"/.exec(input[1]!)?.[1]
      if (name !== undefined) fields[name] = (value ?? "").replace(/&amp;/g, "&").replace(/&quot;/g, '"')
    }
    return { action: new URL(action.replace(/&amp;/g, "&"), base).toString(), fields, id }
  })

/**
 * A user's browser at the provider, in plain HTTP: cookies kept per host, redirects followed until
 * one leaves for `stopAt` (the gateway's callback, which the test then calls itself).
 */
export class ProviderBrowser {
  private readonly cookies = new Map<string, Map<string, string>>()

  private cookieHeader(url: string): string | undefined {
    const jar = this.cookies.get(new URL(url).host)
    return jar && jar.size > 0 ? [...jar].map(([k, v]) => `${k}=${v}`).join("; ") : undefined
  }

  private keep(url: string, res: Response) {
    const host = new URL(url).host
    const jar = this.cookies.get(host) ?? new Map<string, string>()
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(";")
      const i = pair!.indexOf("=")
      jar.set(pair!.slice(0, i).trim(), pair!.slice(i + 1).trim())
    }
    this.cookies.set(host, jar)
  }

  /** One request, its cookies kept, no redirect followed. */
  async request(url: string, init: { method?: string; form?: Record<string, string> } = {}): Promise<Response> {
    const headers: Record<string, string> = {}
    const cookie = this.cookieHeader(url)
    if (cookie) headers.cookie = cookie
    if (init.form) headers["content-type"] = "application/x-www-form-urlencoded"
    const res = await fetch(url, {
      method: init.method ?? (init.form ? "POST" : "GET"),
      headers,
      redirect: "manual",
      ...(init.form ? { body: new URLSearchParams(init.form).toString() } : {})
    })
    this.keep(url, res)
    return res
  }

  /**
   * Goes to `url` and on through redirects and the sign-in pages (login as `login`, then any
   * consent) until a redirect points at `stopAt`: that address, not requested.
   */
  async signIn(url: string, login: string, stopAt: string): Promise<string> {
    let next: { url: string; form?: Record<string, string> } = { url }
    for (let step = 0; step < 20; step++) {
      if (next.url.startsWith(stopAt)) return next.url
      const res = await this.request(next.url, next.form ? { form: next.form } : {})
      const location = res.headers.get("location")
      if (res.status >= 300 && res.status < 400 && location) {
        next = { url: new URL(location, next.url).toString() }
        continue
      }
      const html = await res.text()
      const form = formsOf(html, next.url)[0]
      if (res.status !== 200 || form === undefined)
        throw new Error(`provider page ${next.url} answered ${res.status}: ${html.slice(0, 300)}`)
      next =
        form.fields.prompt === "login"
          ? { url: form.action, form: { ...form.fields, login, password: "any" } }
          : { url: form.action, form: form.fields }
    }
    throw new Error(`sign-in at the provider did not reach ${stopAt}`)
  }

  /** Approves a device code at the provider's verification page, signed in as `login`. */
  async approveDevice(verificationUri: string, userCode: string, login: string): Promise<void> {
    const page = await this.request(verificationUri)
    const input = formsOf(await page.text(), verificationUri).find((f) => f.id === "op.deviceInputForm")
    if (input === undefined) throw new Error("the provider's device page has no code form")
    let next: { url: string; form?: Record<string, string> } = { url: input.action, form: { ...input.fields, user_code: userCode } }
    for (let step = 0; step < 20; step++) {
      const res = await this.request(next.url, next.form ? { form: next.form } : {})
      const location = res.headers.get("location")
      if (res.status >= 300 && res.status < 400 && location) {
        next = { url: new URL(location, next.url).toString() }
        continue
      }
      const html = await res.text()
      const forms = formsOf(html, next.url)
      const confirm = forms.find((f) => f.id === "op.deviceConfirmForm")
      if (confirm !== undefined) {
        next = { url: confirm.action, form: confirm.fields }
        continue
      }
      const form = forms[0]
      if (form === undefined) {
        if (res.status === 200 && /success|signed in|continue on your device|close this window/i.test(html)) return
        throw new Error(`device approval ended at ${next.url} (${res.status}): ${html.slice(0, 300)}`)
      }
      next =
        form.fields.prompt === "login"
          ? { url: form.action, form: { ...form.fields, login, password: "any" } }
          : { url: form.action, form: form.fields }
    }
    throw new Error("device approval did not finish")
  }
}
