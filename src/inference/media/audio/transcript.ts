/**
 * One transcript whatever the upstream family, and the client's answer shapes made from it:
 * `json`, `verbose_json`, `text`, `srt`, `vtt`. The gateway renders srt and vtt itself, from
 * segments: the upstream's own (OpenAI-compatible `verbose_json`), else built from its words
 * (Deepgram, ElevenLabs), else one cue spanning the whole audio (Gemini, OpenAI's json-only models).
 */

export interface Word {
  readonly word: string
  readonly start: number
  readonly end: number
}

export interface Segment {
  readonly id: number
  readonly start: number
  readonly end: number
  readonly text: string
  readonly [more: string]: unknown
}

/** What a family answered, read. */
export interface Transcript {
  readonly text: string
  /** As the upstream names it (`english`, `en`); null when it does not say. */
  readonly language: string | null
  readonly segments?: ReadonlyArray<Segment>
  readonly words?: ReadonlyArray<Word>
  /** The upstream's own usage object, passed on in the JSON answers (tokens). */
  readonly usage?: unknown
}

export type TranscriptFormat = "json" | "text" | "srt" | "vtt" | "verbose_json"
export const TRANSCRIPT_FORMATS: ReadonlyArray<TranscriptFormat> = ["json", "text", "srt", "vtt", "verbose_json"]

/** A new segment starts after a word that ends a sentence, a pause this long, or once one spans this long (seconds). */
const PAUSE = 1.5
const LONGEST = 10

/** Segments grouped from timed words: sentence ends, pauses and a length cap cut them. */
export const segmentsOf = (words: ReadonlyArray<Word>): ReadonlyArray<Segment> => {
  const out: Array<Segment> = []
  let group: Array<Word> = []
  const close = () => {
    if (group.length === 0) return
    out.push({ id: out.length, start: group[0]!.start, end: group[group.length - 1]!.end, text: group.map((w) => w.word).join(" ") })
    group = []
  }
  for (const w of words) {
    const last = group[group.length - 1]
    if (last && (w.start - last.end > PAUSE || w.end - group[0]!.start > LONGEST)) close()
    group.push(w)
    if (/[.?!。？！]$/.test(w.word)) close()
  }
  close()
  return out
}

/** The transcript's segments: its own, else from its words, else one spanning the audio. */
export const segmentsFor = (t: Transcript, duration: number): ReadonlyArray<Segment> => {
  if (t.segments && t.segments.length > 0) return t.segments
  if (t.words && t.words.length > 0) return segmentsOf(t.words)
  return t.text.trim() === "" ? [] : [{ id: 0, start: 0, end: duration, text: t.text.trim() }]
}

const pad = (n: number, width = 2) => String(n).padStart(width, "0")

/** `hh:mm:ss<sep>mmm` */
export const timestamp = (seconds: number, sep: "," | "."): string => {
  const ms = Math.max(0, Math.round(seconds * 1000))
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${sep}${pad(ms % 1000, 3)}`
}

const cueText = (s: Segment) =>
  String(s.text)
    .trim()
    .replace(/\r?\n\r?\n+/g, "\n")

export const srtOf = (segments: ReadonlyArray<Segment>): string =>
  segments.map((s, i) => `${i + 1}\n${timestamp(s.start, ",")} --> ${timestamp(s.end, ",")}\n${cueText(s)}\n\n`).join("")

export const vttOf = (segments: ReadonlyArray<Segment>): string =>
  `WEBVTT\n\n${segments.map((s) => `${timestamp(s.start, ".")} --> ${timestamp(s.end, ".")}\n${cueText(s)}\n\n`).join("")}`

export interface Rendered {
  readonly contentType: string
  readonly body: string | Record<string, unknown>
}

/**
 * The client's answer. `json` carries text, task, language and duration (the spec's row) plus the
 * upstream's token usage when it reported one; `verbose_json` adds segments, and words when
 * `word` timestamps were asked for.
 */
export const render = (
  t: Transcript,
  o: {
    readonly format: TranscriptFormat
    readonly task: "transcribe" | "translate"
    readonly duration: number
    readonly language: string | null
    readonly granularities: ReadonlyArray<string>
  }
): Rendered => {
  const head = { task: o.task, language: t.language ?? o.language, duration: o.duration, text: t.text }
  const usage = t.usage !== undefined ? { usage: t.usage } : {}
  switch (o.format) {
    case "text":
      return { contentType: "text/plain; charset=utf-8", body: `${t.text}\n` }
    case "srt":
      return { contentType: "application/x-subrip; charset=utf-8", body: srtOf(segmentsFor(t, o.duration)) }
    case "vtt":
      return { contentType: "text/vtt; charset=utf-8", body: vttOf(segmentsFor(t, o.duration)) }
    case "verbose_json": {
      const wantWords = o.granularities.includes("word")
      const wantSegments = o.granularities.length === 0 || o.granularities.includes("segment")
      return {
        contentType: "application/json",
        body: {
          ...head,
          ...(wantSegments ? { segments: segmentsFor(t, o.duration) } : {}),
          ...(wantWords ? { words: t.words ?? [] } : {}),
          ...usage
        }
      }
    }
    case "json":
      return { contentType: "application/json", body: { ...head, ...usage } }
  }
}
