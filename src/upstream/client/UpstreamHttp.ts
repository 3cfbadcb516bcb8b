import * as Context from "effect/Context"
import type { Readable } from "node:stream"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { buildConnector as Connector, Dispatcher } from "undici"
import { Agent, buildConnector, fetch as undiciFetch } from "./undici.js"
import { positiveInteger } from "../../platform/config/AppConfig.js"
import { FeatureFlags } from "../../platform/flags/FeatureFlags.js"
import { type UrlPolicyFlags, urlPolicyFlags } from "../providers/urlPolicy.js"
import { checkHostLiteral, DEFAULT_URL_POLICY, DnsResolver, guardedLookup } from "./egressGuard.js"
import { EgressMark } from "./EgressMark.js"
import { BoundedMap } from "../../kernel/BoundedMap.js"
import { VERSION } from "../../kernel/version.js"
import { BODY_IDLE_TIMEOUT_MS, DEFAULT_MAX_RESPONSE_BYTES, MAX_RESPONSE_BYTES_ENV, type UpstreamBody } from "./upstreamBody.js"
import { UpstreamTransportError } from "./transportErrors.js"
import { StreamedAnswer, WholeAnswer } from "./answerHandlers.js"

export {
  BODY_IDLE_TIMEOUT_MS,
  collect,
  DEFAULT_MAX_RESPONSE_BYTES,
  discardBody,
  ERROR_BODY_MAX_BYTES,
  MAX_RESPONSE_BYTES_ENV,
  readUpstreamBody,
  type UpstreamBody,
  UpstreamBodyError
} from "./upstreamBody.js"
export { UpstreamTransportError } from "./transportErrors.js"
export { type BodyReader, takeBody } from "./answerHandlers.js"

export interface UpstreamResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly body: UpstreamBody
  /** With `readWhole`: the body, read (an error answer's cut at ERROR_BODY_MAX_BYTES). */
  readonly bytes?: Buffer
  /** With `readWhole`: reading the body failed after the headers came (`bytes` is then unset). */
  readonly bodyError?: Error
}

export interface UpstreamRequest {
  readonly url: string
  readonly method: "GET" | "POST" | "DELETE"
  readonly headers: Record<string, string>
  /** A streamed body (an upload read from disk) can be sent once: build the request anew per try. */
  readonly body?: string | Buffer | Readable
  /** Time allowed until response headers arrive. */
  readonly headersTimeout?: Duration.DurationInput
  /**
   * Longest silence between two chunks of the body (undici's per-request body timeout; time the
   * reader spends paused does not count). Without it, the agent's BODY_IDLE_TIMEOUT_MS.
   */
  readonly bodyIdleTimeout?: Duration.DurationInput
  /** With `readWhole`: the largest successful answer read (default: the service's `maxResponseBytes`). */
  readonly maxBodyBytes?: number
  /**
   * Read the whole body before answering (a non-streamed call): one wait instead of two. The
   * answer carries `bytes` (or `bodyError`); its `body` is consumed. A successful answer larger
   * than `maxBodyBytes` is not read further: the connection is dropped and `bodyError` is an
   * UpstreamBodyError (`too_large`); a body silent for `bodyIdleTimeout` one (`stalled`).
   */
  readonly readWhole?: boolean
  /**
   * Ties the call to its caller some other way than interruption: `abortWhen(abort)` registers
   * `abort` (called when the caller goes away) and answers an unregister function. The call then
   * aborts through it, not through interruption, and costs no interruptible region. Only for a
   * fiber that is interrupted exactly when that happens (a request's own fiber, by its client).
   * A streamed answer's body stays covered until it is read to its end or destroyed.
   */
  readonly abortWhen?: (abort: () => void) => () => void
  /** Where the call goes out: a proxy's dispatcher (src/upstream/egress/); unset: the direct, guarded agent. */
  readonly dispatcher?: Dispatcher
}

/** How a request sent without an effect ended (`requestNow`). */
export type UpstreamOutcome =
  | { readonly _tag: "answered"; readonly response: UpstreamResponse }
  | { readonly _tag: "failed"; readonly error: UpstreamTransportError }
  | { readonly _tag: "gone" }

