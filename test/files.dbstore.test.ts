import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import OpenAI, { toFile } from "openai"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { removeOrphans } from "../src/inference/files/dbFileStore.js"
import { queryDb } from "./support/db.js"
import { startGateway, type TestGateway } from "./support/gateway.js"
import { until } from "./support/until.js"

/**
 * GATEWAY_FILE_STORE=database (the default on PostgreSQL, docs/scale-out.md "Files"): the bytes of
 * `/v1/files` in the database, in 1 MiB chunks, nothing under DATA_DIR/files; the same contract
 * as the disk store (nothing left by an upload over the limit or cut off).
 */
const LIMIT = 6 * 1024 * 1024
let g: TestGateway
let client: OpenAI

beforeAll(async () => {
  g = await startGateway({ env: { GATEWAY_FILE_STORE: "database", GATEWAY_FILES_MAX_BYTES: String(LIMIT) } })
  client = new OpenAI({ apiKey: "any", baseURL: `${g.url}/v1`, maxRetries: 0 })
})
afterAll(() => g?.close())

const chunkRows = () =>
  queryDb(g.dataDir, "SELECT object_id, seq, length(data) AS n FROM file_chunks ORDER BY object_id, seq") as Array<{
    object_id: string
    seq: number
    n: number
  }>
const onDisk = () => (fs.existsSync(path.join(g.dataDir, "files")) ? fs.readdirSync(path.join(g.dataDir, "files")) : [])

describe("the database file store", () => {
  it("keeps a 2.5 MiB upload in three chunks and gives back the same bytes; delete removes them", async () => {
    const bytes = crypto.randomBytes(2.5 * 1024 * 1024)
    const created = await client.files.create({ file: await toFile(bytes, "big.bin"), purpose: "user_data" })
    expect(created.bytes).toBe(bytes.length)
    const rows = chunkRows().filter((r) => r.object_id === created.id)
    expect(rows.map((r) => r.n)).toEqual([1024 * 1024, 1024 * 1024, 0.5 * 1024 * 1024])
    expect(onDisk()).toEqual([])
    const stored = queryDb(g.dataDir, "SELECT bytes, sha256 FROM file_objects WHERE id = ?", created.id)[0]
    expect(stored).toEqual({ bytes: bytes.length, sha256: crypto.createHash("sha256").update(bytes).digest("hex") })
    const back = Buffer.from(await (await client.files.content(created.id)).arrayBuffer())
    expect(back.equals(bytes)).toBe(true)
    await client.files.delete(created.id)
    expect(chunkRows().filter((r) => r.object_id === created.id)).toEqual([])
    expect(queryDb(g.dataDir, "SELECT count(*) AS n FROM file_objects WHERE id = ?", created.id)[0]).toEqual({ n: 0 })
  })

  it("an empty file and a small one read back exactly", async () => {
    for (const content of [Buffer.alloc(0), Buffer.from('{"a":1}\n')]) {
      const created = await client.files.create({ file: await toFile(content, "f.jsonl"), purpose: "batch" })
      expect(Buffer.from(await (await client.files.content(created.id)).arrayBuffer()).equals(content)).toBe(true)
    }
  })

  it("over the limit is 413 and leaves no chunk", async () => {
    const before = chunkRows().length
    const err = await client.files
      .create({ file: await toFile(crypto.randomBytes(LIMIT + 10), "x.bin"), purpose: "user_data" })
      .catch((e) => e)
    expect(err.status).toBe(413)
    expect(chunkRows().length).toBe(before)
  })

  it("an upload cut off mid-way leaves no chunk once it is gone", async () => {
    const before = chunkRows().length
    const boundary = "----gwdbabort"
    const url = new URL(`${g.url}/v1/files`)
    const req = http.request({
      host: url.hostname,
      port: url.port,
      path: url.pathname,
      method: "POST",
      headers: { "content-type": `multipart/form-data; boundary=${boundary}`, "content-length": String(5 * 1024 * 1024) }
    })
    req.on("error", () => {})
    req.write(
      `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.bin"\r\n\r\n`
    )
    req.write(crypto.randomBytes(2 * 1024 * 1024))
    // Chunks exist under a temporary id while the upload runs.
    await until("chunks of the running upload", () => chunkRows().some((r) => r.object_id.includes(".part-")))
    req.destroy()
    await until("the cut upload's chunks are gone", () => chunkRows().length === before)
  })

  it("chunks a crashed gateway left under a temporary id are removed an hour later, not before", async () => {
    const old = `file-x.part-${Date.now() - 2 * 60 * 60 * 1000}-abc`
    const fresh = `file-y.part-${Date.now()}-def`
    const removed = await g.run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        for (const id of [old, fresh]) yield* sql`INSERT INTO file_chunks (object_id, seq, data) VALUES (${id}, 0, ${Buffer.from("x")})`
        return yield* removeOrphans(sql, Date.now())
      })
    )
    expect(removed).toBe(1)
    expect(chunkRows().map((r) => r.object_id)).toContain(fresh)
    expect(chunkRows().map((r) => r.object_id)).not.toContain(old)
  })
})
