import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { A2A_METHODS, AGENT_CARD_PATH, LIST_CAPABILITIES } from "../../inference/a2a/protocol.js"
import { exitWith, printJson } from "../output.js"
import { serverUrl } from "../remote.js"

/** The parts of an agent card these commands read. */
interface Card {
  readonly name?: string
  readonly description?: string
  readonly url?: string
  readonly version?: string
  readonly protocolVersion?: string
  readonly capabilities?: Record<string, unknown>
  readonly skills?: ReadonlyArray<{ readonly id?: string; readonly name?: string }>
  readonly security?: ReadonlyArray<unknown>
  readonly supportedInterfaces?: ReadonlyArray<{
    readonly url?: string
    readonly protocolBinding?: string
    readonly protocolVersion?: string
  }>
}

const WAIT = "5 seconds"

/** The card at `base`, or why there is none. */
const fetchCard = (base: string) =>
  HttpClient.get(`${base.replace(/\/+$/, "")}${AGENT_CARD_PATH}`).pipe(
    Effect.mapError(() => `no gateway answers at ${base} (is it running?)`),
    Effect.flatMap((res) =>
      res.status === 200
        ? Effect.mapError(res.json, () => "the agent card is not JSON")
        : Effect.fail(`the agent card answered ${res.status}`)
    ),
    Effect.flatMap((body) =>
      typeof body === "object" && body !== null && !Array.isArray(body)
        ? Effect.succeed(body as Card)
        : Effect.fail("the agent card is not a JSON object")
    ),
    Effect.timeoutFail({ duration: WAIT, onTimeout: () => `no answer from ${base} within ${WAIT}` })
  )

const sameOrigin = (a: string, b: string): boolean => {
  try {
    return new URL(a).origin === new URL(b).origin
  } catch {
    return false
  }
}

/** One `message/send` with `list-capabilities` to `endpoint`: how many skills its table lists, or why it failed. */
const askCapabilities = (endpoint: string, key: string | undefined) =>
  HttpClientRequest.post(endpoint).pipe(
    HttpClientRequest.bodyUnsafeJson({
      jsonrpc: "2.0",
      id: 1,
      method: A2A_METHODS[0],
      params: { skill: LIST_CAPABILITIES, messages: [{ role: "user", content: "What can you do?" }] }
    }),
    key ? HttpClientRequest.bearerToken(key) : (r) => r,
    HttpClient.execute,
    Effect.flatMap((res) => Effect.map(res.json, (body) => ({ status: res.status, body: body as Record<string, any> }))),
    Effect.timeoutFail({ duration: WAIT, onTimeout: () => `no answer within ${WAIT}` }),
    Effect.mapError((e) => (typeof e === "string" ? e : `the endpoint could not be reached or answered no JSON`)),
    Effect.flatMap(({ status, body }) => {
      if (status !== 200) return Effect.fail(`the endpoint answered ${status}: ${body?.error?.message ?? "no message"}`)
      if (body?.error) return Effect.fail(`the endpoint answered JSON-RPC error ${body.error.code}: ${body.error.message}`)
      const table = body?.result?.artifacts?.[0]?.content
      if (typeof table !== "string") return Effect.fail("the answer has no artifact content")
      return Effect.succeed(table.split("\n").filter((l: string) => l.startsWith("| ")).length - 1)
    })
  )

export const a2aStatus = (opts: { readonly url: Option.Option<string>; readonly apiKey: Option.Option<string>; readonly json: boolean }) =>
  Effect.gen(function* () {
    const base = yield* serverUrl(opts.url)
    const card = yield* Effect.either(fetchCard(base))
    if (card._tag === "Left") {
      if (opts.json) yield* printJson({ url: base, card: false, answering: false, error: card.left })
      else yield* Console.log(`A2A: ${card.left}`)
      return yield* exitWith(1)
    }
    const endpoint = card.right.url ?? `${base}/a2a`
    const key = Option.getOrUndefined(opts.apiKey) ?? (process.env.GATEWAY_API_KEY?.trim() || undefined)
    // The key goes only to the server asked: a card may name another host.
    const asked = yield* Effect.either(askCapabilities(endpoint, sameOrigin(endpoint, base) ? key : undefined))
    const summary = { url: base, card: true, endpoint, version: card.right.version, protocolVersion: card.right.protocolVersion }
    if (asked._tag === "Left") {
      if (opts.json) yield* printJson({ ...summary, answering: false, error: asked.left })
      else yield* Console.log(`A2A endpoint ${endpoint} (from the card at ${base}) is not answering: ${asked.left}`)
      return yield* exitWith(1)
    }
    if (opts.json) return yield* printJson({ ...summary, answering: true, skills: asked.right })
    yield* Console.log(
      `A2A endpoint ${endpoint} is answering (gateway ${card.right.version ?? "?"}, A2A ${card.right.protocolVersion ?? "?"}): list-capabilities lists ${asked.right} skills`
    )
  }).pipe(Effect.provide(FetchHttpClient.layer))

export const a2aCard = (opts: { readonly url: Option.Option<string>; readonly json: boolean }) =>
  Effect.gen(function* () {
    const base = yield* serverUrl(opts.url)
    const card = yield* Effect.either(fetchCard(base))
    if (card._tag === "Left") {
      yield* Console.error(`error: ${card.left}`)
      return yield* exitWith(1)
    }
    if (opts.json) return yield* printJson(card.right)
    const c = card.right
    const capabilities = Object.entries(c.capabilities ?? {})
      .map(([k, v]) => `${k}=${String(v)}`)
      .join(", ")
    yield* Console.log(
      [
        `${c.name ?? "?"} ${c.version ?? ""}`.trim(),
        ...(c.description ? [c.description] : []),
        `endpoint: ${c.url ?? "?"} (A2A ${c.protocolVersion ?? "?"})`,
        ...(c.supportedInterfaces && c.supportedInterfaces.length > 0
          ? [
              `interfaces: ${c.supportedInterfaces.map((i) => `${i.url ?? "?"} ${i.protocolBinding ?? "?"} ${i.protocolVersion ?? "?"}`).join(", ")}`
            ]
          : []),
        `capabilities: ${capabilities || "none"}`,
        `skills: ${(c.skills ?? []).map((s) => s.id ?? s.name ?? "?").join(", ") || "none"}`,
        `key required: ${c.security && c.security.length > 0 ? "yes" : "no"}`
      ].join("\n")
    )
  }).pipe(Effect.provide(FetchHttpClient.layer))
