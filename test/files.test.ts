import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ApiKeys } from "../src/services/auth/ApiKeys.js"
import { queryDb } from "./support/db.js"
import { call, startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/** `/v1/files` with the openai SDK: upload streamed to disk, scoped per key, expiry, the size limit, a client that leaves. */
const KEY_A = "gwk_files_key_a_0123456789abcdef012"
const KEY_B = "gwk_files_key_b_0123456789abcdef012"
const LIMIT = 80 * 1024 * 1024

let g: TestGateway
let a: OpenAI
let b: OpenAI

beforeAll(async () => {
  g = await startGateway({ env: { GATEWAY_FILES_MAX_BYTES: String(LIMIT), GATEWAY_FILES_SWEEP_MS: "200" } })
  await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "a" }, { secret: KEY_A })))
  await g.run(Effect.flatMap(ApiKeys, (k) => k.create({ name: "b" }, { secret: KEY_B })))
  a = new OpenAI({ apiKey: KEY_A, baseURL: `${g.url}/v1`, maxRetries: 0 })
  b = new OpenAI({ apiKey: KEY_B, baseURL: `${g.url}/v1`, maxRetries: 0 })
})
afterAll(() => g?.close())

const storedFiles = (): Array<string> => {
  const dir = path.join(g.dataDir, "files")
  return fs.existsSync(dir) ? fs.readdirSync(dir) : []
}

