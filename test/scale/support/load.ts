/**
 * A steady load of chat requests, half of them streamed, from a few clients in a loop, as the
 * fault tests need it: every request's outcome is kept (status, transport error, time, the
 * gateway's request id), so a test can say that every request was answered while a part failed.
 */

export interface Outcome {
  /** The HTTP status, or 0 when none came (a transport error or the client's timeout). */
  readonly status: number
  /** The transport error or the timeout, when there was no answer; a stream that did not end properly. */
  readonly error?: string
  readonly stream: boolean
  readonly startedAt: number
  /** When the whole answer (the stream's end included) was read. */
  readonly endedAt: number
  readonly requestId: string | null
  readonly body?: string
}

export interface Load {
  readonly outcomes: ReadonlyArray<Outcome>
  /** Stops the clients and waits for the requests in flight. */
  readonly stop: () => Promise<ReadonlyArray<Outcome>>
}

export interface LoadOptions {
  readonly clients?: number
  /** The client's own timeout for one request (default 10 s). */
  readonly timeoutMs?: number
  /** Pause between one client's requests (default 20 ms). */
  readonly pauseMs?: number
  readonly headers?: Record<string, string>
  readonly model: string
}

/** One chat request, streamed or not, read to its end. */
export const chatOnce = async (base: string, options: LoadOptions, stream: boolean): Promise<Outcome> => {
  const startedAt = Date.now()
  try {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...options.headers },
      body: JSON.stringify({ model: options.model, stream, messages: [{ role: "user", content: "hi" }] }),
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000)
    })
    const text = await res.text()
    const requestId = res.headers.get("x-gateway-request-id")
    // A stream that broke off without its end is not an answer.
    const error = res.status === 200 && stream && !text.includes("data: [DONE]") ? "the stream ended without [DONE]" : undefined
    return {
      status: res.status,
      stream,
      startedAt,
      endedAt: Date.now(),
      requestId,
      ...(error ? { error } : {}),
      ...(res.status === 200 ? {} : { body: text.slice(0, 500) })
    }
  } catch (e) {
    const cause = (e as { cause?: { code?: string; message?: string } }).cause
    return {
      status: 0,
      stream,
      startedAt,
      endedAt: Date.now(),
      requestId: null,
      error: `${(e as Error).name}: ${(e as Error).message}${cause ? ` (${cause.code ?? cause.message})` : ""}`
    }
  }
}

/** Starts `clients` loops (default 4), alternating streamed and whole answers. */
export const startLoad = (base: string, options: LoadOptions): Load => {
  const outcomes: Array<Outcome> = []
  let running = true
  const loops = Array.from({ length: options.clients ?? 4 }, async (_, i) => {
    let stream = i % 2 === 0
    while (running) {
      outcomes.push(await chatOnce(base, options, stream))
      stream = !stream
      await new Promise((r) => setTimeout(r, options.pauseMs ?? 20))
    }
  })
  return {
    outcomes,
    stop: async () => {
      running = false
      await Promise.all(loops)
      return outcomes
    }
  }
}

/** The outcomes that were not a whole 200, described for an assertion's message. */
export const failures = (outcomes: ReadonlyArray<Outcome>): Array<string> =>
  outcomes
    .filter((o) => o.status !== 200 || o.error !== undefined)
    .map(
      (o) =>
        `${new Date(o.startedAt).toISOString()} ${o.stream ? "stream" : "whole"} ${o.status} ${o.error ?? ""} ${o.body ?? ""} (${o.endedAt - o.startedAt} ms)`
    )

/** The value of a Prometheus sample line `name{labels} value` in a scrape (undefined when absent). */
export const sample = (scrape: string, name: string, labels = ""): number | undefined => {
  for (const line of scrape.split("\n")) {
    if (line.startsWith("#")) continue
    const space = line.lastIndexOf(" ")
    const series = line.slice(0, space)
    if (series === name + labels || (labels === "" && series === `${name}{}`)) return Number(line.slice(space + 1))
  }
  return undefined
}
