import { Readable } from "node:stream"
import { describe, expect, it } from "vitest"
import type { UpstreamResponse } from "../src/upstream/client/UpstreamHttp.js"
import { type FrameRelay, relayFramesNow, type RelayEnd, type StreamSink } from "../src/inference/stream.js"

/**
 * Backpressure in a relay (src/inference/stream.ts, `RelayRun.onData`): a sink that tells whether
 * it is still behind (`behind`, an HTTP answer) gets the chunk that fills its buffer without a
 * wait, and the relay waits at the next chunk written while it is still behind; a sink that does
 * not tell makes the relay wait as soon as a write answers false.
 */
const event = (i: number) => `data: {"n":${i}}\n\n`

/** A relay that passes each frame on as it came. */
const ECHO: FrameRelay = {
  frame: (f) => `data: ${f.data}\n\n`,
  end: () => "",
  broken: () => ""
}

/** A sink whose buffer is full from the first write on, until `drain()`. */
const slowSink = (tells: boolean) => {
  const written: Array<string> = []
  let full = false
  let onDrain: (() => void) | undefined
  const sink: StreamSink & { drain(): void; written: Array<string> } = {
    written,
    write: (text) => {
      written.push(text)
      full = true
      return false
    },
    end: (tail) => void written.push(tail),
    gone: () => false,
    committed: () => written.length > 0,
    onDrain: (f) => void (onDrain = f),
    offDrain: () => void (onDrain = undefined),
    drain: () => {
      full = false
      const f = onDrain
      onDrain = undefined
      f?.()
    },
    ...(tells ? { behind: () => full } : {})
  }
  return sink
}

const relayOver = (sink: StreamSink) => {
  const body = new Readable({ read: () => undefined })
  const pauses: Array<number> = []
  const pause = body.pause.bind(body)
  body.pause = () => {
    pauses.push(Date.now())
    return pause()
  }
  const res = { status: 200, headers: {}, body } as unknown as UpstreamResponse
  const ends: Array<RelayEnd> = []
  relayFramesNow(res, "sse", ECHO, sink, { watch: () => () => undefined }, Date.now(), undefined, undefined, (e) => ends.push(e))
  return { body, pauses, ends }
}

const tick = () => new Promise((r) => setImmediate(r))

describe("a relay's backpressure", () => {
  it("a sink that tells it is behind gets the chunk that fills it, and the relay waits at the next one until it drains", async () => {
    const sink = slowSink(true)
    const { body, pauses, ends } = relayOver(sink)
    body.push(event(1))
    await tick()
    expect(sink.written).toEqual([event(1)])
    expect(pauses).toHaveLength(0)
    body.push(event(2))
    await tick()
    expect(sink.written).toEqual([event(1), event(2)])
    expect(pauses).toHaveLength(1)
    expect(body.isPaused()).toBe(true)
    sink.drain()
    expect(body.isPaused()).toBe(false)
    body.push(null)
    await tick()
    await tick()
    expect(ends).toEqual([{ _tag: "ended", outcome: { ttftMs: expect.any(Number), error: null } }])
  })

  it("an answer read whole with its end is written to its end though the first write filled the sink", async () => {
    const sink = slowSink(true)
    const { body, pauses, ends } = relayOver(sink)
    body.push(event(1) + event(2))
    body.push(null)
    await tick()
    await tick()
    expect(pauses).toHaveLength(0)
    expect(sink.written.join("")).toBe(event(1) + event(2))
    expect(ends.map((e) => e._tag)).toEqual(["ended"])
  })

  it("a sink that does not tell makes the relay wait as soon as a write answers false", async () => {
    const sink = slowSink(false)
    const { body, pauses } = relayOver(sink)
    body.push(event(1))
    await tick()
    expect(sink.written).toEqual([event(1)])
    expect(pauses).toHaveLength(1)
    expect(body.isPaused()).toBe(true)
    sink.drain()
    expect(body.isPaused()).toBe(false)
  })
})
