import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import type * as http from "node:http"
import { WebSocket } from "ws"
import { BadRequest } from "../../domain/errors.js"
import type { InterceptedSummary } from "../../domain/inspector.js"
import { statusMatches } from "../../services/inspector/bufferViews.js"
import { INSPECTOR_WS_PATH } from "../../services/inspector/paths.js"
import type { Parsed } from "../handler.js"
import { colourOn, green, printJson, red, yellow } from "../output.js"
import { adminKeyOf, explain, remote, serverUrl, withHttp } from "../remote.js"
import { UsageError } from "../schema.js"
import type { exportOptions, tailOptions } from "./inspect.js"

type Summary = typeof InterceptedSummary.Type
type FeedMessage =
  | { readonly type: "snapshot"; readonly entries: ReadonlyArray<Summary>; readonly bufferSize: number }
  | { readonly type: "new" | "update"; readonly entry: Summary }
  | { readonly type: "clear" }

interface Filters {
  readonly llm: boolean
  readonly source: Option.Option<string>
  readonly host: Option.Option<string>
  readonly agent: Option.Option<string>
  readonly status: Option.Option<string>
}

/** The API's list filter (profile, host, agent, status, source), applied to a summary. */
const matcher =
  (f: Filters) =>
  (e: Summary): boolean =>
    (!f.llm || e.detectedKind === "llm" || e.llm !== null) &&
    Option.match(f.host, { onNone: () => true, onSome: (h) => e.host === h || e.host.endsWith(`.${h}`) }) &&
    Option.match(f.agent, { onNone: () => true, onSome: (a) => e.agent === a }) &&
    Option.match(f.status, { onNone: () => true, onSome: (s) => statusMatches(e.status, s) }) &&
    Option.match(f.source, { onNone: () => true, onSome: (s) => e.source === s })

/** The same filters as the query of `GET requests` and `export.har`. */
const queryOf = (f: Filters) => ({
  ...(f.llm ? { profile: "llm" as const } : {}),
  ...Option.match(f.source, { onNone: () => ({}), onSome: (source) => ({ source: source as Summary["source"] }) }),
  ...Option.match(f.host, { onNone: () => ({}), onSome: (host) => ({ host }) }),
  ...Option.match(f.agent, { onNone: () => ({}), onSome: (agent) => ({ agent }) }),
  ...Option.match(f.status, { onNone: () => ({}), onSome: (status) => ({ status }) })
})

const final = (e: Summary) => e.status !== "in-flight"

