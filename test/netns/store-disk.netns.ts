import { execFileSync } from "node:child_process"
import { createRequire } from "node:module"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BIN, startServerProcess, type ServerProcess } from "../support/cli.js"
import { FakeUpstream } from "../support/fakeUpstream.js"
import { call } from "../support/gateway.js"
import { until } from "../support/until.js"
import { chatOnce, sample } from "../scale/support/load.js"
import { requirements } from "./namespaces.js"

/**
 * The SQLite store on a disk that fails (docs/resilience.md, "When the store fails"): a gateway
 * process in a mount namespace of its own (`unshare --mount`), its DATA_DIR a filesystem only
 * that namespace sees: a 16 MB tmpfs that the test fills up and frees again, and an ext4 image
 * on a loop device that the kernel turns read-only on an error, as a failing disk does. Nothing
 * outside the namespace is mounted; the loop device is detached at the end. `npm run test:netns`
 * (root).
 */
const ADMIN_KEY = "sk-gateway-store-disk-admin-0123456789"
const admin = { authorization: `Bearer ${ADMIN_KEY}` }
const LOAD = { model: "oai/gpt-4o", headers: admin, timeoutMs: 10_000 }

let up: FakeUpstream
const started: Array<ServerProcess> = []
const cleanups: Array<() => void> = []

/** Runs `command` in the gateway's mount namespace (it sees the namespace's mounts). */
const inside = (gw: ServerProcess, command: ReadonlyArray<string>, options: { readonly allowFailure?: boolean } = {}): string => {
  try {
    return execFileSync("nsenter", ["-t", String(gw.child.pid), "-m", "--", ...command], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"]
    })
  } catch (e) {
    if (options.allowFailure) return ""
    throw e
  }
}

/** One SQL query on the gateway's database, read from inside its namespace. */
const query = (gw: ServerProcess, dataDir: string, sql: string): number => {
  const script = `const D=require(${JSON.stringify(createRequire(import.meta.url).resolve("better-sqlite3"))});const d=new D(${JSON.stringify(path.join(dataDir, "gateway.db"))},{readonly:true});process.stdout.write(String(d.prepare(${JSON.stringify(sql)}).pluck().get()))`
  return Number(inside(gw, [process.execPath, "-e", script]))
}

const metrics = async (gw: ServerProcess) => (await fetch(`${gw.url}/metrics`, { headers: admin })).text()

/**
 * A gateway whose DATA_DIR is `mount` (a shell line run in its new mount namespace before it
 * starts; `$D` is the directory), set up with an admin key and a connection to the fake upstream.
 */
const gatewayOn = async (mount: string): Promise<{ readonly gw: ServerProcess; readonly dataDir: string }> => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "gw-store-disk-"))
  const env = { DATA_DIR: dataDir, GATEWAY_ENV_FILE: path.join(dataDir, ".env"), GATEWAY_API_KEY: ADMIN_KEY, D: dataDir }
  const script = `${mount} && "$0" ${JSON.stringify(BIN)} setup --non-interactive >/dev/null 2>&1 && exec "$0" "$@"`
  const gw = await startServerProcess(env, [], { prefix: ["unshare", "--mount", "--propagation", "private", "sh", "-c", script] })
  started.push(gw)
  const added = await call(`${gw.url}/api/providers`, {
    body: { provider: "openai", name: "oai", apiKey: "sk-upstream", baseUrl: up.baseUrl("openai-chat"), models: ["gpt-4o"] },
    headers: admin
  })
  expect(added.status, JSON.stringify(added.body)).toBe(201)
  return { gw, dataDir }
}

beforeAll(async () => {
  const missing = requirements()
  if (missing) throw new Error(missing)
  for (const tool of ["unshare", "nsenter", "losetup", "mkfs.ext4"]) {
    try {
      execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" })
    } catch {
      throw new Error(`the store-disk tests need ${tool} (util-linux, e2fsprogs: apt-get install util-linux e2fsprogs); they never skip`)
    }
  }
  up = await FakeUpstream.start()
  up.always({ content: "steady" })
})

afterAll(async () => {
  for (const gw of started) if (gw.child.exitCode === null) await gw.stop("SIGKILL")
  for (const c of cleanups) c()
  await up?.close()
})

