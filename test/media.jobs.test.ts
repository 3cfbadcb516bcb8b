import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { FakeJobs } from "./support/fakeJobs.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"

/**
 * Video and music generation as jobs (docs/media.md, "Video and music (jobs)"), through raw HTTP
 * as the client (the openai SDK has no method for these routes): OpenAI videos and Gemini Veo
 * (asynchronous upstreams polled until done), ElevenLabs music and Lyria (synchronous: the job is
 * completed at once). Fake upstreams on 127.0.0.1 speak the families' wire shapes; the audio is
 * real MP3 and WAV made here, measured by the gateway from the bytes.
 */
const ADMIN = "gwk_jobs_admin_key_0123456789abcdef"
const KEY_A = "gwk_jobs_key_a_0123456789abcdef0123"
const KEY_B = "gwk_jobs_key_b_0123456789abcdef0123"
const admin = { authorization: `Bearer ${ADMIN}` }
const asA = { authorization: `Bearer ${KEY_A}` }
const asB = { authorization: `Bearer ${KEY_B}` }

let gw: TestGateway
let sweeper: TestGateway
let fake: FakeJobs
let down: FakeJobs
let keyA: string

const flush = (g: TestGateway) => g.usageWritten()
const rows = async (requestId: string | null, g: TestGateway = gw) => {
  await flush(g)
  return queryDb(
    g.dataDir,
    "SELECT endpoint, status, cost_usd, api_key_id, provider, model, requested_model, error, fallback_attempts FROM usage WHERE request_id = ? ORDER BY id",
    requestId
  )
}

const submit = (kind: "videos" | "music", body: Record<string, unknown>, headers: Record<string, string> = asA, g: TestGateway = gw) =>
  call(`${g.url}/v1/${kind}/generations`, { body, headers })
const poll = (kind: "videos" | "music", id: string, headers: Record<string, string> = asA, g: TestGateway = gw) =>
  call(`${g.url}/v1/${kind}/generations/${id}`, { headers })
const content = async (kind: "videos" | "music", id: string, headers: Record<string, string> = asA) => {
  const res = await fetch(`${gw.url}/v1/${kind}/generations/${id}/content`, { headers })
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) }
}
/** Polls the job until it is final (at most `max` polls); answers every poll's status in order and the last answer. */
const pollUntilDone = async (kind: "videos" | "music", id: string, max = 10) => {
  const seen: Array<string> = []
  for (let i = 0; i < max; i++) {
    const r = await poll(kind, id)
    expect(r.status, r.text).toBe(200)
    seen.push(r.body.status)
    if (r.body.status === "completed" || r.body.status === "failed") return { seen, last: r }
  }
  throw new Error(`job ${id} did not finish: ${seen.join(", ")}`)
}

const addProviders = async (g: TestGateway) => {
  await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "admin", scopes: ["admin"] }, { secret: ADMIN })))
  const a = await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "a" }, { secret: KEY_A })))
  await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "b" }, { secret: KEY_B })))
  const add = async (body: Record<string, unknown>) => {
    const res = await call(`${g.url}/api/providers`, { body, headers: admin })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await add({ provider: "openai", name: "oai", apiKey: "sk-video", baseUrl: `${fake.url}/v1`, models: ["sora-2", "gpt-4o"] })
  await add({ provider: "openai", name: "oai-down", apiKey: "sk-video", baseUrl: `${down.url}/v1`, models: ["sora-2"] })
  await add({
    provider: "gemini",
    name: "goog",
    apiKey: "gemini-key",
    baseUrl: fake.url,
    models: ["veo-3.1-generate-preview", "lyria-002", "lyria-3-clip-preview"]
  })
  await add({ provider: "elevenlabs", name: "eleven", apiKey: "eleven-key", baseUrl: fake.url, models: ["music_v1"] })
  await add({ provider: "elevenlabs", name: "eleven-down", apiKey: "eleven-key", baseUrl: down.url, models: ["music_v1"] })
  const combo = async (name: string, targets: Array<string>) => {
    const res = await call(`${g.url}/api/combos`, {
      body: { name, strategy: "priority", targets: targets.map((model) => ({ model })) },
      headers: admin
    })
    expect(res.status, JSON.stringify(res.body)).toBe(201)
  }
  await combo("video-team", ["oai-down/sora-2", "oai/sora-2"])
  await combo("music-team", ["eleven-down/music_v1", "eleven/music_v1"])
  return a.id
}