export interface UpstreamHttpShape {
  /**
   * Sends one request. Interrupting the effect aborts it. The body of the returned response
   * must be consumed or destroyed by the caller.
   */
  readonly request: (req: UpstreamRequest) => Effect.Effect<UpstreamResponse, UpstreamTransportError>
  /**
   * The same request without an effect, for the common request path (docs/ARCHITECTURE.md, "The
   * common path"): `done` is called once, with the response, the failure, or `gone` when the
   * caller went away through `abortWhen` (the call is aborted then).
   */
  readonly requestNow: (req: UpstreamRequest, done: (outcome: UpstreamOutcome) => void) => void
  readonly userAgent: string
  /** Largest whole answer read (GATEWAY_MAX_UPSTREAM_RESPONSE_BYTES): for callers of `readUpstreamBody`. */
  readonly maxResponseBytes: number
  /**
   * `fetch` over the same guarded agent, for clients built on the platform's HttpClient (the sync
   * server); `init.dispatcher` (a proxy's, src/upstream/egress/) replaces the agent.
   */
  readonly fetch: typeof globalThis.fetch
}

export const DEFAULT_HEADERS_TIMEOUT = Duration.minutes(5)
const DEFAULT_HEADERS_TIMEOUT_MS = Duration.toMillis(DEFAULT_HEADERS_TIMEOUT)

/**
 * A timeout in ms. The request path gives whole milliseconds (a positive integer is taken as it
 * is, as `Duration.decode` would read it): no Duration nor matcher object is made per request.
 */
const millisOf = (input: Duration.DurationInput): number =>
  Number.isInteger(input) && (input as number) > 0 ? (input as number) : Duration.toMillis(Duration.decode(input))

/**
 * Longest silence allowed between two body chunks when a call sets no `bodyIdleTimeout`: a
 * backstop for streams, which the stream watchdog ends much earlier.
 */

/** Origin and path of an upstream URL, parsed once per distinct URL (a handful per connection). */
const parsed = new BoundedMap<string, { readonly origin: string; readonly path: string; readonly host: string } | string>({
  maxEntries: 1000
})
const splitUrl = (url: string): { readonly origin: string; readonly path: string; readonly host: string } | string => {
  let hit = parsed.get(url)
  if (hit === undefined) {
    try {
      const u = new URL(url)
      hit =
        u.protocol === "http:" || u.protocol === "https:"
          ? { origin: u.origin, path: u.pathname + u.search, host: u.hostname }
          : `unsupported upstream URL scheme ${u.protocol}`
    } catch {
      hit = `invalid upstream URL: ${url}`
    }
    parsed.set(url, hit)
  }
  return hit
}

/** What sending needs of the layer: the guarded agent and the whole-answer size limit. */
interface Sending {
  readonly agent: Dispatcher
  readonly maxResponseBytes: number
}

/**
 * A request's headers as its dispatcher gets them. A request's headers object may be shared by
 * every call to its connection (src/upstream/client/executors.ts): the direct agent only reads it,
 * a proxy's dispatcher (undici's ProxyAgent adds `host` to the object it is given) gets a copy.
 */
const headersFor = (req: UpstreamRequest): Record<string, string> | Array<string> =>
  req.dispatcher === undefined ? (HEADER_LISTS.get(req.headers) ?? req.headers) : { ...req.headers }

/**
 * Shared headers objects (`shareHeaders`) with the same headers as undici's flat list of names and
 * values. Given an object, undici's request lists its keys (a new array every call) to read it;
 * given the list, it reads it as it is (it copies what it reads, never changing the list). The
 * headers and their order are the object's own.
 */
const HEADER_LISTS = new WeakMap<object, Array<string>>()

/**
 * Marks `headers` as shared by many requests and never changed (executors.ts caches one per
 * connection and format): the direct agent then gets it as a list made once (`HEADER_LISTS`).
 */
export const shareHeaders = <H extends Record<string, string>>(headers: H): H => {
  const list: Array<string> = []
  for (const name of Object.keys(headers)) list.push(name, headers[name]!)
  HEADER_LISTS.set(headers, list)
  return headers
}

/**
 * Sends `req`; `done` once. Answers the function that cancels it (undefined when it ended at
 * once). Each answer is read by a dispatch handler of its own: a whole one (`readWhole`) by
 * `WholeAnswer`, a streamed one by `StreamedAnswer`, which hands its body over as a stream.
 */
