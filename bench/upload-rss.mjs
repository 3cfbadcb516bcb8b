#!/usr/bin/env node
// `npm run build && node bench/upload-rss.mjs [--mib 512]`: the RSS bound of `POST /v1/files`.
// Starts the gateway (production build) as its own process on a fresh DATA_DIR, uploads a
// generated file of N MiB (default 512, the limit) as one streamed multipart body, samples the
// gateway's RSS (/proc/<pid>/status VmRSS) every 50 ms, and prints its growth over the idle
// baseline measured in the same run. The bound: under 64 MB for 512 MiB. Exits 1 above it.
import { spawn, spawnSync } from "node:child_process"
import * as crypto from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
const BIN = path.join(ROOT, "bin", "gateway")
const mib = process.argv.includes("--mib") ? Number(process.argv[process.argv.indexOf("--mib") + 1]) : 512
const KEY = "sk-gateway-bench-0123456789abcdef"
const BOUND_MB = 64
const say = (m) => console.error(`[upload-rss] ${m}`)

const dataDir = mkdtempSync(path.join(os.tmpdir(), "gw-upload-rss-"))
const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", DATA_DIR: dataDir, LOG_FORMAT: "json", LOG_LEVEL: "info" }
const setup = spawnSync(process.execPath, [BIN, "setup", "--non-interactive"], { env: { ...env, GATEWAY_API_KEY: KEY }, encoding: "utf8" })
if (setup.status !== 0) throw new Error(`setup failed: ${setup.stderr}`)

const child = spawn(process.execPath, [BIN, "--port", "0"], { env, stdio: ["ignore", "pipe", "pipe"] })
const url = await new Promise((resolve, reject) => {
  let out = ""
  const on = (c) => {
    out += c.toString()
    const m = /listening on (http:\/\/[^ "]+)/.exec(out)
    if (m) resolve(m[1])
  }
  child.stdout.on("data", on)
  child.stderr.on("data", on)
  child.on("exit", (code) => reject(new Error(`gateway exited (${code}):\n${out}`)))
})
const rssMb = () => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))
  return m ? Number(m[1]) / 1024 : NaN
}

try {
  await new Promise((r) => setTimeout(r, 1000))
  const baseline = rssMb()
  let peak = baseline
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb())), 50)
  const boundary = "----gwbench" + crypto.randomUUID().replace(/-/g, "")
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`
  )
  const tail = Buffer.from(`\r\n--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--${boundary}--\r\n`)
  const chunk = crypto.randomBytes(1024 * 1024)
  let sent = 0
  const body = new ReadableStream({
    pull(controller) {
      if (sent === 0) controller.enqueue(head)
      if (sent < mib) {
        controller.enqueue(new Uint8Array(chunk))
        sent++
      } else {
        controller.enqueue(tail)
        controller.close()
      }
    }
  })
  const started = Date.now()
  const res = await fetch(`${url}/v1/files`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": `multipart/form-data; boundary=${boundary}` },
    body,
    duplex: "half"
  })
  const answer = await res.json()
  clearInterval(sampler)
  const secs = (Date.now() - started) / 1000
  if (res.status !== 200) throw new Error(`upload answered ${res.status}: ${JSON.stringify(answer)}`)
  const growth = peak - baseline
  console.log(
    JSON.stringify({
      mib,
      status: res.status,
      bytes: answer.bytes,
      seconds: secs,
      mibPerSecond: +(mib / secs).toFixed(1),
      rssBaselineMb: +baseline.toFixed(1),
      rssPeakMb: +peak.toFixed(1),
      rssGrowthMb: +growth.toFixed(1),
      boundMb: BOUND_MB,
      ratioToBound: +(growth / BOUND_MB).toFixed(2)
    })
  )
  say(
    `${mib} MiB in ${secs.toFixed(1)} s; RSS ${baseline.toFixed(1)} → ${peak.toFixed(1)} MB (+${growth.toFixed(1)} MB, bound ${BOUND_MB} MB)`
  )
  process.exitCode = growth < BOUND_MB ? 0 : 1
} finally {
  child.kill("SIGTERM")
  await new Promise((r) => child.once("exit", r))
  rmSync(dataDir, { recursive: true, force: true })
}
