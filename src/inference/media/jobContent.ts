/**
 * A completed job's bytes: its stored file, or the upstream's answer (Veo's result URI, OpenAI's
 * content endpoint), relayed unread.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as path from "node:path"
import { clientError } from "../../kernel/errors.js"
import { discardBody, type UpstreamResponse } from "../../upstream/client/UpstreamHttp.js"
import { openAiChat } from "../../upstream/formats/openai-chat.js"
import type { Connection, ConnectionsShape } from "../../upstream/providers/Connections.js"
import type { InferenceShape } from "../call.js"
import { openAiContentCall } from "./jobFamilies.js"
import type { MediaJobsShape } from "./MediaJobs.js"

/** Redirects followed when downloading a result (Veo's URI answers one to the stored file). */
const MAX_REDIRECTS = 3

type AbortWhen = (abort: () => void) => () => void

const originOf = (url: string | null): string | undefined => {
  try {
    return url ? new URL(url).origin : undefined
  } catch {
    return undefined
  }
}

const contentTypeOf = (res: UpstreamResponse, fallback: string): string => {
  const t = res.headers["content-type"]
  const v = Array.isArray(t) ? t[0] : t
  return typeof v === "string" && v.trim() !== "" ? v : fallback
}

const unavailable = (message: string, status = 502, code = "upstream_error") =>
  clientError(openAiChat, { status, kind: status === 410 ? "not_found" : "upstream", message, code })

export interface JobContentDeps {
  readonly inference: InferenceShape
  readonly connections: ConnectionsShape
  /** Where synchronous results are stored (`<dataDir>/media`). */
  readonly dir: string
}

/** `content`: a completed job's stored file, or the upstream's answer with its body unread (410 when neither is there any more). */
export const makeJobContent = (deps: JobContentDeps): MediaJobsShape["content"] => {
  const { inference, connections, dir } = deps
  const download = makeDownload(inference)
  return (job, abortWhen) =>
    Effect.gen(function* () {
      if (job.resultFile) {
        const file = path.join(dir, job.resultFile)
        const stat = yield* Effect.promise(() => fs.promises.stat(file).catch(() => undefined))
        if (!stat) return yield* unavailable(`the content of job ${job.id} is no longer stored`, 410, "content_gone")
        return { _tag: "file" as const, path: file, contentType: job.resultType ?? "application/octet-stream", size: stat.size }
      }
      const found = yield* Effect.option(connections.get(job.connectionId))
      if (Option.isNone(found))
        return yield* unavailable("the connection that ran this job was removed: its content cannot be fetched", 410, "content_gone")
      const connection = found.value
      const fallbackType = job.resultType ?? (job.kind === "video" ? "video/mp4" : "application/octet-stream")
      let res: UpstreamResponse
      if (job.family === "veo") {
        if (!job.resultUrl) return yield* unavailable(`job ${job.id} has no result to fetch`)
        res = yield* download(connection, job.model, job.resultUrl, abortWhen)
      } else if (job.family === "openai-videos" && job.upstreamId) {
        res = yield* inference.send(
          { connection, model: job.model },
          connection.format,
          {},
          { stream: false, custom: openAiContentCall(job.upstreamId), ...(abortWhen ? { abortWhen } : {}) },
          openAiChat
        )
      } else {
        return yield* unavailable(`job ${job.id} has no result to fetch`)
      }
      if (res.status < 200 || res.status >= 300) {
        const { error } = yield* inference.readFailure(res, openAiChat, openAiChat, connection)
        return yield* unavailable(`${connection.name} could not give the content (HTTP ${res.status}): ${error.message}`)
      }
      return { _tag: "upstream" as const, response: res, contentType: contentTypeOf(res, fallbackType) }
    })
}

/** A GET of a result URL: with the connection's key on its own origin, without it anywhere else; redirects followed without the key. */
// Outside the guarded attempt (docs/ARCHITECTURE.md, "Calls outside the guarded attempt"): a result is held by the
// connection that made it (pinned, like the job's polls).
const makeDownload =
  (inference: InferenceShape) => (connection: Connection, model: string, url: string, abortWhen: AbortWhen | undefined) =>
    Effect.gen(function* () {
      const keyless: Connection = { ...connection, apiKey: null }
      let target = url
      let withKey = originOf(url) !== undefined && originOf(url) === originOf(connection.effectiveBaseUrl)
      for (let hop = 0; ; hop++) {
        const res = yield* inference.send(
          { connection: withKey ? connection : keyless, model },
          connection.format,
          {},
          { stream: false, custom: { path: "", url: target, method: "GET", accept: "*/*" }, ...(abortWhen ? { abortWhen } : {}) },
          openAiChat
        )
        const location = res.headers["location"]
        const next = Array.isArray(location) ? location[0] : location
        if (res.status < 300 || res.status >= 400 || typeof next !== "string" || hop >= MAX_REDIRECTS) return res
        // Dropped unread.
        discardBody(res.body)
        target = new URL(next, target).href
        withKey = false
      }
    })
