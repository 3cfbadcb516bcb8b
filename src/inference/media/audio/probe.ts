/**
 * What an uploaded audio file is and how long it plays, read from the file itself with
 * music-metadata (mp3, wav, m4a, flac, ogg, webm and the rest it knows): the duration a
 * transcription is priced by and answers with, never the upstream's word for it.
 */
import * as Effect from "effect/Effect"

export interface AudioInfo {
  /** Seconds, from the file's own headers (or a scan of its frames when they do not say). */
  readonly duration: number
  /** The content type the detected container goes by (`audio/wav`, `audio/mpeg`, ...). */
  readonly mimeType: string
  /** The file extension upstreams that judge by names (OpenAI) recognise. */
  readonly extension: string
}

/** music-metadata's container names → the content type and extension an upstream recognises. MPEG-4 before MPEG. */
const CONTAINERS: ReadonlyArray<readonly [RegExp, string, string]> = [
  [/wav/i, "audio/wav", "wav"],
  [/mpeg-4|m4a|mp4|isom|3gp/i, "audio/mp4", "m4a"],
  [/mpeg/i, "audio/mpeg", "mp3"],
  [/flac/i, "audio/flac", "flac"],
  [/ogg|opus/i, "audio/ogg", "ogg"],
  [/webm|ebml|matroska/i, "audio/webm", "webm"],
  [/aiff/i, "audio/aiff", "aiff"]
]

/**
 * Reads the duration and container of the audio at `path`; fails with why when the file is not
 * audio it can read, or says no duration.
 */
export const probeAudio = (path: string): Effect.Effect<AudioInfo, string> =>
  Effect.tryPromise({
    try: () => import("music-metadata").then((m) => m.parseFile(path, { duration: true, skipCovers: true })),
    catch: (e) => (e instanceof Error ? e.message : String(e))
  }).pipe(
    Effect.flatMap((meta) => {
      const duration = meta.format.duration
      if (duration === undefined || !Number.isFinite(duration) || duration <= 0) return Effect.fail("it says no duration")
      const container = meta.format.container ?? ""
      const known = CONTAINERS.find(([pattern]) => pattern.test(container))
      return Effect.succeed({ duration, mimeType: known?.[1] ?? "application/octet-stream", extension: known?.[2] ?? "bin" })
    })
  )
