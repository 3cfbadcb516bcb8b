import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { describe, expect, it } from "vitest"
import type { KeyValueShape } from "../src/platform/store/KeyValue.js"
import { makeMemoryCluster, type SharedStateShape } from "../src/platform/state/SharedState.js"
import { makeInspector } from "../src/services/inspector/buffer.js"
import { Inspector } from "../src/services/inspector/Inspector.js"
import { inspectorDefaults } from "../src/services/inspector/InspectorConfig.js"
import { joinNode } from "../src/services/inspector/share.js"

/**
 * One inspector for the node under `--workers` (src/services/inspector/share.ts), with the
 * processes of one node stood in for by two buffers on a memory cluster (the same channel
 * interface the primary's IPC relay and Redis implement). The real `--workers 2` case is in
 * test/workers.test.ts.
 */
const turn = () => new Promise((r) => setImmediate(r))

const node = (cluster: ReturnType<typeof makeMemoryCluster>, self: string, holdsCapture: boolean) => {
  const core = makeInspector({ config: { ...inspectorDefaults("/tmp/unused"), bufferSize: 5 } })
  const share = joinNode(core, cluster.join(), { topic: "inspector:test", holdsCapture, self })
  return { core, share }
}

const chat = (content: string) =>
  Buffer.from(
    JSON.stringify({
      model: "gpt-4o-mini",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content }
      ]
    })
  )