/** `text` cut to `width` characters, the cut marked. */
const fit = (text: string, width: number) => (text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`)

/** One line per entry: time, source, method, status, host+path (fitted to the terminal), model, tokens in/out, cost, duration. */
const lineOf = (e: Summary, columns: number | undefined, colour: boolean): string => {
  const time = new Date(e.timings.startedAt).toTimeString().slice(0, 8)
  const status = String(e.status).padEnd(9)
  const painted =
    e.status === "in-flight"
      ? status
      : e.status === "error" || e.status >= 500
        ? red(status, colour)
        : e.status >= 400
          ? yellow(status, colour)
          : green(status, colour)
  const prefix = `${time}  ${e.source.padEnd(12)}  ${e.method.padEnd(6)}  `
  const llm = e.llm
  const tokens = llm && (llm.tokensIn !== null || llm.tokensOut !== null) ? `${llm.tokensIn ?? "-"}/${llm.tokensOut ?? "-"} tok` : "-"
  const cost = llm?.costEstimateUsd != null ? `$${llm.costEstimateUsd.toFixed(6)}` : "-"
  const duration = e.timings.totalMs !== null ? `${e.timings.totalMs} ms` : "-"
  const suffix = `${llm?.model ?? "-"}  ${tokens}  ${cost}  ${duration}`
  const target = `${e.host}${e.path}`
  // On a terminal the address takes what the other columns leave; piped, it is whole.
  const room = columns === undefined ? undefined : Math.max(16, columns - prefix.length - status.length - suffix.length - 4)
  const address = room === undefined ? target.padEnd(40) : fit(target, room).padEnd(Math.min(room, 40))
  return `${prefix}${painted}  ${address}  ${suffix}`
}

/** How long a completed entry waits for its last updates (usage row, tokens, cost) before it is printed. */
const SETTLE_MS = 250
/** Ids remembered as printed; past this the oldest are forgotten (the buffer holds fewer). */
const REMEMBER = 20_000

const remember = (set: Set<string>, id: string) => {
  set.add(id)
  if (set.size > REMEMBER) set.delete(set.values().next().value as string)
}

const describeRefusal = (status: number, body: string, at: string): string => {
  let message = body.trim()
  try {
    const parsed = JSON.parse(body) as { message?: unknown }
    if (typeof parsed.message === "string") message = parsed.message
  } catch {
    // Not JSON: the text as sent.
  }
  if (status === 401) return `the admin key was refused${message ? `: ${message}` : ""}`
  if (status === 403) return `the inspector refused the connection${message ? `: ${message}` : ""}`
  if (status === 404) return `no traffic inspector at ${at} (is this gateway recent enough?)`
  return `the inspector feed answered ${status}${message ? `: ${message}` : ""}`
}

/**
 * The entries to print from the live feed (`INSPECTOR_WS_PATH`): the snapshot's last `last`
 * matching ones, then each matching entry when it completes (and, with `inFlight`, when it
 * starts). A completed entry is printed once, SETTLE_MS after its final status, as last updated.
 * Fails with one readable line when the feed cannot be opened or closes; ending the stream
 * (`--count`, Ctrl-C) closes the socket.
 */
const feed = (
  url: string,
  adminKey: string,
  opts: {
    readonly last: number
    readonly inFlight: boolean
    readonly keep: (e: Summary) => boolean
    readonly notice: (line: string) => void
  }
) =>
  Stream.asyncPush<Summary, BadRequest>(
    (emit) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          const at = `${url.replace(/^http/, "ws")}${INSPECTOR_WS_PATH}`
          const ws = new WebSocket(at, { headers: { authorization: `Bearer ${adminKey}` } })
          const printedFinal = new Set<string>()
          const printedStart = new Set<string>()
          const settling = new Map<string, Summary>()
          const timers = new Set<NodeJS.Timeout>()
          let done = false
          const fail = (message: string) => {
            if (done) return
            done = true
            emit.fail(new BadRequest({ message }))
          }
          ws.on("unexpected-response", (req: http.ClientRequest, res: http.IncomingMessage) => {
            let body = ""
            res.setEncoding("utf8")
            res.on("data", (c: string) => (body += c.slice(0, 2000)))
            res.on("end", () => {
              fail(describeRefusal(res.statusCode ?? 0, body, at))
              req.destroy()
            })
            res.on("error", () => fail(describeRefusal(res.statusCode ?? 0, body, at)))
          })
          ws.on("error", (e: NodeJS.ErrnoException) => {
            const code = e.code ?? ""
            fail(
              /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ECONNRESET|ETIMEDOUT|EAI_AGAIN/.test(code)
                ? `no gateway answers at ${url} (is it running?)`
                : `the inspector feed failed: ${e.message}`
            )
          })
          ws.on("close", (code: number, reason: Buffer) => {
            const why = reason.toString()
            fail(`the gateway closed the inspector feed (${code}${why ? `: ${why}` : ""})`)
          })
          ws.on("message", (data: Buffer, isBinary: boolean) => {
            if (done || isBinary) return
            let msg: FeedMessage
            try {
              msg = JSON.parse(data.toString("utf8")) as FeedMessage
            } catch {
              return
            }
            switch (msg.type) {
              case "snapshot": {
                for (const e of msg.entries) remember(final(e) ? printedFinal : printedStart, e.id)
                const shown = msg.entries.filter((e) => (final(e) || opts.inFlight) && opts.keep(e))
                if (opts.last > 0) for (const e of shown.slice(-opts.last)) emit.single(e)
                return
              }
              case "new":
              case "update": {
                const e = msg.entry
                if (settling.has(e.id)) {
                  settling.set(e.id, e)
                  return
                }
                if (final(e)) {
                  if (printedFinal.has(e.id)) return
                  remember(printedFinal, e.id)
                  settling.set(e.id, e)
                  const timer = setTimeout(() => {
                    timers.delete(timer)
                    const latest = settling.get(e.id) ?? e
                    settling.delete(e.id)
                    if (!done && opts.keep(latest)) emit.single(latest)
                  }, SETTLE_MS)
                  timers.add(timer)
                } else if (opts.inFlight && !printedStart.has(e.id)) {
                  remember(printedStart, e.id)
                  if (opts.keep(e)) emit.single(e)
                }
                return
              }
              case "clear":
                opts.notice("-- the inspector's buffer was cleared --")
                return
            }
          })
          return {
            close: () => {
              done = true
              for (const t of timers) clearTimeout(t)
              timers.clear()
              ws.removeAllListeners()
              ws.on("error", () => undefined)
              if (ws.readyState === WebSocket.OPEN) {
                ws.close(1000, "done")
                setTimeout(() => ws.terminate(), 1000).unref()
              } else ws.terminate()
            }
          }
        }),
        (socket) => Effect.sync(socket.close)
      ),
    { bufferSize: "unbounded" }
  )

export const tail = (opts: Parsed<typeof tailOptions>) =>
  Effect.gen(function* () {
    const url = yield* serverUrl(opts.url)
    const adminKey = adminKeyOf(opts.apiKey)
    if (!adminKey) return yield* new BadRequest({ message: "an admin API key is needed: pass --api-key or set GATEWAY_API_KEY" })
    const keep = matcher(opts)
    const colour = colourOn(process.stdout, opts.json)
    const inFlight = opts.inFlight || Option.contains(opts.status, "in-flight")
    const entries = feed(url, adminKey, {
      last: opts.last,
      inFlight,
      keep,
      notice: (line) => (opts.json ? undefined : console.error(line))
    })
    const limited = Option.match(opts.count, { onNone: () => entries, onSome: (n) => Stream.take(entries, n) })
    yield* Stream.runForEach(limited, (e) =>
      Console.log(opts.json ? JSON.stringify(e) : lineOf(e, process.stdout.isTTY ? process.stdout.columns : undefined, colour))
    )
  })

const writeFile = (file: string, bytes: Uint8Array) =>
  Effect.try({
    try: () => fs.writeFileSync(file, bytes),
    catch: (e) => new BadRequest({ message: `cannot write ${file}: ${(e as Error).message}` })
  })

const harEntries = (bytes: Uint8Array): number => {
  try {
    const har = JSON.parse(Buffer.from(bytes).toString("utf8")) as { log?: { entries?: ReadonlyArray<unknown> } }
    return har.log?.entries?.length ?? 0
  } catch {
    return 0
  }
}

const jsonlEntries = (bytes: Uint8Array): number =>
  Buffer.from(bytes)
    .toString("utf8")
    .split("\n")
    .filter((l) => l.trim() !== "").length

export const exportTraffic = (opts: Parsed<typeof exportOptions>) =>
  Effect.gen(function* () {
    const har = Option.getOrUndefined(opts.har)
    const jsonl = Option.getOrUndefined(opts.jsonl)
    const session = Option.getOrUndefined(opts.session)
    const query = queryOf(opts)
    if (har === undefined && jsonl === undefined)
      return yield* new UsageError({ message: "--har: is missing (give --har FILE, or --jsonl FILE with --session)" })
    if (jsonl !== undefined && session === undefined)
      return yield* new UsageError({
        message: "--jsonl: JSONL is a recorded session's export: add --session ID (the buffer exports as --har)"
      })
    if (session !== undefined && Object.keys(query).length > 0)
      return yield* new UsageError({
        message: "--session: a session is exported whole: leave out --llm, --source, --host, --agent and --status"
      })
    const { url, client } = yield* remote(opts)
    const written: Array<{ readonly format: "har" | "jsonl"; readonly file: string; readonly entries: number }> = []
    if (har !== undefined) {
      const bytes = yield* (
        session !== undefined ? client.inspector.sessionHar({ path: { id: session } }) : client.inspector.exportHar({ urlParams: query })
      ).pipe(Effect.mapError(explain(url)))
      yield* writeFile(har, bytes)
      written.push({ format: "har", file: har, entries: harEntries(bytes) })
    }
    if (jsonl !== undefined && session !== undefined) {
      const bytes = yield* client.inspector
        .sessionExport({ path: { id: session }, urlParams: { format: "jsonl" } })
        .pipe(Effect.mapError(explain(url)))
      yield* writeFile(jsonl, bytes)
      written.push({ format: "jsonl", file: jsonl, entries: jsonlEntries(bytes) })
    }
    if (opts.json) return yield* printJson({ written })
    for (const w of written)
      yield* Console.log(
        `wrote ${w.entries} ${w.entries === 1 ? "entry" : "entries"} to ${w.file} (${w.format === "har" ? "HAR 1.2" : "JSONL"})`
      )
  }).pipe(withHttp)
