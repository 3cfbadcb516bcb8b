/**
 * A multipart/form-data body for an upstream (OpenAI-compatible transcriptions, ElevenLabs
 * speech-to-text), built from the spooled upload and the fields the gateway forwards.
 */
import * as crypto from "node:crypto"

export interface FormFile {
  readonly name: string
  readonly filename: string
  readonly contentType: string
  readonly data: Buffer
}

/** A header parameter's value: no quotes, no line breaks (they would end the part's headers). */
const quoted = (v: string) => v.replace(/["\r\n]/g, (c) => (c === '"' ? "%22" : " "))

/** The body and its content type; `fields` in order, a field given several values is sent once per value. */
export const formBody = (fields: ReadonlyArray<readonly [string, string]>, file: FormFile): { readonly data: Buffer; readonly contentType: string } => {
  const boundary = `----gateway-${crypto.randomUUID()}`
  const parts: Array<Buffer> = []
  for (const [name, value] of fields) {
    parts.push(Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${quoted(name)}"\r\n\r\n${value}\r\n`, "utf8"))
  }
  parts.push(
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="${quoted(file.name)}"; filename="${quoted(file.filename)}"\r\nContent-Type: ${quoted(file.contentType)}\r\n\r\n`, "utf8"),
    file.data,
    Buffer.from(`\r\n--${boundary}--\r\n`, "utf8")
  )
  return { data: Buffer.concat(parts), contentType: `multipart/form-data; boundary=${boundary}` }
}
