import Database from "better-sqlite3"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { startSqliteWriter } from "../src/platform/store/SqliteWriterThread.js"
import { nativeAddonPath } from "../src/platform/system/nativeAddon.js"

/**
 * src/platform/store/SqliteWriterThread.ts writes a batch's rows in statements of a few fixed
 * sizes (largest first): every row of every batch size is written once, in order, the replacing
 * table keeps the last row of each key, and deletes of any count remove exactly their keys.
 */
const dirs: Array<string> = []
afterAll(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true })
})

const fresh = () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sqlite-writer-"))
  dirs.push(dir)
  const file = path.join(dir, "t.db")
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.exec("CREATE TABLE log (n INTEGER NOT NULL, label TEXT, data BLOB); CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
  db.close()
  return file
}

const read = <A>(file: string, sql: string): Array<A> => {
  const db = new Database(file, { readonly: true })
  try {
    return db.prepare(sql).all() as Array<A>
  } finally {
    db.close()
  }
}

describe("the SQLite writer thread's statements", () => {
  it("writes batches of every size whole and in order, binary values included", { timeout: 30_000 }, async () => {
    const file = fresh()
    const { writer, started } = startSqliteWriter(file, { kv: ["k"] })
    await started
    let next = 0
    const sizes = [1, 2, 3, 4, 5, 31, 32, 33, 37, 255, 256, 257, 300, 500]
    for (const size of sizes) {
      const rows = Array.from({ length: size }, () => {
        const n = next++
        return {
          table: "log",
          row: n % 7 === 0 ? { n, label: `row ${n}`, data: new Uint8Array([n % 256, 1]) } : { n, label: `row ${n}`, data: null }
        }
      })
      const result = await writer.write(rows)
      expect(result.dropped).toEqual([])
      expect(result.unavailable).toBeUndefined()
    }
    await writer.close()
    const rows = read<{ n: number; label: string; data: Uint8Array | null }>(file, "SELECT n, label, data FROM log ORDER BY rowid")
    expect(rows.map((r) => r.n)).toEqual(Array.from({ length: next }, (_, i) => i))
    expect(rows.every((r) => r.label === `row ${r.n}`)).toBe(true)
    expect(rows.filter((r) => r.data !== null).map((r) => [...r.data!])).toEqual(
      Array.from({ length: next }, (_, i) => i)
        .filter((n) => n % 7 === 0)
        .map((n) => [n % 256, 1])
    )
  })

  it("keeps the last row of each key across statement boundaries, and deletes any number of keys", { timeout: 30_000 }, async () => {
    const file = fresh()
    const { writer, started } = startSqliteWriter(file, { kv: ["k"] })
    await started
    // 300 rows over 100 keys: each key written three times, the last value wins.
    const rows = Array.from({ length: 300 }, (_, i) => ({ table: "kv", row: { k: `k${i % 100}`, v: `v${i}` } }))
    expect((await writer.write(rows)).dropped).toEqual([])
    const kept = read<{ k: string; v: string }>(file, "SELECT k, v FROM kv ORDER BY k")
    expect(kept.length).toBe(100)
    expect(Object.fromEntries(kept.map((r) => [r.k, r.v]))).toEqual(
      Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, `v${200 + i}`]))
    )
    // 37 keys deleted in the same transaction as one more row.
    const gone = Array.from({ length: 37 }, (_, i) => `k${i * 2}`)
    expect(
      (await writer.write([{ table: "kv", row: { k: "extra", v: "x" } }], [{ table: "kv", column: "k", values: gone }])).dropped
    ).toEqual([])
    await writer.close()
    const left = read<{ k: string }>(file, "SELECT k FROM kv").map((r) => r.k)
    expect(left.length).toBe(100 - 37 + 1)
    expect(left.some((k) => gone.includes(k))).toBe(false)
    expect(left).toContain("extra")
  })
})

/** This process's threads: id, nice value and scheduling policy (/proc/<pid>/task/<tid>/stat, fields 19 and 41). */
const threads = (): Map<string, { readonly nice: number; readonly policy: number }> => {
  const out = new Map<string, { readonly nice: number; readonly policy: number }>()
  for (const tid of fs.readdirSync("/proc/self/task")) {
    try {
      const stat = fs.readFileSync(`/proc/self/task/${tid}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      out.set(tid, { nice: Number(fields[16]), policy: Number(fields[38]) })
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out
}

describe.runIf(process.platform === "linux")("the SQLite writer thread's place on the core", () => {
  it("runs at nice 10, and under SCHED_BATCH when the native addon is built, so a batch never preempts the main thread", async () => {
    const before = threads()
    // A suite run at a nice value above 10 leaves the writer at its own (lowering it needs a privilege).
    const expectedNice = Math.max(10, before.get(String(process.pid))?.nice ?? 0)
    const file = fresh()
    const { writer, started } = startSqliteWriter(file, {})
    await started
    await writer.write([{ table: "log", row: { n: 1, label: "one", data: null } }])
    const added = [...threads()].filter(([tid]) => !before.has(tid)).map(([, t]) => t)
    const writerThread = added.find((t) => t.nice === expectedNice)
    await writer.close()
    expect(writerThread, `threads started with the writer: ${JSON.stringify(added)}`).toBeDefined()
    // SCHED_BATCH is 3, SCHED_OTHER 0 (sched.h). npm install builds the addon where a C compiler is.
    expect(writerThread!.policy, "SCHED_BATCH is set through the native addon: rebuild it with npm run build:native").toBe(
      nativeAddonPath() === undefined ? 0 : 3
    )
    // The main thread keeps its policy and nice value.
    expect(threads().get(String(process.pid))).toEqual(before.get(String(process.pid)))
  })
})
