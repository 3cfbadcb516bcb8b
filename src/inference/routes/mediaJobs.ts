/**
 * Video and music generation as jobs: submitted through `runMedia`, polled, downloaded through the gateway; a job is seen only by
 * the API key that created it (docs/media.md, "Video and music (jobs)").
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import type { Readable } from "node:stream"
import { formatCost } from "../../services/accounting/cost.js"
import { str } from "../../upstream/formats/common.js"
import { RequestDecodeError } from "../../upstream/formats/format.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import { boolean, checkParams, either, integer, invalidParam, oneOf, type Param, params, string } from "../../upstream/formats/params.js"
import {
  audioSeconds,
  isFinal,
  type JobFamily,
  type JobKind,
  musicFamily,
  type MusicInput,
  musicSubmit,
  OPENAI_DEFAULT_SECONDS,
  readMusic,
  readVideoSubmit,
  type UpstreamState,
  VEO_DEFAULT_SECONDS,
  videoFamily,
  type VideoInput,
  videoSubmit
} from "../media/jobFamilies.js"
import { JOB_ID, jobEndpoint, type JobContent, type MediaJob, type MediaJobsShape } from "../media/MediaJobs.js"
import { badAnswer, does, headerValue, mediaBytes, type MediaOutcome, runMedia, sendMedia } from "../media/run.js"
import type { Candidate } from "../../services/routing/types.js"
import type { AttemptFailed } from "../../kernel/attempts.js"
import type { InferenceShape } from "../call.js"
import { badRequest, InferenceError, tryDecode } from "../../kernel/errors.js"
import type { AttemptRequest } from "../fallback.js"
import { clientGone, type HttpRequestContext, relayBytes, requestHeader, responseHeaders, sendJson, withJsonObject } from "../io.js"
import type { RouteDeps } from "./openai.js"
import type { RouteDef } from "./types.js"

/** The longest a submission may be held for its job (`wait`, `Prefer: wait=N`), in seconds. */
export const MAX_WAIT_SECONDS = 300
/** `"wait": true`. */
export const DEFAULT_WAIT_SECONDS = 60

// ---------------------------------------------------------------- input

const nonEmpty = (body: Record<string, unknown>, key: string): string => {
  const v = body[key]
  if (typeof v !== "string" || v.trim() === "") throw invalidParam(key, "a non-empty string", v)
  return v
}

type Rule = Omit<Param, "key">

const positiveSeconds: Rule = {
  expected: "a positive integer number of seconds (or its decimal string)",
  ok: (v) => (typeof v === "number" ? Number.isInteger(v) && v > 0 && v <= 600 : typeof v === "string" && /^[1-9]\d{0,2}$/.test(v))
}
const SIZE: Rule = {
  expected: 'a size "WIDTHxHEIGHT" such as "1280x720"',
  ok: (v: unknown) => typeof v === "string" && /^[1-9]\d{1,4}x[1-9]\d{1,4}$/.test(v)
}
const WAIT = either(boolean, integer(0, MAX_WAIT_SECONDS))

const VIDEO_PARAMS = params({
  seconds: positiveSeconds,
  size: SIZE,
  aspect_ratio: oneOf("16:9", "9:16"),
  resolution: oneOf("720p", "1080p", "4k"),
  negative_prompt: string,
  wait: WAIT
})

const MUSIC_PARAMS = params({
  duration: {
    expected: "a number of seconds between 3 and 600",
    ok: (v) => typeof v === "number" && Number.isFinite(v) && v >= 3 && v <= 600
  },
  music_length_ms: integer(3000, 600_000),
  instrumental: boolean,
  force_instrumental: boolean,
  negative_prompt: string,
  wait: WAIT
})

interface Submission<I> {
  readonly model: string
  readonly input: I
}

const decodeVideo = (body: Record<string, unknown>): Submission<VideoInput> => {
  const model = nonEmpty(body, "model")
  const prompt = nonEmpty(body, "prompt")
  checkParams(body, VIDEO_PARAMS)
  const seconds = body["seconds"] === undefined || body["seconds"] === null ? undefined : Number(body["seconds"])
  const input: VideoInput = {
    prompt,
    ...(seconds !== undefined ? { seconds } : {}),
    ...(str(body["size"]) ? { size: str(body["size"])! } : {}),
    ...(str(body["aspect_ratio"]) ? { aspectRatio: str(body["aspect_ratio"]) as "16:9" | "9:16" } : {}),
    ...(str(body["resolution"]) ? { resolution: str(body["resolution"]) as "720p" | "1080p" | "4k" } : {}),
    ...(str(body["negative_prompt"]) ? { negativePrompt: str(body["negative_prompt"])! } : {})
  }
  return { model, input }
}