beforeAll(async () => {
  fake = await FakeJobs.start()
  down = await FakeJobs.start()
  down.down = true
  // The main gateway's sweep runs once at start and then not for 10 minutes: polls are the tests'.
  gw = await startGateway({ env: { GATEWAY_MEDIA_JOB_POLL_MS: "600000" } })
  keyA = await addProviders(gw)
  sweeper = await startGateway({ env: { GATEWAY_MEDIA_JOB_POLL_MS: "100" } })
  await addProviders(sweeper)
})
afterAll(async () => {
  await gw?.close()
  await sweeper?.close()
  await fake?.close()
  await down?.close()
})
beforeEach(async () => {
  await gw.resetResilience()
  fake.pollsToFinish = 2
  fake.failJobs = false
})

describe("video jobs: OpenAI videos API", () => {
  it("submits (202, queued), polls queued → in_progress → completed, downloads the bytes, and writes the per-second cost once, at completion", async () => {
    const sub = await submit("videos", { model: "oai/sora-2", prompt: "a cat surfing", seconds: 8, size: "1280x720" })
    expect(sub.status, sub.text).toBe(202)
    expect(sub.body).toMatchObject({
      object: "video.generation",
      model: "sora-2",
      status: "queued",
      progress: 0,
      seconds: 8,
      size: "1280x720",
      error: null,
      content_url: null
    })
    const id: string = sub.body.id
    expect(id).toMatch(/^vid_[0-9a-f]{32}$/)
    expect(sub.headers.get("location")).toBe(`/v1/videos/generations/${id}`)
    expect(sub.headers.get("x-gateway-response-cost")).toBe("0.0000000000")
    expect(sub.headers.get("x-gateway-model")).toBe("sora-2")
    expect(sub.headers.get("x-gateway-provider")).toBe("openai")
    // What the upstream got: the videos API's JSON body (seconds as a string), its key.
    const created = fake.requests.filter((r) => r.method === "POST" && r.path === "/v1/videos").at(-1)!
    expect(created.body).toEqual({ model: "sora-2", prompt: "a cat surfing", seconds: "8", size: "1280x720" })
    expect(created.headers.authorization).toBe("Bearer sk-video")
    // The submission's own row: no cost yet.
    expect(await rows(sub.headers.get("x-gateway-request-id"))).toEqual([
      expect.objectContaining({
        endpoint: "videos.generations",
        status: 200,
        cost_usd: 0,
        api_key_id: keyA,
        provider: "openai",
        model: "sora-2",
        requested_model: "oai/sora-2"
      })
    ])
    expect(await rows(id)).toEqual([])

    const { seen, last } = await pollUntilDone("videos", id)
    expect(seen).toEqual(["in_progress", "completed"])
    expect(last.body).toMatchObject({
      id,
      status: "completed",
      progress: 100,
      seconds: 8,
      content_type: "video/mp4",
      content_url: `/v1/videos/generations/${id}/content`
    })
    expect(last.headers.get("x-gateway-response-cost")).toBe("0.8000000000")
    expect(last.headers.get("x-gateway-tokens-in")).toBe("0")
    expect(last.headers.get("x-gateway-tokens-out")).toBe("0")

    // A finished job is not asked about again; its row is written once.
    const upstreamId =
      created &&
      fake.requests
        .filter((r) => r.path.startsWith("/v1/videos/video_"))
        .at(-1)!
        .path.split("/")[3]!
    const polls = fake.hits(new RegExp(`^GET /v1/videos/${upstreamId}$`))
    expect((await poll("videos", id)).body.status).toBe("completed")
    expect(fake.hits(new RegExp(`^GET /v1/videos/${upstreamId}$`))).toBe(polls)
    expect(await rows(id)).toEqual([
      {
        endpoint: "videos.generations:job",
        status: 200,
        cost_usd: 0.8,
        api_key_id: keyA,
        provider: "openai",
        model: "sora-2",
        requested_model: "oai/sora-2",
        error: null,
        fallback_attempts: 0
      }
    ])

    const got = await content("videos", id)
    expect(got.status).toBe(200)
    expect(got.headers.get("content-type")).toBe("video/mp4")
    expect(got.headers.get("x-gateway-response-cost")).toBe("0.8000000000")
    expect(got.bytes.equals(fake.contents.get(upstreamId)!)).toBe(true)
    expect(got.bytes.subarray(4, 8).toString("ascii")).toBe("ftyp")
  })

  it("concurrent polls of a finishing job write its usage row exactly once", async () => {
    fake.pollsToFinish = 1
    const sub = await submit("videos", { model: "oai/sora-2", prompt: "rain on a window", seconds: 4 })
    expect(sub.status).toBe(202)
    const answers = await Promise.all(Array.from({ length: 8 }, () => poll("videos", sub.body.id)))
    for (const a of answers) expect(a.body.status).toBe("completed")
    expect(await rows(sub.body.id)).toEqual([expect.objectContaining({ endpoint: "videos.generations:job", status: 200, cost_usd: 0.4 })])
  })

  it('"wait" holds the submission until the job finished: 200 with the completed job and its cost', async () => {
    const sub = await submit("videos", { model: "oai/sora-2", prompt: "a lighthouse at dusk", seconds: 12, wait: 20 })
    expect(sub.status, sub.text).toBe(200)
    expect(sub.body).toMatchObject({
      status: "completed",
      progress: 100,
      seconds: 12,
      content_url: `/v1/videos/generations/${sub.body.id}/content`
    })
    expect(sub.headers.get("preference-applied")).toBe("wait=20")
    expect(sub.headers.get("x-gateway-response-cost")).toBe("1.2000000000")
    expect(sub.headers.get("location")).toBeNull()
    const [row] = await rows(sub.body.id)
    expect(row).toMatchObject({ endpoint: "videos.generations:job", status: 200 })
    expect(row!.cost_usd).toBeCloseTo(1.2, 10)
  })

  it("a job another API key created is not found (404), nor without a key; a malformed id is a 400 naming it", async () => {
    const sub = await submit("videos", { model: "oai/sora-2", prompt: "mine" })
    const id: string = sub.body.id
    const other = await poll("videos", id, asB)
    expect(other.status).toBe(404)
    expect(other.body.error).toMatchObject({ code: "job_not_found" })
    expect((await poll("videos", id, {})).status).toBe(404)
    expect((await content("videos", id, asB)).status).toBe(404)
    // Its own key still sees it; a music path does not know a video id.
    expect((await poll("videos", id)).status).toBe(200)
    const wrongKind = await poll("music", id)
    expect(wrongKind.status).toBe(400)
    expect(wrongKind.body.error).toMatchObject({ param: "id", code: "invalid_job_id" })
    const bad = await poll("videos", "not-a-job")
    expect(bad.status).toBe(400)
    expect(bad.body.error.message).toContain("not-a-job")
    const unknown = await poll("videos", `vid_${"0".repeat(32)}`)
    expect(unknown.status).toBe(404)
  })

  it("a job the upstream fails is failed with its error, costs nothing, and has no content", async () => {
    fake.failJobs = true
    const sub = await submit("videos", { model: "oai/sora-2", prompt: "something blocked" })
    const { seen, last } = await pollUntilDone("videos", sub.body.id)
    expect(seen.at(-1)).toBe("failed")
    expect(last.body.error).toEqual({ code: "moderation_blocked", message: "Your request was blocked by our moderation system." })
    expect(last.body.content_url).toBeNull()
    expect(last.headers.get("x-gateway-response-cost")).toBe("0.0000000000")
    const [row] = await rows(sub.body.id)
    expect(row).toMatchObject({ endpoint: "videos.generations:job", status: 502, cost_usd: 0 })
    expect(row!.error).toContain("moderation_blocked")
    const got = await content("videos", sub.body.id)
    expect(got.status).toBe(409)
    expect(JSON.parse(got.bytes.toString()).error).toMatchObject({ code: "job_not_completed" })
  })

  it("falls back at submission: the combo's first connection answers 503, the second takes the job", async () => {
    const before = down.hits(/^POST \/v1\/videos$/)
    const sub = await submit("videos", { model: "video-team", prompt: "a fox in snow", seconds: 4 })
    expect(sub.status, sub.text).toBe(202)
    expect(sub.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(down.hits(/^POST \/v1\/videos$/)).toBe(before + 1)
    const [row] = await rows(sub.headers.get("x-gateway-request-id"))
    expect(row).toMatchObject({ endpoint: "videos.generations", status: 200, fallback_attempts: 1, requested_model: "video-team" })
    const { last } = await pollUntilDone("videos", sub.body.id)
    expect(last.body.status).toBe("completed")
    expect(await rows(sub.body.id)).toEqual([expect.objectContaining({ cost_usd: 0.4, requested_model: "video-team" })])
  })
})

describe("video jobs: Gemini Veo operations", () => {
  it("maps the request to predictLongRunning, polls the operation, relays the video (key on its own origin, not after the redirect), cost per second asked", async () => {
    const sub = await submit("videos", {
      model: "goog/veo-3.1-generate-preview",
      prompt: "a hummingbird in slow motion",
      seconds: 6,
      size: "1920x1080",
      negative_prompt: "cartoon"
    })
    expect(sub.status, sub.text).toBe(202)
    expect(sub.body).toMatchObject({ status: "queued", seconds: 6, model: "veo-3.1-generate-preview" })
    const started = fake.requests.filter((r) => r.path.endsWith(":predictLongRunning")).at(-1)!
    expect(started.path).toBe("/v1beta/models/veo-3.1-generate-preview:predictLongRunning")
    expect(started.body).toEqual({
      instances: [{ prompt: "a hummingbird in slow motion" }],
      parameters: { aspectRatio: "16:9", resolution: "1080p", sampleCount: 1, durationSeconds: 6, negativePrompt: "cartoon" }
    })
    const { seen, last } = await pollUntilDone("videos", sub.body.id)
    expect(seen).toEqual(["in_progress", "completed"])
    expect(last.headers.get("x-gateway-response-cost")).toBe("2.4000000000")
    expect(last.headers.get("x-gateway-provider")).toBe("gemini")
    // The client never sees the upstream's URL.
    expect(last.text).not.toContain(fake.url)
    expect(last.text).not.toContain("operations")

    const got = await content("videos", sub.body.id)
    expect(got.status).toBe(200)
    const file = [...fake.operations.values()].at(-1)!.file
    expect(got.bytes.equals(fake.contents.get(file)!)).toBe(true)
    const download = fake.requests.filter((r) => r.path === `/v1beta/files/${file}:download`).at(-1)!
    expect(download.headers["x-goog-api-key"]).toBe("gemini-key")
    const stored = fake.requests.filter((r) => r.path === `/storage/${file}`).at(-1)!
    expect(stored.headers["x-goog-api-key"]).toBeUndefined()
    const [row, ...more] = await rows(sub.body.id)
    expect(more).toEqual([])
    expect(row).toMatchObject({ endpoint: "videos.generations:job", status: 200, provider: "gemini" })
    expect(row!.cost_usd).toBeCloseTo(2.4, 10)
  })

  it("Prefer: wait=N holds the submission too; a failed operation is a failed job with Gemini's message", async () => {
    const res = await call(`${gw.url}/v1/videos/generations`, {
      body: { model: "goog/veo-3.1-generate-preview", prompt: "waves" },
      headers: { ...asA, prefer: "wait=15" }
    })
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ status: "completed", seconds: 8 })
    expect(res.headers.get("x-gateway-response-cost")).toBe("3.2000000000")

    fake.failJobs = true
    const failed = await call(`${gw.url}/v1/videos/generations`, {
      body: { model: "goog/veo-3.1-generate-preview", prompt: "bad" },
      headers: { ...asA, prefer: "respond-async, wait=15" }
    })
    expect(failed.status).toBe(200)
    expect(failed.body).toMatchObject({
      status: "failed",
      error: { code: "INVALID_ARGUMENT", message: "The prompt could not be processed." }
    })
    expect(await rows(failed.body.id)).toEqual([expect.objectContaining({ status: 502, cost_usd: 0 })])
  })
})

