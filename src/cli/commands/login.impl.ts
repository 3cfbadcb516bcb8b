import * as Console from "effect/Console"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import { spawn } from "node:child_process"
import * as crypto from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { BadRequest } from "../../domain/errors.js"
import type { OidcDevicePollResult, OidcDeviceStarted, SsoSession } from "../../domain/sso.js"
import type { Parsed } from "../handler.js"
import { printJson } from "../output.js"
import { serverUrl } from "../remote.js"
import { forgetSession, loadSession, saveSession, sessionHeaders } from "../session.js"
import type { loginOptions, logoutOptions } from "./login.js"

/** One JSON call to the gateway: its answer, or a BadRequest carrying the gateway's message. */
const callJson = <A>(url: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.tryPromise({
    try: async () => {
      const res = await fetch(url, {
        method: init.method ?? (init.body === undefined ? "GET" : "POST"),
        headers: {
          ...(init.body === undefined ? {} : { "content-type": "application/json" }),
          accept: "application/json",
          ...init.headers
        },
        ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
      })
      const text = await res.text()
      let body: unknown
      try {
        body = text ? JSON.parse(text) : undefined
      } catch {
        body = undefined
      }
      return { status: res.status, body }
    },
    catch: () => new BadRequest({ message: `no gateway answers at ${new URL(url).origin} (is it running?)` })
  }).pipe(
    Effect.flatMap(({ status, body }) =>
      status >= 200 && status < 300
        ? Effect.succeed(body as A)
        : Effect.fail(new BadRequest({ message: (body as { message?: string } | undefined)?.message ?? `the gateway answered ${status}` }))
    )
  )

/** Opens `url` in this machine's browser, if it has one (the address is printed as well). */
const openBrowser = (url: string) =>
  Effect.sync(() => {
    if (process.env.GATEWAY_NO_BROWSER === "1") return
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

/** The provider to sign in with: the one asked for, else the only one. */
const chooseProvider = (url: string, asked: Option.Option<string>) =>
  Effect.gen(function* () {
    const { providers } = yield* callJson<{ providers: ReadonlyArray<{ id: string; name: string }> }>(`${url}/api/auth/oidc/providers`)
    const listing = providers.map((p) => `${p.id} (${p.name})`).join(", ")
    if (providers.length === 0)
      return yield* new BadRequest({ message: `${url} has no single sign-on provider configured: sign in with an admin API key instead` })
    if (Option.isSome(asked)) {
      const p = providers.find((x) => x.id === asked.value)
      if (p === undefined) return yield* new BadRequest({ message: `no provider '${asked.value}' at ${url}: ${listing}` })
      return p
    }
    if (providers.length > 1)
      return yield* new BadRequest({ message: `${url} has several providers: choose one with --provider (${listing})` })
    return providers[0]!
  })

/** The device grant: the code shown, the gateway polled at the provider's interval until the user approved it. */
const deviceSignIn = (url: string, id: string, started: OidcDeviceStarted) =>
  Effect.gen(function* () {
    yield* Console.error(
      `To sign in, open ${started.verificationUriComplete ?? started.verificationUri} on any device${
        started.verificationUriComplete ? "" : ` and enter the code ${started.userCode}`
      } (code ${started.userCode}, valid until ${started.expiresAt}). Waiting...`
    )
    const poll = callJson<OidcDevicePollResult>(`${url}/api/auth/oidc/${encodeURIComponent(id)}/device/poll`, {
      body: { handle: started.handle }
    })
    const done = yield* poll.pipe(
      Effect.repeat(
        Schedule.recurWhile<OidcDevicePollResult>((r) => r.status !== "complete").pipe(
          Schedule.addDelay(() => Duration.seconds(Math.max(1, started.interval)))
        )
      ),
      Effect.timeoutFail({
        duration: Duration.millis(Math.max(1000, Date.parse(started.expiresAt) - Date.now())),
        onTimeout: () => new BadRequest({ message: "the code expired before the sign-in was approved: run `gateway login` again" })
      })
    )
    if (done.session === undefined) return yield* new BadRequest({ message: "the gateway ended the sign-in without a session" })
    return done.session
  })

/** The browser on this machine: the gateway's login, then its hand-off to a loopback listener of this process. */
const browserSignIn = (url: string, id: string) =>
  Effect.scoped(
    Effect.gen(function* () {
      const verifier = crypto.randomBytes(32).toString("base64url")
      const challenge = crypto.createHash("sha256").update(verifier).digest("base64url")
      const got = yield* Deferred.make<string, BadRequest>()
      const server = http.createServer((req, res) => {
        const u = new URL(req.url ?? "/", "http://127.0.0.1")
        const code = u.searchParams.get("code")
        if (u.pathname !== "/callback" || !code) {
          res.writeHead(404).end()
          return
        }
        res
          .writeHead(200, { "content-type": "text/html; charset=utf-8" })
          .end("<!doctype html><p>Signed in: you may close this window and return to the terminal.</p>")
        Deferred.unsafeDone(got, Effect.succeed(code))
      })
      yield* Effect.acquireRelease(
        Effect.async<void>((resume) => void server.listen(0, "127.0.0.1", () => resume(Effect.void))),
        () => Effect.sync(() => server.close())
      )
      const redirect = `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`
      const login = `${url}/api/auth/oidc/${encodeURIComponent(id)}/login?${new URLSearchParams({ cliRedirect: redirect, cliChallenge: challenge })}`
      yield* Console.error(`To sign in, open ${login} in a browser on this machine. Waiting...`)
      yield* openBrowser(login)
      const code = yield* Deferred.await(got).pipe(
        Effect.timeoutFail({
          duration: Duration.minutes(10),
          onTimeout: () => new BadRequest({ message: "no sign-in came back within 10 minutes" })
        })
      )
      return yield* callJson<SsoSession>(`${url}/api/auth/oidc/cli/token`, { body: { code, verifier } })
    })
  )

export const login = (opts: Parsed<typeof loginOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const provider = yield* chooseProvider(url, opts.provider)
    const device = opts.browser
      ? undefined
      : yield* callJson<OidcDeviceStarted>(`${url}/api/auth/oidc/${encodeURIComponent(provider.id)}/device`, { method: "POST" }).pipe(
          // A provider without the device grant: the browser instead.
          Effect.catchAll((e) => (/device authorization grant/.test(e.message) ? Effect.succeed(undefined) : Effect.fail(e)))
        )
    const session = device === undefined ? yield* browserSignIn(url, provider.id) : yield* deviceSignIn(url, provider.id, device)
    const file = saveSession(url, { ...session, provider: provider.id })
    if (opts.json) return yield* printJson({ url, provider: provider.id, user: session.user, expiresAt: session.expiresAt, file })
    yield* Console.log(
      `signed in to ${url} as ${session.user.email} (${session.user.role}) through ${provider.name}; session kept in ${file} until ${session.expiresAt}`
    )
  })

export const logout = (opts: Parsed<typeof logoutOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const kept = loadSession(url)
    // The gateway ends the session; a gateway that cannot be reached still has it forgotten here.
    const ended =
      kept === undefined
        ? false
        : yield* Effect.as(callJson(`${url}/api/auth/logout`, { method: "POST", headers: sessionHeaders(kept) }), true).pipe(
            Effect.orElseSucceed(() => false)
          )
    const forgotten = forgetSession(url)
    if (opts.json) return yield* printJson({ url, signedOut: forgotten, endedAtGateway: ended })
    yield* Console.log(
      forgotten ? `signed out of ${url}${ended ? "" : " (forgotten here; the gateway could not be reached)"}` : `no session kept for ${url}`
    )
  })
