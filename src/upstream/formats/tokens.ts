import type { CanonicalRequest, ContentBlock, ImageBlock } from "../../domain/canonical.js"

/**
 * Token counting with a real BPE tokenizer (o200k_base, via gpt-tokenizer), loaded on first
 * use. Used when the upstream cannot count for us (Anthropic and Gemini upstreams are asked
 * directly). Images are counted the way Anthropic documents it, (width × height) / 750,
 * capped at 1600, with the size read from the image header; images given by URL count 1600.
 */
type Counter = (text: string) => number

let counter: Promise<Counter> | undefined
let loaded: Counter | undefined
/** The o200k counter, loading it on first use. */
export const loadCounter = (): Promise<Counter> =>
  (counter ??= import("gpt-tokenizer/encoding/o200k_base").then((m) => (loaded = (text: string) => (text ? m.countTokens(text) : 0))))
/** The o200k counter once loaded (synchronous callers fall back to an approximation before that). */
export const loadedCounter = (): Counter | undefined => loaded

const MAX_IMAGE_TOKENS = 1600
/** Per-message framing tokens (role markers), as chat formats add them. */
const PER_MESSAGE = 3
/** Per-tool framing on top of the definition's JSON. */
const PER_TOOL = 8

/** Width and height from PNG, JPEG, GIF or WebP bytes, when recognisable. */
export const imageSize = (bytes: Buffer): { width: number; height: number } | undefined => {
  if (bytes.length >= 24 && bytes.readUInt32BE(0) === 0x89504e47) return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) }
  if (bytes.length >= 10 && bytes.toString("ascii", 0, 3) === "GIF") return { width: bytes.readUInt16LE(6), height: bytes.readUInt16LE(8) }
  if (bytes.length >= 30 && bytes.toString("ascii", 0, 4) === "RIFF" && bytes.toString("ascii", 8, 12) === "WEBP") {
    const kind = bytes.toString("ascii", 12, 16)
    if (kind === "VP8X") return { width: 1 + bytes.readUIntLE(24, 3), height: 1 + bytes.readUIntLE(27, 3) }
    if (kind === "VP8L") {
      const b = bytes.readUInt32LE(21)
      return { width: 1 + (b & 0x3fff), height: 1 + ((b >> 14) & 0x3fff) }
    }
    if (kind === "VP8 ") return { width: bytes.readUInt16LE(26) & 0x3fff, height: bytes.readUInt16LE(28) & 0x3fff }
  }
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8) {
    let i = 2
    while (i + 9 < bytes.length) {
      if (bytes[i] !== 0xff) return undefined
      const marker = bytes[i + 1]!
      const length = bytes.readUInt16BE(i + 2)
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        return { height: bytes.readUInt16BE(i + 5), width: bytes.readUInt16BE(i + 7) }
      }
      i += 2 + length
    }
  }
  return undefined
}

export const imageTokens = (image: ImageBlock): number => {
  if (image.source.kind !== "base64") return MAX_IMAGE_TOKENS
  // The header is within the first few KiB: decode only that much.
  const size = imageSize(Buffer.from(image.source.data.slice(0, 87_384), "base64"))
  if (!size || size.width <= 0 || size.height <= 0) return MAX_IMAGE_TOKENS
  return Math.min(MAX_IMAGE_TOKENS, Math.max(1, Math.ceil((size.width * size.height) / 750)))
}

const blockTokens = (count: Counter, b: ContentBlock): number => {
  switch (b.type) {
    case "text":
      return count(b.text)
    case "image":
      return imageTokens(b)
    case "tool_use":
      return count(b.name) + count(JSON.stringify(b.input ?? {})) + PER_MESSAGE
    case "tool_result":
      return PER_MESSAGE + b.content.reduce((n, c) => n + (c.type === "text" ? count(c.text) : imageTokens(c)), 0)
    case "reasoning":
      return count(b.text)
  }
}

/** Input tokens of a request: system, messages (text, images, tool calls and results) and tools. */
export const countRequestTokens = async (req: CanonicalRequest): Promise<number> => {
  const count = await loadCounter()
  let total = count(req.system.map((b) => b.text).join("\n"))
  for (const m of req.messages) {
    total += PER_MESSAGE
    for (const b of m.content) total += blockTokens(count, b)
  }
  for (const t of req.tools) total += PER_TOOL + count(t.name) + count(t.description ?? "") + count(JSON.stringify(t.parameters))
  return total
}

/** Tokens of plain texts (embedding inputs whose upstream reports no count). */
export const countTextTokens = async (texts: ReadonlyArray<string>): Promise<number> => {
  const count = await loadCounter()
  return texts.reduce((n, t) => n + count(t), 0)
}