const decodeMusic = (body: Record<string, unknown>): Submission<MusicInput> => {
  const model = nonEmpty(body, "model")
  const prompt = nonEmpty(body, "prompt")
  checkParams(body, MUSIC_PARAMS)
  const duration = typeof body["duration"] === "number" ? body["duration"] : undefined
  const ms = typeof body["music_length_ms"] === "number" ? body["music_length_ms"] : undefined
  if (duration !== undefined && ms !== undefined)
    throw new RequestDecodeError("give duration (seconds) or music_length_ms, not both", "duration")
  const instrumental =
    typeof body["instrumental"] === "boolean"
      ? body["instrumental"]
      : typeof body["force_instrumental"] === "boolean"
        ? body["force_instrumental"]
        : undefined
  const lengthMs = ms ?? (duration !== undefined ? Math.round(duration * 1000) : undefined)
  const input: MusicInput = {
    prompt,
    ...(lengthMs !== undefined ? { lengthMs } : {}),
    ...(instrumental !== undefined ? { instrumental } : {}),
    ...(str(body["negative_prompt"]) ? { negativePrompt: str(body["negative_prompt"])! } : {})
  }
  return { model, input }
}

/** How long the client wants the submission held: `wait` in the body, else `Prefer: wait=N` (bounded, RFC 7240). */
const waitSeconds = (ctx: HttpRequestContext, body: Record<string, unknown>): number => {
  const w = body["wait"]
  if (w === true) return DEFAULT_WAIT_SECONDS
  if (typeof w === "number") return w
  if (w === false) return 0
  const prefer = requestHeader(ctx, "prefer")
  const m = prefer ? /(?:^|[,;\s])wait\s*=\s*"?(\d{1,6})"?/i.exec(prefer) : null
  return m ? Math.min(Number(m[1]), MAX_WAIT_SECONDS) : 0
}

// ---------------------------------------------------------------- the tries

interface JobRequest<I> extends AttemptRequest {
  readonly input: I
}

interface Submitted extends MediaOutcome {
  readonly family: JobFamily
  readonly state: UpstreamState
  /** Asked for, or the family's default: what the job is priced by when the upstream does not say. */
  readonly seconds: number
}

interface Composed extends MediaOutcome {
  readonly family: JobFamily
  readonly bytes: Buffer
  readonly contentType: string
  readonly seconds: number | undefined
}

const jsonOf = (bytes: Buffer): unknown => {
  try {
    return JSON.parse(bytes.toString("utf8"))
  } catch {
    return undefined
  }
}

const tryVideo = (
  inference: InferenceShape
): ((request: JobRequest<VideoInput>, c: Candidate) => Effect.Effect<Submitted, AttemptFailed>) =>
  Effect.fnUntraced(function* (request: JobRequest<VideoInput>, c: Candidate) {
    const family = videoFamily(c.connection)!
    const res = yield* sendMedia(inference, request, c, videoSubmit(family, c.model, request.input))
    const state = readVideoSubmit(family, jsonOf(yield* mediaBytes(inference, request, c.connection, res)))
    if (!state) return yield* Effect.fail(badAnswer(request, c.connection, "the answer is not a video job"))
    const seconds = request.input.seconds ?? (family === "veo" ? VEO_DEFAULT_SECONDS : OPENAI_DEFAULT_SECONDS)
    return { status: 200, usage: undefined, ttftMs: null, error: null, headers: headerValue(res.headers), family, state, seconds }
  })

const tryMusic = (inference: InferenceShape): ((request: JobRequest<MusicInput>, c: Candidate) => Effect.Effect<Composed, AttemptFailed>) =>
  Effect.fnUntraced(function* (request: JobRequest<MusicInput>, c: Candidate) {
    const family = musicFamily(c.connection, c.model)!
    const res = yield* sendMedia(inference, request, c, musicSubmit(family, c.model, request.input))
    const type = headerValue(res.headers)["content-type"]
    const result = readMusic(family, yield* mediaBytes(inference, request, c.connection, res), type)
    if (typeof result === "string") return yield* Effect.fail(badAnswer(request, c.connection, result))
    // Seconds of the audio itself; what was asked for only when the audio cannot be read.
    const seconds =
      (yield* Effect.promise(() => audioSeconds(result.bytes, result.contentType))) ??
      (request.input.lengthMs !== undefined ? request.input.lengthMs / 1000 : undefined)
    return {
      status: 200,
      usage: undefined,
      ttftMs: null,
      error: null,
      headers: headerValue(res.headers),
      ...(seconds !== undefined ? { units: { seconds } } : {}),
      family,
      bytes: result.bytes,
      contentType: result.contentType,
      seconds
    }
  })