describe("SQLite on a filesystem that fills up", () => {
  it("inference goes on, writes that must store answer 503 naming the full disk, usage rows wait and are written once space is back, and the process never exits", async () => {
    const { gw, dataDir } = await gatewayOn(`mount -t tmpfs -o size=16m tmpfs "$D"`)
    let answered = 1
    expect((await chatOnce(gw.url, LOAD, false)).status).toBe(200)
    await until("the first row is written", () => query(gw, dataDir, "SELECT count(*) FROM usage") === 1, 5_000)

    // Fill the filesystem to the last block (dd stops at ENOSPC).
    inside(gw, ["dd", "if=/dev/zero", `of=${path.join(dataDir, "filler")}`, "bs=64k"], { allowFailure: true })
    // Requests go on until the store refuses a write (the WAL's free pages are used first).
    for (let i = 0; i < 3000 && sample(await metrics(gw), "gateway_store_up") !== 0; i++) {
      const o = await chatOnce(gw.url, LOAD, i % 2 === 0)
      expect(o.status, o.body).toBe(200)
      answered++
    }
    expect(sample(await metrics(gw), "gateway_store_up")).toBe(0)
    for (let i = 0; i < 40; i++) {
      const o = await chatOnce(gw.url, LOAD, i % 2 === 0)
      expect(o.status, o.body).toBe(200)
      answered++
    }
    const key = await call(`${gw.url}/api/keys`, { body: { name: "while full", scopes: ["inference"] }, headers: admin })
    expect(key.status, JSON.stringify(key.body)).toBe(503)
    expect(key.body.message).toMatch(/^store_unavailable: the disk holding the database is full/)
    // A route that must store: a file upload.
    const form = new FormData()
    form.append("purpose", "batch")
    form.append(
      "file",
      new Blob([
        `${JSON.stringify({ custom_id: "a", method: "POST", url: "/v1/chat/completions", body: { model: "oai/gpt-4o", messages: [] } })}\n`
      ]),
      "in.jsonl"
    )
    const upload = await fetch(`${gw.url}/v1/files`, { method: "POST", headers: admin, body: form })
    const uploadBody = (await upload.json()) as { error?: { code?: string; message?: string } }
    expect(upload.status, JSON.stringify(uploadBody)).toBe(503)
    expect(uploadBody.error?.code).toBe("store_unavailable")
    expect(sample(await metrics(gw), "gateway_store_backlog")).toBeGreaterThan(0)
    expect(gw.output()).toMatch(/store: the disk holding the database is full/)

    // Space is back: every answered request's row is written.
    inside(gw, ["rm", path.join(dataDir, "filler")])
    await until("every usage row is written", () => query(gw, dataDir, "SELECT count(*) FROM usage") === answered, 15_000)
    await until("the gauge says the store takes writes", async () => sample(await metrics(gw), "gateway_store_up") === 1, 5_000)
    expect((await call(`${gw.url}/api/keys`, { body: { name: "after", scopes: ["inference"] }, headers: admin })).status).toBe(201)
    expect(gw.child.exitCode).toBe(null)
    expect(gw.output()).not.toMatch(/dropping usage row/)
    expect(await gw.stop()).toBe(0)
  }, 120_000)
})

describe("SQLite on a disk the kernel turns read-only", () => {
  it("inference goes on, writes answer 503 naming the read-only disk, rows are held, the process never exits and stops cleanly", async () => {
    const image = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gw-store-ro-")), "disk.img")
    fs.writeFileSync(image, "")
    fs.truncateSync(image, 64 * 1024 * 1024)
    execFileSync("mkfs.ext4", ["-q", "-F", image])
    const loop = execFileSync("losetup", ["-f", "--show", image], { encoding: "utf8" }).trim()
    cleanups.push(() => {
      try {
        execFileSync("losetup", ["-d", loop])
      } catch {
        // already detached
      }
      fs.rmSync(path.dirname(image), { recursive: true, force: true })
    })
    const { gw, dataDir } = await gatewayOn(`mount -o errors=remount-ro ${loop} "$D"`)
    let answered = 0
    for (let i = 0; i < 10; i++) {
      expect((await chatOnce(gw.url, LOAD, i % 2 === 0)).status).toBe(200)
      answered++
    }
    await until("the rows are written", () => query(gw, dataDir, "SELECT count(*) FROM usage") === answered, 5_000)

    // The kernel's own error path (errors=remount-ro): the filesystem goes read-only under the open files.
    fs.writeFileSync(`/sys/fs/ext4/${path.basename(loop)}/trigger_fs_error`, "1")
    for (let i = 0; i < 3000 && sample(await metrics(gw), "gateway_store_up") !== 0; i++) {
      const o = await chatOnce(gw.url, LOAD, i % 2 === 0)
      expect(o.status, o.body).toBe(200)
    }
    expect(sample(await metrics(gw), "gateway_store_up")).toBe(0)
    for (let i = 0; i < 20; i++) {
      const o = await chatOnce(gw.url, LOAD, i % 2 === 0)
      expect(o.status, o.body).toBe(200)
    }
    const key = await call(`${gw.url}/api/keys`, { body: { name: "while read-only", scopes: ["inference"] }, headers: admin })
    expect(key.status, JSON.stringify(key.body)).toBe(503)
    expect(key.body.message).toMatch(
      /^store_unavailable: the (database is read-only|database's disk failed|data directory is on a read-only file system)/
    )
    expect(sample(await metrics(gw), "gateway_store_backlog")).toBeGreaterThan(0)
    expect(gw.child.exitCode).toBe(null)
    // A graceful stop with the disk still read-only: the rows held are counted as lost and said so; the process exits 0.
    expect(await gw.stop()).toBe(0)
    expect(gw.output()).toMatch(/queued rows could not be written before the gateway stopped/)
  }, 120_000)
})

describe("SQLite in a data directory mounted read-only", () => {
  it("the start stops with one line naming the directory and the cause, not a stack trace", async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "gw-store-ro-start-"))
    const env = { DATA_DIR: dataDir, GATEWAY_ENV_FILE: path.join(dataDir, ".env"), GATEWAY_API_KEY: ADMIN_KEY, D: dataDir }
    // A database made by an earlier start, then the directory bound read-only over itself (root ignores file modes).
    const script = `"$0" ${JSON.stringify(BIN)} setup --non-interactive >/dev/null 2>&1 && mount --bind "$D" "$D" && mount -o remount,bind,ro "$D" && exec "$0" "$@"`
    const start = startServerProcess(env, [], { prefix: ["unshare", "--mount", "--propagation", "private", "sh", "-c", script] })
    const failure = await start.then(
      () => undefined,
      (e: Error) => e.message
    )
    expect(failure).toMatch(/gateway exited \(1\) before listening/)
    expect(failure).toContain(`the data directory ${dataDir} is on a read-only file system`)
    expect(failure).not.toMatch(/\n\s+at /)
  })
})