const sendNow = (
  sending: Sending,
  req: UpstreamRequest,
  policy: UrlPolicyFlags,
  done: (outcome: UpstreamOutcome) => void
): (() => void) | undefined => {
  const target = splitUrl(req.url)
  if (typeof target === "string") {
    done({ _tag: "failed", error: new UpstreamTransportError({ kind: "network", message: target }) })
    return undefined
  }
  // An address written in the URL is never looked up: judged here, before anything is sent.
  const refused = checkHostLiteral(target.host, policy)
  if (refused) {
    done({ _tag: "failed", error: new UpstreamTransportError({ kind: "blocked", message: refused.message }) })
    return undefined
  }
  const ms = req.headersTimeout === undefined ? DEFAULT_HEADERS_TIMEOUT_MS : millisOf(req.headersTimeout)
  const bodyTimeout = req.bodyIdleTimeout === undefined ? undefined : millisOf(req.bodyIdleTimeout)
  if (req.readWhole) {
    const answer = new WholeAnswer(req.maxBodyBytes ?? sending.maxResponseBytes, bodyTimeout, done)
    const cancel = () => answer.cancel()
    return dispatchTo(sending, target, req, ms, bodyTimeout, answer, cancel, cancel)
  }
  const upload = req.body !== undefined && typeof req.body !== "string" && !Buffer.isBuffer(req.body) ? req.body : undefined
  const answer = new StreamedAnswer(done, upload)
  return dispatchTo(
    sending,
    target,
    req,
    ms,
    bodyTimeout,
    answer,
    () => answer.cancel(true),
    () => answer.cancel(false)
  )
}

/**
 * Sends `req` to be read by `answer`: the caller watched through `abortWhen` (`gone`: what its
 * leaving does), the headers' timer started, the call dispatched. Answers `cancel`, or undefined
 * when the caller was gone already (nothing is sent).
 */
const dispatchTo = (
  sending: Sending,
  target: { readonly origin: string; readonly path: string },
  req: UpstreamRequest,
  ms: number,
  bodyTimeout: number | undefined,
  answer: WholeAnswer | StreamedAnswer,
  gone: () => void,
  cancel: () => void
): (() => void) | undefined => {
  if (req.abortWhen) {
    answer.unwatch = req.abortWhen(gone)
    if (answer.ended) {
      answer.unwatch()
      return undefined
    }
  }
  answer.startTimer(ms)
  const via = req.dispatcher ?? sending.agent
  via.dispatch(
    // undici reads an unset `bodyTimeout` as its default, as if absent: one object, no spread.
    { origin: target.origin, path: target.path, method: req.method, headers: headersFor(req), body: req.body ?? null, bodyTimeout },
    answer
  )
  return cancel
}

/**
 * The one HTTP client for provider traffic: an undici Agent with keep-alive pools per origin (docs/performance.md, "Third pass").
 * Every outbound call goes through it, so the outbound URL policy is enforced here once, a name judged by the agent's own `lookup`
 * (docs/security.md, "Outbound requests (SSRF)").
 */