describe("the sweep", () => {
  it("completes a job nobody polls and records its cost", async () => {
    const sub = await submit("videos", { model: "oai/sora-2", prompt: "left alone", seconds: 4 }, asA, sweeper)
    expect(sub.status).toBe(202)
    const id: string = sub.body.id
    let found: Array<Record<string, any>> = []
    for (let i = 0; i < 100 && found.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 50))
      found = await rows(id, sweeper)
    }
    expect(found).toEqual([expect.objectContaining({ endpoint: "videos.generations:job", status: 200, cost_usd: 0.4 })])
    const now = await poll("videos", id, asA, sweeper)
    expect(now.body).toMatchObject({ status: "completed", progress: 100 })
    expect(now.headers.get("x-gateway-response-cost")).toBe("0.4000000000")
  })
})

describe("expiry", () => {
  it("a job is forgotten at its expiry (404, stored content deleted); one still unfinished is recorded as failed (job_expired)", async () => {
    const short = await startGateway({ env: { GATEWAY_MEDIA_JOB_POLL_MS: "100", GATEWAY_MEDIA_JOB_TTL_SECONDS: "1" } })
    try {
      await addProviders(short)
      fake.pollsToFinish = 1_000_000
      const video = await submit("videos", { model: "oai/sora-2", prompt: "never done" }, asA, short)
      expect(video.status).toBe(202)
      const music = await submit("music", { model: "eleven/music_v1", prompt: "short-lived" }, asA, short)
      expect(music.status).toBe(200)
      const stored = path.join(short.dataDir, "media", `${music.body.id}.mp3`)
      expect(fs.existsSync(stored)).toBe(true)
      let gone = false
      for (let i = 0; i < 60 && !gone; i++) {
        await new Promise((r) => setTimeout(r, 100))
        gone = !fs.existsSync(stored) && (await rows(video.body.id, short)).length > 0
      }
      expect(gone).toBe(true)
      expect((await poll("videos", video.body.id, asA, short)).status).toBe(404)
      expect((await poll("music", music.body.id, asA, short)).status).toBe(404)
      const [row] = await rows(video.body.id, short)
      expect(row).toMatchObject({ endpoint: "videos.generations:job", status: 504, cost_usd: 0 })
      expect(row!.error).toContain("job_expired")
    } finally {
      await short.close()
    }
  })
})

