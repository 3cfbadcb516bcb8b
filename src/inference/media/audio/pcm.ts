/**
 * Raw PCM (signed 16-bit little-endian, what Gemini TTS answers) and the two containers the
 * gateway makes from it itself: WAV (a 44-byte RIFF header) and MP3 (@breezystack/lamejs, a
 * maintained pure-JS LAME). Opus, AAC and FLAC would need encoders the gateway does not ship.
 */

export interface Pcm {
  /** Interleaved signed 16-bit little-endian samples. */
  readonly data: Buffer
  readonly sampleRate: number
  readonly channels: number
}

/** OpenAI's `pcm` speech format: 24 kHz, 16-bit, mono. */
export const PCM_RATE = 24_000

/** A WAV file of `pcm`: the canonical 44-byte RIFF/WAVE header (PCM format 1) and the samples. */
export const wavOf = (pcm: Pcm): Buffer => {
  const header = Buffer.alloc(44)
  const blockAlign = pcm.channels * 2
  header.write("RIFF", 0, "ascii")
  header.writeUInt32LE(36 + pcm.data.length, 4)
  header.write("WAVE", 8, "ascii")
  header.write("fmt ", 12, "ascii")
  header.writeUInt32LE(16, 16)
  header.writeUInt16LE(1, 20)
  header.writeUInt16LE(pcm.channels, 22)
  header.writeUInt32LE(pcm.sampleRate, 24)
  header.writeUInt32LE(pcm.sampleRate * blockAlign, 28)
  header.writeUInt16LE(blockAlign, 32)
  header.writeUInt16LE(16, 34)
  header.write("data", 36, "ascii")
  header.writeUInt32LE(pcm.data.length, 40)
  return Buffer.concat([header, pcm.data])
}

/**
 * The PCM inside a WAV file (16-bit PCM only): the `fmt ` chunk's rate and channels, the `data`
 * chunk's samples. Undefined for anything else.
 */
export const pcmOfWav = (wav: Buffer): Pcm | undefined => {
  if (wav.length < 12 || wav.toString("ascii", 0, 4) !== "RIFF" || wav.toString("ascii", 8, 12) !== "WAVE") return undefined
  let sampleRate: number | undefined
  let channels: number | undefined
  let at = 12
  while (at + 8 <= wav.length) {
    const id = wav.toString("ascii", at, at + 4)
    const size = wav.readUInt32LE(at + 4)
    const body = at + 8
    if (id === "fmt ") {
      if (size < 16 || body + 16 > wav.length || wav.readUInt16LE(body) !== 1 || wav.readUInt16LE(body + 14) !== 16) return undefined
      channels = wav.readUInt16LE(body + 2)
      sampleRate = wav.readUInt32LE(body + 4)
    } else if (id === "data") {
      if (sampleRate === undefined || channels === undefined) return undefined
      // A streamed WAV may say 0 or 0xFFFFFFFF: the samples are then the rest of the file.
      const end = size === 0 || size === 0xffffffff || body + size > wav.length ? wav.length : body + size
      return { data: wav.subarray(body, end - ((end - body) % (2 * channels))), sampleRate, channels }
    }
    at = body + size + (size % 2)
  }
  return undefined
}

/** The sample rate a `audio/L16;codec=pcm;rate=24000` content type names (24 kHz when it names none). */
export const rateOf = (mimeType: string): number => {
  const m = /rate=(\d+)/i.exec(mimeType)
  const rate = m ? Number(m[1]) : PCM_RATE
  return rate > 0 && rate <= 384_000 ? rate : PCM_RATE
}

/** Samples per MP3 frame (MPEG-1 layer III): what lamejs is fed at a time. */
const FRAME = 1152

/**
 * `pcm` encoded as MP3 (constant bitrate, 64 kbit/s per channel up to 128). lamejs (a quarter of a
 * megabyte of code) is imported by the first encoding, not when the gateway starts.
 */
export const mp3Of = async (pcm: Pcm, kbps = Math.min(128, 64 * pcm.channels)): Promise<Buffer> => {
  const { Mp3Encoder } = await import("@breezystack/lamejs")
  const samples = new Int16Array(pcm.data.buffer.slice(pcm.data.byteOffset, pcm.data.byteOffset + pcm.data.length - (pcm.data.length % 2)))
  const encoder = new Mp3Encoder(pcm.channels === 2 ? 2 : 1, pcm.sampleRate, kbps)
  const parts: Array<Buffer> = []
  const keep = (chunk: Int8Array | Uint8Array) => {
    if (chunk.length > 0) parts.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length))
  }
  if (pcm.channels === 2) {
    const frames = samples.length >> 1
    const left = new Int16Array(frames)
    const right = new Int16Array(frames)
    for (let i = 0; i < frames; i++) {
      left[i] = samples[2 * i]!
      right[i] = samples[2 * i + 1]!
    }
    for (let i = 0; i < frames; i += FRAME) keep(encoder.encodeBuffer(left.subarray(i, i + FRAME), right.subarray(i, i + FRAME)))
  } else {
    for (let i = 0; i < samples.length; i += FRAME) keep(encoder.encodeBuffer(samples.subarray(i, i + FRAME)))
  }
  keep(encoder.flush())
  return Buffer.concat(parts)
}
