/**
 * The media parts of a request in its own wire format (docs/bridge.md): found on the body the route
 * already parsed, by a walk of its messages' content lists only (never the whole body), and replaced
 * by text parts in the same format. Formats without a part of a modality have none to find.
 */
import type { FormatId } from "../../domain/canonical.js"
import type { Modality } from "../../domain/bridge.js"

/** Where a part's content is: inline (base64) or at a URL. */
export type MediaSource =
  | { readonly kind: "data"; readonly mediaType: string; readonly data: string; readonly filename?: string }
  | { readonly kind: "url"; readonly url: string; readonly mediaType?: string }

/** One media part: its modality, its content, and where it sits (message, then part, in the format's lists). */
export interface MediaPart {
  readonly modality: Modality
  readonly source: MediaSource
  readonly message: number
  readonly part: number
}

type Obj = Record<string, unknown>
const obj = (v: unknown): Obj | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Obj) : undefined)
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined)

/** A `data:` URL as its media type and base64 data; anything else as a URL. */
const fromUrl = (url: string, mediaType?: string): MediaSource => {
  const m = /^data:([^;,]+)?(;base64)?,(.*)$/s.exec(url)
  if (m?.[2]) return { kind: "data", mediaType: m[1] ?? mediaType ?? "application/octet-stream", data: m[3] ?? "" }
  return mediaType === undefined ? { kind: "url", url } : { kind: "url", url, mediaType }
}

const modalityOfType = (mediaType: string): Modality | undefined =>
  mediaType.startsWith("image/") ? "image" : mediaType.startsWith("audio/") ? "audio" : mediaType === "application/pdf" ? "pdf" : undefined

const audioType = (format: string | undefined): string => `audio/${format === "mp3" ? "mpeg" : (format ?? "wav")}`

/** A file part (chat `file`, Responses `input_file`) that is a PDF given inline. */
const pdfFile = (data: string | undefined, filename: string | undefined): MediaSource | undefined => {
  if (data === undefined) return undefined
  const source = fromUrl(data, "application/pdf")
  const isPdf = source.kind === "data" ? source.mediaType === "application/pdf" : filename?.toLowerCase().endsWith(".pdf") === true
  if (!isPdf) return undefined
  return source.kind === "data" && filename !== undefined ? { ...source, filename } : source
}

/** An OpenAI chat content part (`image_url`, `input_audio`, `file`) or a Responses one (`input_image`, `input_audio`, `input_file`). */
const openAiPart = (p: Obj): { modality: Modality; source: MediaSource } | undefined => {
  switch (p["type"]) {
    case "image_url": {
      const url = str(obj(p["image_url"])?.["url"]) ?? str(p["image_url"])
      return url === undefined ? undefined : { modality: "image", source: fromUrl(url) }
    }
    case "input_image": {
      const url = str(p["image_url"]) ?? str(obj(p["image_url"])?.["url"])
      return url === undefined ? undefined : { modality: "image", source: fromUrl(url) }
    }
    case "input_audio": {
      const a = obj(p["input_audio"])
      const data = str(a?.["data"])
      return data === undefined
        ? undefined
        : { modality: "audio", source: { kind: "data", mediaType: audioType(str(a?.["format"])), data } }
    }
    case "file": {
      const f = obj(p["file"])
      const source = pdfFile(str(f?.["file_data"]), str(f?.["filename"]))
      return source === undefined ? undefined : { modality: "pdf", source }
    }
    case "input_file": {
      const source = pdfFile(str(p["file_data"]), str(p["filename"]))
      return source === undefined ? undefined : { modality: "pdf", source }
    }
    default:
      return undefined
  }
}

/** An Anthropic block: `image`, or a PDF `document` (base64 or URL). */
const anthropicPart = (p: Obj): { modality: Modality; source: MediaSource } | undefined => {
  const type = p["type"]
  if (type !== "image" && type !== "document") return undefined
  const s = obj(p["source"])
  const mediaType = str(s?.["media_type"])
  const source: MediaSource | undefined =
    s?.["type"] === "base64"
      ? { kind: "data", mediaType: mediaType ?? (type === "image" ? "image/png" : "application/pdf"), data: str(s["data"]) ?? "" }
      : s?.["type"] === "url" && str(s["url"]) !== undefined
        ? { kind: "url", url: str(s["url"])!, ...(type === "document" ? { mediaType: "application/pdf" } : {}) }
        : undefined
  if (source === undefined) return undefined
  if (type === "image") return { modality: "image", source }
  return source.kind === "url" || source.mediaType === "application/pdf" ? { modality: "pdf", source } : undefined
}