// ---------------------------------------------------------------- answers

const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000))

const jobPath = (job: MediaJob): string => `/v1/${job.kind === "video" ? "videos" : "music"}/generations/${job.id}`

/** The gateway's job object. */
export const jobObject = (job: MediaJob) => ({
  id: job.id,
  object: job.kind === "video" ? "video.generation" : "music.generation",
  model: job.model,
  status: job.status,
  progress: job.progress,
  created_at: seconds(job.createdAt),
  completed_at: seconds(job.completedAt),
  expires_at: seconds(job.expiresAt),
  seconds: job.seconds,
  ...(job.kind === "video" ? { size: job.size } : {}),
  content_type: job.status === "completed" ? job.resultType : null,
  ...(job.resultBytes !== null ? { bytes: job.resultBytes } : {}),
  error: job.error,
  content_url: job.status === "completed" ? `${jobPath(job)}/content` : null
})

/** The cost telemetry of a job answer: the job's cost as its usage row recorded it (0 until it completed). */
const jobHeaders = (ctx: HttpRequestContext, job: MediaJob): void => {
  const h = ctx.responseHeaders
  h["x-gateway-response-cost"] = formatCost(job.costUsd ?? 0)
  h["x-gateway-tokens-in"] = "0"
  h["x-gateway-tokens-out"] = "0"
  h["x-gateway-model"] = job.model
  h["x-gateway-provider"] = job.provider
  h["x-gateway-latency-ms"] = String(Date.now() - ctx.startedAt)
  h["x-gateway-cache-hit"] = "false"
}

/** A submission answers 202 (and where to poll) while its job runs, 200 once it finished; a poll always 200. */
const answerJob = (ctx: HttpRequestContext, job: MediaJob, submitted: boolean, extra: Record<string, string> = {}): void => {
  jobHeaders(ctx, job)
  const running = submitted && !isFinal(job.status)
  sendJson(ctx, running ? 202 : 200, jobObject(job), running ? { location: jobPath(job), ...extra } : extra)
}

// ---------------------------------------------------------------- handlers

const submitVideo = (deps: RouteDeps, jobs: MediaJobsShape) => {
  const attempt = tryVideo(deps.inference)
  const submit = Effect.fnUntraced(function* (ctx: HttpRequestContext, body: Record<string, unknown>) {
    const { model, input } = yield* tryDecode(openAiChat, () => decodeVideo(body))
    const wait = waitSeconds(ctx, body)
    const served = yield* runMedia(deps.inference, deps.accounting, {
      ctx,
      client: openAiChat,
      model,
      endpoint: jobEndpoint("video"),
      what: "video generation",
      able: (c) => does("video")(c) && videoFamily(c.connection) !== undefined,
      request: { ctx, format: openAiChat, model, input },
      attempt
    })
    const { family, state } = served.outcome
    let job = yield* jobs.create({
      kind: "video",
      apiKeyId: ctx.apiKeyId,
      requestId: ctx.requestId,
      requestedModel: model,
      candidate: served.candidate,
      family,
      state,
      seconds: served.outcome.seconds,
      ...(input.size ? { size: input.size } : {})
    })
    if (wait > 0 && !isFinal(job.status)) job = yield* jobs.wait(job, wait * 1000)
    answerJob(ctx, job, true, wait > 0 ? { "preference-applied": `wait=${wait}` } : {})
  })
  return (ctx: HttpRequestContext) => withJsonObject(ctx, (body) => submit(ctx, body))
}