describe("music jobs", () => {
  it("ElevenLabs: the audio comes back at once, the job is completed, priced per second measured from the MP3; content bytes equal", async () => {
    const price = await call(`${gw.url}/api/pricing`, {
      method: "PUT",
      body: { provider: "elevenlabs", model: "music_v1", perSecond: 0.01 },
      headers: admin
    })
    expect(price.status, price.text).toBe(200)
    const sub = await submit("music", {
      model: "eleven/music_v1",
      prompt: "upbeat lo-fi beat with jazzy piano",
      duration: 3,
      instrumental: true
    })
    expect(sub.status, sub.text).toBe(200)
    expect(sub.body).toMatchObject({
      object: "music.generation",
      model: "music_v1",
      status: "completed",
      progress: 100,
      content_type: "audio/mpeg",
      error: null
    })
    expect(sub.body.id).toMatch(/^mus_[0-9a-f]{32}$/)
    const sent = fake.requests.filter((r) => r.path === "/v1/music").at(-1)!
    expect(sent.query.get("output_format")).toBe("mp3_44100_128")
    expect(sent.headers["xi-api-key"]).toBe("eleven-key")
    expect(sent.body).toEqual({
      prompt: "upbeat lo-fi beat with jazzy piano",
      model_id: "music_v1",
      music_length_ms: 3000,
      force_instrumental: true
    })
    const audio = fake.audio.at(-1)!
    expect(sub.body.bytes).toBe(audio.length)
    // Seconds read from the MP3 itself (LAME adds a few ms of padding).
    expect(sub.body.seconds).toBeGreaterThan(2.95)
    expect(sub.body.seconds).toBeLessThan(3.15)
    const cost = sub.body.seconds * 0.01
    expect(sub.headers.get("x-gateway-response-cost")).toBe(cost.toFixed(10))
    // One row, the submission's, priced: the job was complete when it was written.
    const all = await rows(sub.headers.get("x-gateway-request-id"))
    expect(all).toHaveLength(1)
    expect(all[0]).toMatchObject({ endpoint: "music.generations", status: 200, api_key_id: keyA, provider: "elevenlabs" })
    expect(all[0]!.cost_usd).toBeCloseTo(cost, 10)
    expect(await rows(sub.body.id)).toEqual([])

    const job = await poll("music", sub.body.id)
    expect(job.body).toMatchObject({ id: sub.body.id, status: "completed" })
    const got = await content("music", sub.body.id)
    expect(got.status).toBe(200)
    expect(got.headers.get("content-type")).toBe("audio/mpeg")
    expect(got.bytes.equals(audio)).toBe(true)
    expect((await content("music", sub.body.id, asB)).status).toBe(404)
  })

  it("Lyria 2 (:predict): the WAV in predictions[0] is stored and measured (2 s × $0.002)", async () => {
    const sub = await submit("music", { model: "goog/lyria-002", prompt: "energetic EDM", negative_prompt: "vocals" })
    expect(sub.status, sub.text).toBe(200)
    expect(sub.body).toMatchObject({ status: "completed", seconds: 2, content_type: "audio/wav" })
    expect(sub.headers.get("x-gateway-response-cost")).toBe("0.0040000000")
    const sent = fake.requests.filter((r) => r.path === "/v1beta/models/lyria-002:predict").at(-1)!
    expect(sent.body).toEqual({ instances: [{ prompt: "energetic EDM", negative_prompt: "vocals" }], parameters: { sample_count: 1 } })
    const got = await content("music", sub.body.id)
    expect(got.bytes.equals(fake.audio.at(-1)!)).toBe(true)
    expect(got.bytes.subarray(0, 4).toString("ascii")).toBe("RIFF")
  })

  it("Lyria 3 (generateContent): the audio part of the answer, priced per second of the clip", async () => {
    const sub = await submit("music", { model: "goog/lyria-3-clip-preview", prompt: "cheerful acoustic folk" })
    expect(sub.status, sub.text).toBe(200)
    expect(sub.body).toMatchObject({ status: "completed", content_type: "audio/mpeg" })
    expect(sub.body.seconds).toBeGreaterThan(2.95)
    expect(sub.headers.get("x-gateway-response-cost")).toBe(((sub.body.seconds * 0.04) / 30).toFixed(10))
    const sent = fake.requests.filter((r) => r.path === "/v1beta/models/lyria-3-clip-preview:generateContent").at(-1)!
    expect(sent.body.generationConfig.responseModalities).toEqual(["AUDIO", "TEXT"])
    expect((await content("music", sub.body.id)).bytes.equals(fake.audio.at(-1)!)).toBe(true)
  })

  it("falls back at submission: the first ElevenLabs connection answers 503", async () => {
    const sub = await submit("music", { model: "music-team", prompt: "a march" })
    expect(sub.status, sub.text).toBe(200)
    expect(sub.headers.get("x-gateway-fallback-attempts")).toBe("1")
    expect(sub.body.status).toBe("completed")
  })
})