/** A multipart body streamed from a generator: `size` pseudo-random bytes in the file part, then `purpose`. */
const streamedUpload = (size: number, hash: crypto.Hash) => {
  const boundary = "----gwtest" + crypto.randomUUID().replace(/-/g, "")
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`
  )
  const tail = Buffer.from(`\r\n--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${boundary}--\r\n`)
  const chunk = crypto.randomBytes(1024 * 1024)
  async function* body() {
    yield head
    let left = size
    while (left > 0) {
      const piece = left >= chunk.length ? chunk : chunk.subarray(0, left)
      hash.update(piece)
      left -= piece.length
      yield piece
    }
    yield tail
  }
  return { boundary, body, length: head.length + size + tail.length }
}

describe("files with the openai SDK", () => {
  it("creates, lists, retrieves, reads and deletes a file; its size and sha256 are recorded", async () => {
    const text = '{"custom_id":"a"}\n{"custom_id":"b"}\n'
    const created = await a.files.create({ file: await toFile(Buffer.from(text), "input.jsonl"), purpose: "batch" })
    expect(created).toMatchObject({ object: "file", bytes: text.length, filename: "input.jsonl", purpose: "batch", status: "processed" })
    expect(created.id).toMatch(/^file-[A-Za-z0-9]{24}$/)
    const row = queryDb(g.dataDir, "SELECT sha256 FROM files WHERE id = ?", created.id)[0] as { sha256: string }
    expect(row.sha256).toBe(crypto.createHash("sha256").update(text).digest("hex"))

    expect((await a.files.retrieve(created.id)).bytes).toBe(text.length)
    expect(await (await a.files.content(created.id)).text()).toBe(text)
    const listed = await a.files.list({ purpose: "batch" })
    expect(listed.data.map((f) => f.id)).toContain(created.id)

    const deleted = await a.files.delete(created.id)
    expect(deleted).toMatchObject({ id: created.id, deleted: true })
    await expect(a.files.retrieve(created.id)).rejects.toMatchObject({ status: 404 })
    expect(storedFiles()).not.toContain(created.id)
  })

  it("another key's file is 404 for retrieve, content and delete, and absent from its list", async () => {
    const f = await a.files.create({ file: await toFile(Buffer.from("mine"), "mine.txt"), purpose: "user_data" })
    await expect(b.files.retrieve(f.id)).rejects.toMatchObject({ status: 404 })
    await expect(b.files.content(f.id)).rejects.toMatchObject({ status: 404 })
    await expect(b.files.delete(f.id)).rejects.toMatchObject({ status: 404 })
    expect((await b.files.list()).data.map((x) => x.id)).not.toContain(f.id)
    expect((await a.files.retrieve(f.id)).id).toBe(f.id)
  })

  it("lists in pages with after, limit and order (has_more, first_id, last_id)", async () => {
    const ids: Array<string> = []
    for (let i = 0; i < 5; i++)
      ids.push((await b.files.create({ file: await toFile(Buffer.from(`p${i}`), `p${i}.txt`), purpose: "evals" })).id)
    const first = await call(`${g.url}/v1/files?purpose=evals&limit=2&order=asc`, { headers: { authorization: `Bearer ${KEY_B}` } })
    expect(first.body).toMatchObject({ object: "list", has_more: true, first_id: ids[0], last_id: ids[1] })
    const second = await call(`${g.url}/v1/files?purpose=evals&limit=2&order=asc&after=${ids[1]}`, {
      headers: { authorization: `Bearer ${KEY_B}` }
    })
    expect(second.body.data.map((f: any) => f.id)).toEqual([ids[2], ids[3]])
    const all: Array<string> = []
    for await (const f of b.files.list({ purpose: "evals", limit: 2 })) all.push(f.id)
    expect(all).toEqual([...ids].reverse())
    const bad = await call(`${g.url}/v1/files?order=sideways`, { headers: { authorization: `Bearer ${KEY_B}` } })
    expect(bad.status).toBe(400)
    expect(bad.body.error.param).toBe("order")
  })

  it("refuses a bad purpose or expiry with a 400 naming it, and keeps nothing", async () => {
    const before = storedFiles().length
    await expect(a.files.create({ file: await toFile(Buffer.from("x"), "x.txt"), purpose: "nonsense" as never })).rejects.toMatchObject({
      status: 400,
      param: "purpose"
    })
    await expect(
      a.files.create({
        file: await toFile(Buffer.from("x"), "x.txt"),
        purpose: "batch",
        expires_after: { anchor: "created_at", seconds: 5 }
      })
    ).rejects.toMatchObject({
      status: 400,
      param: "expires_after[seconds]"
    })
    expect(storedFiles().length).toBe(before)
  })

  it("an expired file is 404 at once and the sweep removes its bytes", async () => {
    const f = await a.files.create({
      file: await toFile(Buffer.from("short-lived"), "s.txt"),
      purpose: "batch",
      expires_after: { anchor: "created_at", seconds: 3600 }
    })
    expect(f.expires_at).toBeGreaterThan(f.created_at)
    await g.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE files SET expires_at = ${Date.now() - 1} WHERE id = ${f.id}`))
    await expect(a.files.retrieve(f.id)).rejects.toMatchObject({ status: 404 })
    await until("the sweep removed its bytes", () => !storedFiles().includes(f.id))
    await until("the sweep removed its row", () => queryDb(g.dataDir, "SELECT id FROM files WHERE id = ?", f.id).length === 0)
  })

  it("streams a 64 MiB upload to disk with its size and sha256", async () => {
    const hash = crypto.createHash("sha256")
    const size = 64 * 1024 * 1024
    const up = streamedUpload(size, hash)
    const res = await fetch(`${g.url}/v1/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY_A}`, "content-type": `multipart/form-data; boundary=${up.boundary}` },
      body: ReadableStreamFrom(up.body()),
      duplex: "half"
    } as RequestInit)
    const body = (await res.json()) as any
    expect(res.status, JSON.stringify(body)).toBe(200)
    expect(body.bytes).toBe(size)
    const row = queryDb(g.dataDir, "SELECT sha256, bytes FROM files WHERE id = ?", body.id)[0] as { sha256: string; bytes: number }
    expect(row).toEqual({ sha256: hash.digest("hex"), bytes: size })
    expect(fs.statSync(path.join(g.dataDir, "files", body.id)).size).toBe(size)
    await a.files.delete(body.id)
  }, 60_000)

  it("over the limit is 413 and leaves no file and no row", async () => {
    const before = storedFiles().length
    const rows = queryDb(g.dataDir, "SELECT count(*) AS n FROM files")[0] as { n: number }
    const up = streamedUpload(LIMIT + 1, crypto.createHash("sha256"))
    const res = await fetch(`${g.url}/v1/files`, {
      method: "POST",
      headers: { authorization: `Bearer ${KEY_A}`, "content-type": `multipart/form-data; boundary=${up.boundary}` },
      body: ReadableStreamFrom(up.body()),
      duplex: "half"
    } as RequestInit)
    const body = (await res.json()) as any
    expect(res.status).toBe(413)
    expect(body.error.message).toContain(`larger than ${LIMIT} bytes`)
    expect(storedFiles().length).toBe(before)
    expect(queryDb(g.dataDir, "SELECT count(*) AS n FROM files")[0]).toEqual(rows)
  }, 60_000)

  it("a client that disconnects mid-upload leaves no file and no row", async () => {
    const before = storedFiles().length
    const rows = queryDb(g.dataDir, "SELECT count(*) AS n FROM files")[0] as { n: number }
    const boundary = "----gwabort"
    const url = new URL(`${g.url}/v1/files`)
    const req = http.request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: "POST",
      headers: {
        authorization: `Bearer ${KEY_A}`,
        "content-type": `multipart/form-data; boundary=${boundary}`,
        "content-length": String(10 * 1024 * 1024)
      }
    })
    req.on("error", () => {})
    req.write(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\n\r\n`)
    req.write(crypto.randomBytes(2 * 1024 * 1024))
    // A part file exists while the upload runs.
    await until("a part file while the upload runs", () => storedFiles().some((f) => f.includes(".part-")))
    req.destroy()
    await until("no file left", () => storedFiles().length === before)
    expect(storedFiles().some((f) => f.includes(".part-"))).toBe(false)
    expect(queryDb(g.dataDir, "SELECT count(*) AS n FROM files")[0]).toEqual(rows)
  })
})

/** A web ReadableStream over an async generator (fetch streams it with duplex: "half"). */
function ReadableStreamFrom(gen: AsyncGenerator<Buffer>): ReadableStream<Uint8Array> {
  return new ReadableStream({
    async pull(controller) {
      const { value, done } = await gen.next()
      if (done) controller.close()
      else controller.enqueue(new Uint8Array(value.buffer, value.byteOffset, value.byteLength))
    }
  })
}