/** A Gemini part: `inlineData` or `fileData` of an image, audio or PDF type. */
const geminiPart = (p: Obj): { modality: Modality; source: MediaSource } | undefined => {
  const inline = obj(p["inlineData"]) ?? obj(p["inline_data"])
  if (inline !== undefined) {
    const mediaType = str(inline["mimeType"]) ?? str(inline["mime_type"]) ?? ""
    const modality = modalityOfType(mediaType)
    return modality === undefined ? undefined : { modality, source: { kind: "data", mediaType, data: str(inline["data"]) ?? "" } }
  }
  const file = obj(p["fileData"]) ?? obj(p["file_data"])
  const uri = str(file?.["fileUri"]) ?? str(file?.["file_uri"])
  const mediaType = str(file?.["mimeType"]) ?? str(file?.["mime_type"]) ?? ""
  const modality = modalityOfType(mediaType)
  return modality === undefined || uri === undefined ? undefined : { modality, source: { kind: "url", url: uri, mediaType } }
}

/** The format's messages and each one's content list (Ollama's images list instead). */
const layout = (format: FormatId, body: Obj): { messages: ReadonlyArray<unknown>; parts: string } | undefined => {
  switch (format) {
    case "openai-chat":
    case "anthropic":
      return Array.isArray(body["messages"]) ? { messages: body["messages"], parts: "content" } : undefined
    case "openai-responses":
      return Array.isArray(body["input"]) ? { messages: body["input"], parts: "content" } : undefined
    case "gemini":
      return Array.isArray(body["contents"]) ? { messages: body["contents"], parts: "parts" } : undefined
    case "ollama":
      return Array.isArray(body["messages"]) ? { messages: body["messages"], parts: "images" } : undefined
  }
}

const partOf = (format: FormatId, p: unknown): { modality: Modality; source: MediaSource } | undefined => {
  if (format === "ollama")
    return typeof p === "string" && p !== "" ? { modality: "image", source: fromUrl(`data:${ollamaType(p)};base64,${p}`) } : undefined
  const o = obj(p)
  if (o === undefined) return undefined
  return format === "anthropic" ? anthropicPart(o) : format === "gemini" ? geminiPart(o) : openAiPart(o)
}

/** Ollama's images are bare base64: the type from the first bytes (PNG, JPEG, GIF, WebP). */
const ollamaType = (b64: string): string =>
  b64.startsWith("iVBOR") ? "image/png" : b64.startsWith("/9j/") ? "image/jpeg" : b64.startsWith("R0lG") ? "image/gif" : "image/webp"

/** The media parts of a request body in `format`, in order; empty when it has none. */
export const mediaParts = (format: FormatId, body: Obj): Array<MediaPart> => {
  const where = layout(format, body)
  const out: Array<MediaPart> = []
  if (where === undefined) return out
  const { messages, parts } = where
  for (let i = 0; i < messages.length; i++) {
    const list = obj(messages[i])?.[parts]
    if (!Array.isArray(list)) continue
    for (let j = 0; j < list.length; j++) {
      const found = partOf(format, list[j])
      if (found !== undefined) out.push({ ...found, message: i, part: j })
    }
  }
  return out
}

/** The text a bridged part becomes: `[image: <description>]`. */
export const bridgedText = (modality: Modality, description: string): string => `[${modality}: ${description}]`

/** A text part of the format. */
const textPart = (format: FormatId, text: string): unknown =>
  format === "gemini" ? { text } : format === "openai-responses" ? { type: "input_text", text } : { type: "text", text }

/**
 * The body with each part in `texts` (by message, then part) replaced by its text part; every
 * other object is shared with `body`. Ollama's images leave its list and their text is appended to
 * the message's content.
 */
export const withTexts = (format: FormatId, body: Obj, texts: ReadonlyArray<{ readonly part: MediaPart; readonly text: string }>): Obj => {
  const where = layout(format, body)
  if (where === undefined || texts.length === 0) return body
  const { parts } = where
  const messages = [...where.messages]
  const byMessage = new Map<number, Array<{ part: MediaPart; text: string }>>()
  for (const t of texts) {
    const list = byMessage.get(t.part.message) ?? []
    list.push(t)
    byMessage.set(t.part.message, list)
  }
  for (const [i, list] of byMessage) {
    const message = obj(messages[i])!
    const content = [...(message[parts] as ReadonlyArray<unknown>)]
    if (format === "ollama") {
      const drop = new Set(list.map((t) => t.part.part))
      const kept = content.filter((_, j) => !drop.has(j))
      const before = str(message["content"]) ?? ""
      const added = list.map((t) => t.text).join("\n")
      const { images: _images, ...rest } = message
      messages[i] = { ...rest, ...(kept.length > 0 ? { images: kept } : {}), content: before === "" ? added : `${before}\n${added}` }
      continue
    }
    for (const t of list) content[t.part.part] = textPart(format, t.text)
    messages[i] = { ...message, [parts]: content }
  }
  const key = format === "openai-responses" ? "input" : format === "gemini" ? "contents" : "messages"
  return { ...body, [key]: messages }
}