describe("the inspector shared between the processes of one node", () => {
  it("an entry recorded by one worker is in the other's buffer, in flight then finished, with its bodies while someone looks anywhere", async () => {
    const cluster = makeMemoryCluster()
    const one = node(cluster, "w1", true)
    const two = node(cluster, "w2", false)

    // Nobody looks: metadata only, and nothing sent until the other asks (a list, a detail: its sync).
    const id = one.core.sink.begin({
      source: "http-proxy",
      method: "POST",
      url: "https://api.openai.com/v1/chat/completions",
      headers: { "content-type": "application/json" },
      body: chat("hi")
    })
    await turn()
    expect(two.core.get(id)).toBeUndefined()
    await Effect.runPromise(two.share.sync)
    expect(two.core.get(id)).toMatchObject({
      id,
      status: "in-flight",
      source: "http-proxy",
      requestBody: null,
      llm: { model: "gpt-4o-mini" }
    })
    one.core.sink.end(id, {
      status: 200,
      headers: { "content-type": "application/json" },
      body: Buffer.from(
        JSON.stringify({
          model: "gpt-4o-mini",
          choices: [{ message: { role: "assistant", content: "hello" } }],
          usage: { prompt_tokens: 7, completion_tokens: 2 }
        })
      )
    })
    await turn()
    expect(two.core.get(id)).toMatchObject({ status: 200, llm: { tokensIn: 7, tokensOut: 2 } })
    expect(two.core.entries().map((e) => e.id)).toEqual([id])

    // A feed client on worker 2: worker 1 keeps bodies from now on, and worker 2 gets them.
    expect(one.core.wantsBodies()).toBe(false)
    const events: Array<string> = []
    const unsubscribe = two.core.subscribe((e) => events.push(e.type))
    expect(one.core.wantsBodies()).toBe(true)
    const watched = one.core.sink.begin({
      source: "http-proxy",
      method: "POST",
      url: "https://api.openai.com/v1/chat/completions",
      headers: { "content-type": "application/json" },
      body: chat("watched")
    })
    one.core.sink.end(watched, { status: 200, headers: { "content-type": "application/json" }, body: Buffer.from('{"choices":[]}') })
    await turn()
    expect(two.core.get(watched)?.requestBody?.text).toContain("watched")
    expect(events).toContain("new")
    unsubscribe()
    expect(one.core.wantsBodies()).toBe(false)

    // An annotation made on worker 2 reaches worker 1; a clear on worker 1 empties worker 2.
    two.core.annotate(id, "looked at on worker 2")
    await turn()
    expect(one.core.get(id)?.annotation).toBe("looked at on worker 2")
    one.core.clear()
    await turn()
    expect(two.core.entries()).toEqual([])
    one.share.close()
    two.share.close()
  })

  it("a session started on one worker records the other's entries and is stopped from either; a newcomer learns the sessions and the entries", async () => {
    const cluster = makeMemoryCluster()
    const one = node(cluster, "w1", true)
    const two = node(cluster, "w2", false)
    const session = one.core.startRecording("debugging")
    await turn()
    expect(two.core.recordingViews().map((s) => s.id)).toEqual([session.id])
    const fromTwo = two.core.sink.begin({ source: "http-proxy", method: "GET", url: "http://example.com/a", headers: {} })
    await turn()
    // Recording: bodies are wanted on both (the session is known on both).
    expect(one.core.wantsBodies()).toBe(true)
    expect([...one.core.recordingSession(session.id)!.entries.keys()]).toEqual([fromTwo])
    expect(two.core.renameRecording(session.id, "renamed")).toBe(true)
    await turn()
    expect(one.core.recordingViews()[0]?.name).toBe("renamed")

    // A third worker starting now learns what is recorded and what was seen.
    const three = node(cluster, "w3", false)
    await turn()
    expect(three.core.recordingViews().map((s) => s.id)).toEqual([session.id])
    expect(three.core.entries().map((e) => e.id)).toEqual([fromTwo])

    const stopped = two.core.stopRecording(session.id)
    expect(stopped?.entries.size).toBe(1)
    await turn()
    expect(one.core.recordingViews()).toEqual([])
    expect(three.core.recordingViews()).toEqual([])
    for (const n of [one, two, three]) n.share.close()
  })

  it("a session stopped through one worker reads as saved through the other before that worker hears of the stop", async () => {
    // The database both workers share (the kv table), and worker 1's news of the stop held back.
    const rows = new Map<string, string>()
    const kv: KeyValueShape = {
      get: (ns, k) => Effect.sync(() => Option.fromNullable(rows.get(`${ns}\u0000${k}`))),
      set: (ns, k, v) => Effect.sync(() => void rows.set(`${ns}\u0000${k}`, v)),
      remove: (ns, k) => Effect.sync(() => rows.delete(`${ns}\u0000${k}`)),
      entries: (ns) =>
        Effect.sync(() => [...rows].filter(([k]) => k.startsWith(`${ns}\u0000`)).map(([k, v]) => [k.slice(ns.length + 1), v] as const)),
      clear: () => Effect.sync(() => 0)
    }
    const cluster = makeMemoryCluster()
    const held: Array<() => void> = []
    const slowStops = (shared: SharedStateShape): SharedStateShape => ({
      ...shared,
      channel: (topic, apply, codec) =>
        shared.channel(topic, (m: any) => (m?.t === "session" && m.op === "stop" ? held.push(() => apply(m)) : apply(m)), codec)
    })
    const worker = (self: string, shared: SharedStateShape) => {
      const config = { ...inspectorDefaults("/tmp/unused"), bufferSize: 5 }
      const core = makeInspector({ config })
      const share = joinNode(core, shared, { topic: "inspector:test", holdsCapture: self === "w1", self })
      return { core, share, inspector: Inspector.make(core, config, kv, share) }
    }
    const one = worker("w1", slowStops(cluster.join()))
    const two = worker("w2", cluster.join())
    await turn()
    const session = await Effect.runPromise(one.inspector.sessions.start("both"))
    await turn()
    two.core.sink.begin({ source: "http-proxy", method: "GET", url: "http://example.com/c", headers: {} })
    await turn()
    const stopped = await Effect.runPromise(two.inspector.sessions.stop(session.id))
    expect(stopped).toMatchObject({ state: "saved", count: 1 })
    // Worker 1 still records it in memory, but what it answers is the saved session.
    expect(one.core.recordingSession(session.id)).toBeDefined()
    expect((await Effect.runPromise(one.inspector.sessions.get(session.id))).meta).toMatchObject({ state: "saved", count: 1 })
    expect(await Effect.runPromise(one.inspector.sessions.list)).toEqual([expect.objectContaining({ id: session.id, state: "saved" })])
    expect(await Effect.runPromise(one.inspector.sessions.rename(session.id, "kept"))).toMatchObject({ state: "saved", name: "kept" })
    expect((await Effect.runPromise(two.inspector.sessions.get(session.id))).meta.name).toBe("kept")
    const again = await Effect.runPromise(Effect.flip(one.inspector.sessions.stop(session.id)))
    expect(again).toMatchObject({ status: 409 })
    expect(one.core.recordingSession(session.id)).toBeUndefined()
    for (const f of held.splice(0)) f()
    expect(one.core.recordingViews()).toEqual([])
    one.share.close()
    two.share.close()
  })

  it("sync: an entry another worker has not sent yet is here when the sync completes; a worker that stopped answering is waited for once, then forgotten", async () => {
    const cluster = makeMemoryCluster()
    const one = node(cluster, "w1", true)
    const two = node(cluster, "w2", false)
    await turn()
    const session = one.core.startRecording("both")
    await turn()
    // Served on worker 2 and ended in this very turn: not sent yet when worker 1 is asked to stop.
    const fromTwo = two.core.sink.begin({ source: "http-proxy", method: "GET", url: "http://example.com/b", headers: {} })
    two.core.sink.end(fromTwo, { status: 204, headers: {} })
    expect(one.core.get(fromTwo)).toBeUndefined()
    await Effect.runPromise(one.share.sync)
    expect(one.core.get(fromTwo)).toMatchObject({ status: 204 })
    expect(one.core.stopRecording(session.id)?.entries.size).toBe(1)

    // Worker 2 stops answering: the next sync waits for it (bounded), the one after does not.
    two.share.close()
    const started = Date.now()
    await Effect.runPromise(one.share.sync)
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_900)
    const again = Date.now()
    await Effect.runPromise(one.share.sync)
    expect(Date.now() - again).toBeLessThan(1_000)
    one.share.close()
  })

  it("a call on the capture listeners runs on the worker holding them; its failure comes back tagged; with none answering it fails as unavailable", async () => {
    const cluster = makeMemoryCluster()
    const one = node(cluster, "w1", true)
    const two = node(cluster, "w2", false)
    const seen: Array<[string, unknown]> = []
    one.share.serve(async (op, args) => {
      seen.push([op, args])
      return op === "httpProxy" ? { value: { running: true } } : { failure: { tag: "Conflict", message: "port 8080 is already in use" } }
    })
    expect(await Effect.runPromise(two.share.call("httpProxy", "start"))).toEqual({ running: true })
    expect(await Effect.runPromise(Effect.flip(two.share.call("systemProxy", "apply")))).toEqual({
      tag: "Conflict",
      message: "port 8080 is already in use"
    })
    expect(seen).toEqual([
      ["httpProxy", "start"],
      ["systemProxy", "apply"]
    ])

    // A cluster where nobody holds the listeners: the call ends unavailable (after CALL_TIMEOUT; here, on close).
    const lonely = makeMemoryCluster()
    const alone = node(lonely, "w2", false)
    const pending = Effect.runPromise(Effect.flip(alone.share.call("modes", null)))
    await turn()
    alone.share.close()
    expect(await pending).toMatchObject({ tag: "Unavailable" })
    one.share.close()
    two.share.close()
  })
})
