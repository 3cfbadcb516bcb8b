import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Readable } from "node:stream"
import { describe, expect, it } from "vitest"
import { multipartBody, uploadBody } from "../src/platform/http/multipart.js"

const collect = async (data: Buffer | Readable): Promise<Buffer> => {
  if (Buffer.isBuffer(data)) return data
  const chunks: Array<Buffer> = []
  for await (const c of data) chunks.push(c as Buffer)
  return Buffer.concat(chunks)
}

/** Forms sent upstream: uploads stream from their spooled files, with an exact Content-Length. */
describe("multipart bodies for upstreams", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gw-mp-"))
  const bytes = Buffer.alloc(300_000, 7)
  const file = path.join(dir, "upload")
  fs.writeFileSync(file, bytes)

  it("streams an upload from disk, byte for byte what the in-memory form would be, with its exact length", async () => {
    const streamed = multipartBody([
      { name: "model", value: "m" },
      { name: "file", filename: "a.wav", contentType: "audio/wav", path: file, size: bytes.length }
    ])
    expect(streamed.data).toBeInstanceOf(Readable)
    const sent = await collect(streamed.data)
    expect(sent.length).toBe(streamed.length)
    const boundary = /boundary=(.+)$/.exec(streamed.contentType)![1]!
    // The same form in memory, with the same boundary: what undici's own parser reads back.
    const form = await new Response(sent, { headers: { "content-type": `multipart/form-data; boundary=${boundary}` } }).formData()
    expect(form.get("model")).toBe("m")
    const got = form.get("file") as File
    expect(got.name).toBe("a.wav")
    expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true)
  })

  it("keeps a form without uploads in memory", async () => {
    const whole = multipartBody([
      { name: "prompt", value: 'a "quoted"\r\nname' },
      { name: "image", filename: "x.png", contentType: "image/png", data: Buffer.from([1, 2, 3]) }
    ])
    expect(Buffer.isBuffer(whole.data)).toBe(true)
    expect((whole.data as Buffer).length).toBe(whole.length)
  })

  it("sends a raw upload streamed, with its size", async () => {
    const raw = uploadBody({ field: "file", filename: "a", mimeType: "audio/wav", path: file, size: bytes.length }, "audio/wav")
    expect((await collect(raw.data)).equals(bytes)).toBe(true)
    expect(raw.length).toBe(bytes.length)
  })
})