const submitMusic = (deps: RouteDeps, jobs: MediaJobsShape) => {
  const attempt = tryMusic(deps.inference)
  const submit = Effect.fnUntraced(function* (ctx: HttpRequestContext, body: Record<string, unknown>) {
    const { model, input } = yield* tryDecode(openAiChat, () => decodeMusic(body))
    const served = yield* runMedia(deps.inference, deps.accounting, {
      ctx,
      client: openAiChat,
      model,
      endpoint: jobEndpoint("music"),
      what: "music generation",
      able: (c) => does("music")(c) && musicFamily(c.connection, c.model) !== undefined,
      request: { ctx, format: openAiChat, model, input },
      attempt
    })
    const o = served.outcome
    // The upstreams answer the audio at once: the job is completed, its submission row the priced one.
    const job = yield* jobs.create({
      kind: "music",
      apiKeyId: ctx.apiKeyId,
      requestId: ctx.requestId,
      requestedModel: model,
      candidate: served.candidate,
      family: o.family,
      state: { status: "completed", progress: 100 },
      result: {
        bytes: o.bytes,
        contentType: o.contentType,
        ...(o.seconds !== undefined ? { seconds: o.seconds } : {}),
        costUsd: served.costUsd
      }
    })
    answerJob(ctx, job, true)
  })
  return (ctx: HttpRequestContext) => withJsonObject(ctx, (body) => submit(ctx, body))
}

const PREFIX: Record<JobKind, string> = { video: "vid_", music: "mus_" }

/** The caller's job from the path, or a 400 (not a job id of this kind) / 404 (none such for this key). */
const ownJob = Effect.fnUntraced(function* (jobs: MediaJobsShape, kind: JobKind, ctx: HttpRequestContext, id: string) {
  if (!JOB_ID.test(id) || !id.startsWith(PREFIX[kind])) {
    return yield* badRequest(
      `'${id.slice(0, 80)}' is not a ${kind} job id (expected ${PREFIX[kind]} and 32 hex digits)`,
      "id",
      "invalid_job_id"
    )
  }
  const job = yield* jobs.find(kind, id, ctx.apiKeyId)
  if (!job)
    return yield* new InferenceError({
      status: 404,
      kind: "not_found",
      code: "job_not_found",
      message: `no ${kind} job '${id}' for this API key`,
      param: "id"
    })
  return job
})

const getJob = (jobs: MediaJobsShape, kind: JobKind) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const job = yield* jobs.refresh(yield* ownJob(jobs, kind, ctx, params["id"] ?? ""))
    answerJob(ctx, job, false)
  })

const getContent = (jobs: MediaJobsShape, kind: JobKind) =>
  Effect.fnUntraced(function* (ctx: HttpRequestContext, params: Readonly<Record<string, string>>) {
    const job = yield* jobs.refresh(yield* ownJob(jobs, kind, ctx, params["id"] ?? ""))
    if (job.status !== "completed") {
      const why =
        job.status === "failed" ? `it failed: ${job.error?.message ?? "no reason given"}` : `it is ${job.status} (${job.progress}%)`
      return yield* new InferenceError({
        status: 409,
        kind: "invalid_request",
        code: "job_not_completed",
        message: `job ${job.id} has no content: ${why}`,
        param: "id"
      })
    }
    const source = yield* jobs.content(job, clientGone(ctx))
    jobHeaders(ctx, job)
    yield* relay(ctx, source)
  })

/** The content's bytes, written as they arrive (backpressure from the client); a source that breaks off cuts the answer short. */
const relay = (ctx: HttpRequestContext, source: JobContent): Effect.Effect<void> => {
  const length = source._tag === "file" ? source.size : Number(headerValue(source.response.headers)["content-length"] ?? NaN)
  const readable: Readable = source._tag === "file" ? fs.createReadStream(source.path) : (source.response.body as unknown as Readable)
  return relayBytes(
    ctx,
    readable,
    responseHeaders(ctx, {
      "content-type": source.contentType,
      ...(Number.isFinite(length) ? { "content-length": length } : {}),
      "cache-control": "private, no-store"
    }),
    "the content"
  )
}

/** The video and music job routes. */
export const mediaJobRoutes = (deps: RouteDeps, jobs: MediaJobsShape): ReadonlyArray<RouteDef> => [
  { method: "POST", path: "/v1/videos/generations", format: openAiChat, handle: submitVideo(deps, jobs) },
  { method: "GET", path: /^\/v1\/videos\/generations\/(?<id>[^/]+)$/, format: openAiChat, handle: getJob(jobs, "video") },
  { method: "GET", path: /^\/v1\/videos\/generations\/(?<id>[^/]+)\/content$/, format: openAiChat, handle: getContent(jobs, "video") },
  { method: "POST", path: "/v1/music/generations", format: openAiChat, handle: submitMusic(deps, jobs) },
  { method: "GET", path: /^\/v1\/music\/generations\/(?<id>[^/]+)$/, format: openAiChat, handle: getJob(jobs, "music") },
  { method: "GET", path: /^\/v1\/music\/generations\/(?<id>[^/]+)\/content$/, format: openAiChat, handle: getContent(jobs, "music") }
]