describe("bad input is a 4xx naming the problem", () => {
  const cases: Array<[string, "videos" | "music", Record<string, unknown>, number, string | null]> = [
    ["no prompt", "videos", { model: "oai/sora-2" }, 400, "prompt"],
    ["an empty prompt", "music", { model: "eleven/music_v1", prompt: "  " }, 400, "prompt"],
    ["no model", "videos", { prompt: "x" }, 400, "model"],
    ["seconds that are not a number", "videos", { model: "oai/sora-2", prompt: "x", seconds: "eight" }, 400, "seconds"],
    ["a malformed size", "videos", { model: "oai/sora-2", prompt: "x", size: "big" }, 400, "size"],
    ["an unknown aspect ratio", "videos", { model: "oai/sora-2", prompt: "x", aspect_ratio: "4:3" }, 400, "aspect_ratio"],
    ["a wait past the bound", "videos", { model: "oai/sora-2", prompt: "x", wait: 10_000 }, 400, "wait"],
    [
      "both duration and music_length_ms",
      "music",
      { model: "eleven/music_v1", prompt: "x", duration: 5, music_length_ms: 5000 },
      400,
      "duration"
    ],
    ["a duration out of range", "music", { model: "eleven/music_v1", prompt: "x", duration: 1 }, 400, "duration"],
    ["a chat model", "videos", { model: "oai/gpt-4o", prompt: "x" }, 400, "model"],
    ["a video model for music", "music", { model: "goog/veo-3.1-generate-preview", prompt: "x" }, 400, "model"]
  ]
  for (const [name, kind, body, status, param] of cases) {
    it(`${kind}: ${name}`, async () => {
      const res = await submit(kind, body)
      expect(res.status, res.text).toBe(status)
      expect(res.body.error.param).toBe(param)
      // The message names the field, or the model that cannot do it.
      expect(res.body.error.message).toContain(param === "model" && body["model"] ? String(body["model"]) : param)
    })
  }

  it("an unknown model is a 404 naming it", async () => {
    const res = await submit("videos", { model: "nope/does-not-exist", prompt: "x" })
    expect(res.status).toBe(404)
    expect(res.body.error).toMatchObject({ code: "model_not_found", param: "model" })
    expect(res.body.error.message).toContain("nope/does-not-exist")
  })

  it("a value the upstream refuses comes back as its 400, and no job is made", async () => {
    const res = await submit("videos", { model: "oai/sora-2", prompt: "x", seconds: 5 })
    expect(res.status, res.text).toBe(400)
    expect(res.body.error).toMatchObject({ param: "seconds" })
    expect(res.body.error.message).toContain("Supported values")
    expect(res.body.id).toBeUndefined()
    expect(await rows(res.headers.get("x-gateway-request-id"))).toEqual([
      expect.objectContaining({ endpoint: "videos.generations", status: 400, cost_usd: 0 })
    ])
  })

  it("a body that is not JSON is a 400", async () => {
    const res = await call(`${gw.url}/v1/videos/generations`, {
      body: "{not json",
      headers: { ...asA, "content-type": "application/json" }
    })
    expect(res.status).toBe(400)
  })
})