export class UpstreamHttp extends Context.Tag("gateway/UpstreamHttp")<UpstreamHttp, UpstreamHttpShape>() {
  static readonly layer = Layer.scoped(
    UpstreamHttp,
    Effect.gen(function* () {
      // Without FeatureFlags (a client built alone), the flags' defaults.
      const flags = yield* Effect.serviceOption(FeatureFlags)
      const resolver = yield* DnsResolver
      const peekPolicy = (): UrlPolicyFlags | undefined => {
        if (Option.isNone(flags)) return DEFAULT_URL_POLICY
        const f = flags.value
        const guard = f.peekEnabled("OUTBOUND_SSRF_GUARD_ENABLED")
        const allowLocal = f.peekEnabled("GATEWAY_ALLOW_LOCAL_PROVIDER_URLS")
        const allowPrivate = f.peekEnabled("GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS")
        // One of the shared policy objects: nothing allocated per request.
        return guard !== undefined && allowLocal !== undefined && allowPrivate !== undefined
          ? urlPolicyFlags(guard, allowLocal, allowPrivate)
          : undefined
      }
      const readPolicy = (): Promise<UrlPolicyFlags> => {
        const f = Option.getOrThrow(flags)
        return Effect.runPromise(
          Effect.all({
            guard: f.enabled("OUTBOUND_SSRF_GUARD_ENABLED"),
            allowLocal: f.enabled("GATEWAY_ALLOW_LOCAL_PROVIDER_URLS"),
            allowPrivate: f.enabled("GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS")
          })
        )
      }
      const lookup = guardedLookup(
        () => resolver,
        () => peekPolicy() ?? readPolicy()
      )
      const mark = Option.getOrUndefined(yield* Effect.serviceOption(EgressMark))
      const direct = buildConnector({ timeout: 10_000, lookup })
      // While the transparent capture runs its dial carries the bypass mark: the name is looked up
      // (and judged) here, the marked socket connected, and undici runs TLS over it.
      const connect: Connector.connector = (opts, callback) => {
        const dial = mark?.current()
        if (dial === undefined) return direct(opts, callback)
        const port = Number(opts.port) || (opts.protocol === "https:" ? 443 : 80)
        lookup(opts.hostname.replace(/^\[|\]$/g, ""), {}, (error, address) => {
          if (error) return callback(error, null)
          dial(String(address), port, 10_000).then(
            (socket) => (opts.protocol === "https:" ? direct({ ...opts, httpSocket: socket }, callback) : callback(null, socket)),
            (e: Error) => callback(e, null)
          )
        })
      }
      const agent = new Agent({
        keepAliveTimeout: 30_000,
        keepAliveMaxTimeout: 600_000,
        connect,
        bodyTimeout: BODY_IDLE_TIMEOUT_MS,
        headersTimeout: 0
      })
      yield* Effect.addFinalizer(() => Effect.promise(() => agent.destroy().catch(() => undefined)))
      const userAgent = `gateway/${VERSION}`
      const maxResponseBytes = yield* positiveInteger(MAX_RESPONSE_BYTES_ENV, "bytes", DEFAULT_MAX_RESPONSE_BYTES)
      const guardedFetch = ((input: Parameters<typeof globalThis.fetch>[0], init?: Parameters<typeof globalThis.fetch>[1]) => {
        const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url
        const target = splitUrl(url)
        const policy = peekPolicy() ?? DEFAULT_URL_POLICY
        const refused = typeof target === "string" ? undefined : checkHostLiteral(target.host, policy)
        if (refused) return Promise.reject(new TypeError("fetch failed", { cause: refused }))
        // A caller may name a proxy's dispatcher (src/upstream/egress/) in `init`; else the direct, guarded agent.
        return undiciFetch(
          input as never,
          { ...(init as object), dispatcher: (init as { dispatcher?: Dispatcher } | undefined)?.dispatcher ?? agent } as never
        ) as unknown as Promise<Response>
      }) as typeof globalThis.fetch
      const sending: Sending = { agent, maxResponseBytes }
      return {
        userAgent,
        maxResponseBytes,
        fetch: guardedFetch,
        request: (req) => {
          // The flags are almost always fresh: no effect to read them.
          const policy = peekPolicy()
          return policy !== undefined ? send(req, policy) : Effect.flatMap(Effect.promise(readPolicy), (p) => send(req, p))
        },
        requestNow: (req, done) => {
          const policy = peekPolicy()
          if (policy !== undefined) sendNow(sending, req, policy, done)
          // The flags are not known fresh (rare: just after a change): read, then send.
          else
            readPolicy().then(
              (p) => sendNow(sending, req, p, done),
              (e: unknown) =>
                done({
                  _tag: "failed",
                  error: new UpstreamTransportError({ kind: "network", message: `the outbound policy could not be read: ${String(e)}` })
                })
            )
        }
      } satisfies UpstreamHttpShape
      function send(req: UpstreamRequest, policy: UrlPolicyFlags) {
        return Effect.async<UpstreamResponse, UpstreamTransportError>((resume) => {
          const cancel = sendNow(sending, req, policy, (outcome) =>
            resume(
              outcome._tag === "answered"
                ? Effect.succeed(outcome.response)
                : outcome._tag === "failed"
                  ? Effect.fail(outcome.error)
                  : // The caller is gone: end the wait as an interruption (its fiber is being interrupted anyway).
                    Effect.interrupt
            )
          )
          return req.abortWhen || cancel === undefined ? undefined : Effect.sync(cancel)
        })
      }
    })
  )
}
