/**
 * The token tunnel's life: the vendor's Node SDK, or its agent binary when `TOKEN_TUNNEL_BIN` is set (docs/tunnels.md#token-tunnel).
 * The authtoken never goes in argv; the edge marks what it forwards `X-Gateway-Tunnel: token`. Tests replace this layer.
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { TOKEN_TUNNEL_MARKER } from "../../platform/config/AppConfig.js"
import { killGroup, lastLines, spawnHelper } from "./process.js"
import { HelperError, type Life } from "./supervisor.js"

export interface TokenTunnelConnectorShape {
  /** One life of the token tunnel to `target` with `authtoken`: runs until it ends (always a HelperError). */
  readonly run: (life: Life, target: string, authtoken: string) => Effect.Effect<never, HelperError, import("effect/Scope").Scope>
  /** What runs it, for the status: `sdk` or the agent binary's path. */
  readonly via: string
}

export class TokenTunnelConnector extends Context.Tag("gateway/TokenTunnelConnector")<TokenTunnelConnector, TokenTunnelConnectorShape>() {
  /** The live connector: the agent binary when `TOKEN_TUNNEL_BIN` is set, else the SDK (dialing `TOKEN_TUNNEL_SERVER_ADDR` when set). */
  static readonly layer = Layer.effect(
    TokenTunnelConnector,
    Effect.gen(function* () {
      const opt = (name: string) => Config.string(name).pipe(Config.option, Config.map(Option.getOrUndefined), Effect.orDie)
      const bin = yield* opt("TOKEN_TUNNEL_BIN")
      // The vendor's edge address (its `server_addr`): a dedicated ingress, or another endpoint for the SDK to dial.
      const serverAddr = yield* opt("TOKEN_TUNNEL_SERVER_ADDR")
      return bin ? { run: agentLife(bin), via: bin } : { run: sdkLife(serverAddr), via: "sdk" }
    })
  )
}

const [MARKER_NAME, MARKER_VALUE] = TOKEN_TUNNEL_MARKER.split(": ") as [string, string]

/** An error of the vendor's that no retry can fix without a new authtoken (refused, missing, or the account needs one). */
const AUTH_REFUSED = /ERR_NGROK_(105|106|107|4018)\b|authentication failed|authtoken/i

const refused = (message: string) =>
  new HelperError(
    `the authtoken was refused: ${message}; set a valid one (POST /api/tunnels/token with authToken, or TOKEN_TUNNEL_AUTHTOKEN)`,
    true,
    "needs_auth"
  )

/** The agent binary: `http <target>` with JSON logs on stdout; "started tunnel" (with its url) once the edge serves it. */
export const agentLife = (bin: string) => (life: Life, target: string, authtoken: string) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      spawnHelper(
        bin,
        [
          "http",
          target,
          "--log",
          "stdout",
          "--log-format",
          "json",
          "--inspect=false",
          "--request-header-add",
          `${MARKER_NAME}: ${MARKER_VALUE}`
        ],
        {
          env: { ...process.env, NGROK_AUTHTOKEN: authtoken }
        }
      )
    ),
    (spawned) => Effect.promise(() => killGroup(spawned.proc))
  ).pipe(
    Effect.tap((spawned) => Effect.sync(() => life.spawned({ pid: spawned.proc.pid, command: spawned.command }))),
    Effect.flatMap((spawned) =>
      Effect.async<never, HelperError>((resume) => {
        let tail = ""
        let authError: string | undefined
        spawned.lines((line) => {
          tail = `${tail}${line}\n`.slice(-4000)
          let entry: { msg?: unknown; url?: unknown; err?: unknown; lvl?: unknown }
          try {
            entry = JSON.parse(line) as typeof entry
          } catch {
            return
          }
          if (entry.msg === "started tunnel" && typeof entry.url === "string") life.registered(entry.url)
          const err = typeof entry.err === "string" ? entry.err : undefined
          if (err !== undefined && AUTH_REFUSED.test(err) && authError === undefined) {
            authError =
              err
                .split("\n")
                .find((l) => l.trim() !== "")
                ?.trim() ?? err
            // The agent keeps retrying a refused token: it is stopped, the user must act.
            void killGroup(spawned.proc)
          } else if (err !== undefined && entry.lvl !== "info" && /reconnect|session closed|connection lost/i.test(`${entry.msg}`))
            life.reconnecting(err)
        })
        void spawned.ended.then(({ code, signal, error }) => {
          if (error) return resume(Effect.fail(new HelperError(`the token-tunnel agent ${bin} could not run: ${error.message}`, true)))
          if (authError !== undefined) return resume(Effect.fail(refused(authError)))
          const last = lastLines(tail)
          resume(Effect.fail(new HelperError(`the token-tunnel agent exited (${code ?? signal})${last ? `: ${last}` : ""}`, false)))
        })
      })
    )
  )

interface NgrokListener {
  url(): string | null
  close(): Promise<void>
}
interface NgrokSession {
  httpEndpoint(): { requestHeader(name: string, value: string): { listenAndForward(url: string): Promise<NgrokListener> } }
  close(): Promise<void>
}
interface NgrokSdk {
  SessionBuilder: new () => {
    authtoken(t: string): unknown
    serverAddr(addr: string): unknown
    handleDisconnection(h: (addr: string, error: string) => boolean): unknown
    handleHeartbeat(h: (latency: number) => void): unknown
    connect(): Promise<NgrokSession>
  }
}

/** The SDK: a session (reconnecting by itself; `starting` while it is away) and one HTTP endpoint forwarding to the gateway. */
export const sdkLife = (serverAddr: string | undefined) => (life: Life, target: string, authtoken: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: async () => {
        life.spawned()
        const sdk = (await import("@ngrok/ngrok")) as unknown as NgrokSdk
        const builder = new sdk.SessionBuilder()
        builder.authtoken(authtoken)
        if (serverAddr) builder.serverAddr(serverAddr)
        let away = false
        let listener: NgrokListener | undefined
        builder.handleDisconnection((_addr, error) => {
          away = true
          life.reconnecting(`the token tunnel lost its connection (${error}); reconnecting`)
          return true
        })
        // A heartbeat after a disconnection: the session is back, the endpoint serves again.
        builder.handleHeartbeat(() => {
          if (away && listener) {
            away = false
            life.registered(listener.url() ?? undefined)
          }
        })
        const session = await builder.connect()
        try {
          listener = await session.httpEndpoint().requestHeader(MARKER_NAME, MARKER_VALUE).listenAndForward(target)
        } catch (e) {
          await session.close().catch(() => {})
          throw e
        }
        return { session, listener }
      },
      catch: (e) => {
        const message = e instanceof Error ? e.message : String(e)
        return AUTH_REFUSED.test(message)
          ? refused(message.split("\n")[0]!)
          : new HelperError(`the token tunnel could not connect: ${message.split("\n")[0]}`, false)
      }
    }),
    ({ session, listener }) =>
      Effect.promise(() => listener.close().catch(() => {})).pipe(Effect.zipRight(Effect.promise(() => session.close().catch(() => {}))))
  ).pipe(
    Effect.tap(({ listener }) => Effect.sync(() => life.registered(listener.url() ?? undefined))),
    Effect.zipRight(Effect.never)
  )
