import { type ChildProcess, execFile, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as https from "node:https"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { loadOrCreateCa } from "../../src/services/inspector/capture/ca.js"
import { TPROXY_STATE_FILE } from "../../src/services/inspector/Tproxy.js"
import { loadTproxyNative } from "../../src/services/inspector/tproxy/native.js"
import { taggedRules } from "../../src/services/inspector/tproxy/rules.js"
import { TRUST_SLOT } from "../../src/services/inspector/tproxy/trustStore.js"
import { makeHosts, type NsPeer, requirements } from "./namespaces.js"

/**
 * The transparent-decrypt capture mode from outside (docs/capture.md): the built gateway runs in a
 * network namespace of this test (under a private mount namespace whose trust store is a tmpfs
 * and a copy of /etc/ssl/certs, so the machine's own store is never touched), and is driven over
 * its HTTP API from inside that namespace (the route is loopback-only). The clients (curl and the
 * official OpenAI SDK, unmodified) run in the same namespace, since the rules divert locally
 * originated traffic; the fake LLM upstream (HTTPS, with its own test CA, which the gateway trusts
 * through INSPECTOR_UPSTREAM_CA_FILE) listens on this side of the veth pair.
 *
 * Needs root, iproute2, iptables, curl, unshare, update-ca-certificates and the built addon;
 * fails, never skips, naming what is missing.
 */

const ROOT_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const GATEWAY_BIN = path.join(ROOT_DIR, "bin", "gateway")
const ADMIN_KEY = "sk-tproxy-admin-0123456789abcdef"
const CLIENT_KEY = "sk-proj-clientsecret0123456789abcdefABCDEF"
const HOST = "api.openai.com"
/** The intercepted port (not 443, so nothing else on this machine is in the way) and the listener's. */
const D = 24443
const P = 28443
const GW_PORT = 20411

const TOOLS: ReadonlyArray<readonly [string, ReadonlyArray<string>, string]> = [
  ["iptables", ["--version"], "iptables (apt-get install iptables)"],
  ["iptables-save", ["--version"], "iptables-save (apt-get install iptables)"],
  ["curl", ["--version"], "curl (apt-get install curl)"],
  ["unshare", ["--version"], "unshare (util-linux)"],
  ["update-ca-certificates", ["--help"], "update-ca-certificates (apt-get install ca-certificates)"]
]

const hosts = makeHosts()
let peer: NsPeer
let work: string
let dataDir: string
let gatewayCaPem: string
let upstreamCaFile: string
const failFlag = () => path.join(work, "fail-step-3")
const failTrustFlag = () => path.join(work, "fail-trust-store")
const children: Array<ChildProcess> = []

/** What the fake upstream saw, per request. */
interface Seen {
  readonly method: string
  readonly url: string
  readonly authorization: string | undefined
  readonly host: string | undefined
  readonly body: string
  readonly from: string | undefined
}
const seen: Array<Seen> = []
let upstream: net.Server

const inNs = (command: string, ...args: Array<string>): string =>
  execFileSync("ip", ["netns", "exec", peer.name, command, ...args], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })

const runInNs = (
  argv: ReadonlyArray<string>,
  env: Record<string, string> = {}
): Promise<{ stdout: string; stderr: string; code: number }> =>
  new Promise((resolve) =>
    execFile("ip", ["netns", "exec", peer.name, ...argv], { timeout: 20_000, env: { ...process.env, ...env } }, (error, stdout, stderr) =>
      resolve({ stdout, stderr, code: error === null ? 0 : typeof error.code === "number" ? error.code : 1 })
    )
  )

/** The management API, called from inside the namespace (loopback-only routes). */
const api = async (method: string, route: string, body?: string): Promise<{ status: number; json: any }> => {
  const args = [
    "curl",
    "-s",
    "-m",
    "20",
    "-X",
    method,
    "-H",
    `authorization: Bearer ${ADMIN_KEY}`,
    "-w",
    "\n%{http_code}",
    `http://127.0.0.1:${GW_PORT}${route}`
  ]
  if (body !== undefined) args.push("-H", "content-type: application/json", "--data-raw", body)
  const r = await runInNs(args)
  const i = r.stdout.lastIndexOf("\n")
  const text = r.stdout.slice(0, i)
  return { status: Number(r.stdout.slice(i + 1)), json: text === "" ? null : JSON.parse(text) }
}
const TPROXY = "/api/tools/agent-bridge/tproxy"

/**
 * iptables-save without dated comments, with counters zeroed, and without tables that hold no
 * rule (the nf_tables backend makes a table on first use and keeps it, empty): what must be back
 * after a stop.
 */
const normalised = (saved: string) =>
  saved
    .split(/^(?=\*)/m)
    .filter((table) => /^-A /m.test(table))
    .join("")
    .split("\n")
    .filter((l) => !l.startsWith("#"))
    .map((l) => l.replace(/\[\d+:\d+\]/g, "[0:0]"))
    .join("\n")
const snapshot = () => ({
  iptables: normalised(inNs("iptables-save")),
  ip6tables: normalised(inNs("ip6tables-save")),
  rule4: inNs("ip", "-4", "rule"),
  rule6: inNs("ip", "-6", "rule"),
  route4: inNs("ip", "-4", "route", "show", "table", "all"),
  route6: inNs("ip", "-6", "route", "show", "table", "all")
})
const tagged = () => taggedRules(inNs("iptables-save", "-t", "mangle"))

/** A gateway process inside the namespace and a private mount namespace. */
interface Gw {
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  log: string
}
let gw: Gw | undefined

const startGateway = async (): Promise<Gw> => {
  // The trust store of the gateway's own mount namespace: a tmpfs for the slot's directory, a copy of /etc/ssl/certs.
  const script = [
    "set -e",
    "mount -t tmpfs tmpfs /usr/local/share/ca-certificates",
    `certs=$(mktemp -d "${work}/certs.XXXXXX")`,
    'cp -a /etc/ssl/certs/. "$certs/"',
    'mount --bind "$certs" /etc/ssl/certs',
    `exec "${process.execPath}" "${GATEWAY_BIN}"`
  ].join("\n")
  const child = spawn("ip", ["netns", "exec", peer.name, "unshare", "-m", "--propagation", "private", "sh", "-c", script], {
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: String(GW_PORT),
      INSPECTOR_UPSTREAM_CA_FILE: upstreamCaFile,
      // The gateway's own provider calls trust the upstream's test CA; the provider sits on a private address.
      NODE_EXTRA_CA_CERTS: upstreamCaFile,
      GATEWAY_ALLOW_PRIVATE_PROVIDER_URLS: "true",
      GATEWAY_ALLOW_LOCAL_PROVIDER_URLS: "true",
      // The failure injection: an iptables in front of the real one (see beforeAll).
      PATH: `${path.join(work, "bin")}:${process.env["PATH"] ?? "/usr/sbin:/usr/bin:/sbin:/bin"}`
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  children.push(child)
  const g: Gw = { child, exited: new Promise((resolve) => child.once("exit", (code) => resolve(code))), log: "" }
  child.stdout!.on("data", (d) => (g.log += d))
  child.stderr!.on("data", (d) => (g.log += d))
  for (let i = 0; i < 200; i++) {
    if (child.exitCode !== null) throw new Error(`the gateway exited (${child.exitCode}) before answering:\n${g.log}`)
    const r = await runInNs(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", `http://127.0.0.1:${GW_PORT}/api/health`])
    if (r.stdout !== "000" && r.stdout !== "") return g
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new Error(`the gateway did not answer in 20 s:\n${g.log}`)
}

const stopGateway = async (g: Gw, signal: NodeJS.Signals) => {
  g.child.kill(signal)
  return g.exited
}

/** The CA slot as the gateway's mount namespace sees it (its root through /proc). */
const slotOf = (g: Gw, rel = `usr/local/share/ca-certificates/${TRUST_SLOT}`) => path.join(`/proc/${g.child.pid}/root`, rel)

/** A fake OpenAI upstream on this side of the veth: TLS (the test CA's leaf for api.openai.com) and, for any other first byte, a plain
 * echo. */
const startUpstream = async (leaf: { keyPem: string; certPem: string }) => {
  const tlsServer = https.createServer({ key: leaf.keyPem, cert: leaf.certPem }, (req, res) => {
    let body = ""
    req.setEncoding("utf8")
    req.on("data", (d: string) => (body += d))
    // An LLM takes its time to answer (and a client like curl lives no longer than its answer).
    req.on("end", () => setTimeout(() => answer(), 200))
    const answer = () => {
      seen.push({
        method: req.method ?? "",
        url: req.url ?? "",
        authorization: req.headers.authorization,
        host: req.headers.host,
        body,
        from: req.socket.remoteAddress
      })
      const parsed = body === "" ? {} : (JSON.parse(body) as { model?: string; stream?: boolean })
      const model = parsed.model ?? "gpt-4o-mini"
      if (parsed.stream) {
        res.writeHead(200, { "content-type": "text/event-stream" })
        const chunk = (delta: object, extra: object = {}) =>
          `data: ${JSON.stringify({ id: "chatcmpl-t", object: "chat.completion.chunk", created: 1, model, choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`
        res.write(chunk({ role: "assistant", content: "" }))
        res.write(chunk({ content: "Hello" }))
        res.write(chunk({ content: " from upstream" }))
        res.write(
          `data: ${JSON.stringify({ id: "chatcmpl-t", object: "chat.completion.chunk", created: 1, model, choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 } })}\n\n`
        )
        res.end("data: [DONE]\n\n")
        return
      }
      const completion = JSON.stringify({
        id: "chatcmpl-u",
        object: "chat.completion",
        created: 1,
        model,
        choices: [{ index: 0, message: { role: "assistant", content: "Hi from upstream" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 11, completion_tokens: 4, total_tokens: 15 }
      })
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(completion) })
      res.end(completion)
    }
  })
  upstream = net.createServer((socket) => {
    socket.once("data", (first) => {
      socket.pause()
      socket.unshift(first)
      if (first[0] === 0x16) tlsServer.emit("connection", socket)
      else {
        socket.resume()
        socket.on("data", (d) => socket.end(`plain:${d}`))
      }
    })
    socket.on("error", () => undefined)
  })
  await new Promise<void>((resolve, reject) => {
    upstream.once("error", reject)
    upstream.listen(D, peer.hostAddress, () => resolve())
  })
}

beforeAll(async () => {
  const missing: Array<string> = []
  const why = requirements()
  if (why !== undefined) missing.push(why)
  for (const [tool, args, what] of TOOLS) {
    try {
      execFileSync(tool, args, { stdio: "ignore" })
    } catch {
      missing.push(`npm run test:netns needs ${what}; it never skips.`)
    }
  }
  const load = loadTproxyNative()
  if (!load.available) missing.push(`the transparent-capture addon: ${load.reason}`)
  if (!fs.existsSync(GATEWAY_BIN) || !fs.existsSync(path.join(ROOT_DIR, "dist"))) missing.push("the built gateway (npm run build)")
  if (missing.length > 0) throw new Error(missing.join("\n"))

  peer = hosts.peer(4)
  work = fs.mkdtempSync(path.join(os.tmpdir(), "gw-tproxy-"))
  dataDir = path.join(work, "data")
  // Names in the namespace: ip netns exec binds /etc/netns/<name>/hosts over /etc/hosts for its processes only.
  fs.mkdirSync(`/etc/netns/${peer.name}`, { recursive: true })
  fs.writeFileSync(`/etc/netns/${peer.name}/hosts`, `127.0.0.1 localhost\n::1 localhost\n${peer.hostAddress} ${HOST}\n`)
  // The upstream's own CA, trusted by the gateway only.
  const upstreamCa = await loadOrCreateCa(path.join(work, "upstream-ca"))
  upstreamCaFile = path.join(work, "upstream-ca.pem")
  fs.writeFileSync(upstreamCaFile, upstreamCa.certPem)
  await startUpstream(await upstreamCa.leafFor(HOST))
  // An iptables that fails step 3 (the CONNMARK rule) while the flag file exists, the real one otherwise.
  const real = execFileSync("sh", ["-c", "command -v iptables"], { encoding: "utf8" }).trim()
  fs.mkdirSync(path.join(work, "bin"))
  fs.writeFileSync(
    path.join(work, "bin", "iptables"),
    `#!/bin/sh\ncase "$*" in *"-A OUTPUT"*CONNMARK*) if [ -e "${failFlag()}" ]; then echo "iptables: injected failure at step 3" >&2; exit 4; fi;; esac\nexec ${real} "$@"\n`,
    { mode: 0o755 }
  )
  // A provider on the intercepted port too: the gateway's own calls to it must not come back to its listener.
  // And an update-ca-certificates that fails (after the slot was written) while its flag exists.
  const realUpdate = execFileSync("sh", ["-c", "command -v update-ca-certificates"], { encoding: "utf8" }).trim()
  fs.writeFileSync(
    path.join(work, "bin", "update-ca-certificates"),
    `#!/bin/sh\nif [ -e "${failTrustFlag()}" ]; then echo "update-ca-certificates: injected failure" >&2; exit 3; fi\nexec ${realUpdate} "$@"\n`,
    { mode: 0o755 }
  )
  execFileSync(
    process.execPath,
    [
      GATEWAY_BIN,
      "setup",
      "--non-interactive",
      "--password",
      "a long admin password",
      "--add-provider",
      "--provider",
      "openai-compatible",
      "--provider-base-url",
      `https://${HOST}:${D}/v1`,
      "--api-key",
      "sk-upstream-of-the-gateway",
      "--default-model",
      "gpt-4o-mini"
    ],
    {
      env: { ...process.env, DATA_DIR: dataDir, GATEWAY_API_KEY: ADMIN_KEY },
      stdio: "ignore"
    }
  )
  gw = await startGateway()
  gatewayCaPem = path.join(dataDir, "inspector", "ca.pem")
}, 120_000)

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGTERM")
  await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once("exit", r)) : undefined)))
  hosts.cleanup()
  if (peer) fs.rmSync(`/etc/netns/${peer.name}`, { recursive: true, force: true })
  await new Promise((resolve) => upstream?.close(resolve) ?? resolve(undefined))
  if (work) fs.rmSync(work, { recursive: true, force: true })
}, 60_000)

const curlChat = (stream: boolean, cacert: string) =>
  runInNs([
    "curl",
    "-sS",
    "-m",
    "15",
    "--cacert",
    cacert,
    `https://${HOST}:${D}/v1/chat/completions`,
    "-H",
    `authorization: Bearer ${CLIENT_KEY}`,
    "-H",
    "content-type: application/json",
    "-d",
    JSON.stringify({
      model: "gpt-4o-mini",
      stream,
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "say hi" }
      ]
    })
  ])

describe("transparent capture (TPROXY) in a network namespace", () => {
  let before: ReturnType<typeof snapshot>

  it("GET says available before any start; bad bodies are 400 naming the field, before any command runs", async () => {
    before = snapshot()
    const status = await api("GET", TPROXY)
    expect(status.status).toBe(200)
    expect(status.json).toMatchObject({ running: false, available: true, reason: null, interceptCount: 0, port: 8443 })
    const bad: ReadonlyArray<readonly [string, string]> = [
      ['{"dport":0}', "dport"],
      ['{"onPort":70000}', "onPort"],
      ['{"mark":-1}', "mark"],
      ['{"routeTable":1.5}', "routeTable"],
      ['{"mark":7,"bypassMark":7}', "bypassMark"],
      ['{"dport":"443"}', "dport"],
      ['{"unknown":1}', "unknown"]
    ]
    for (const [body, field] of bad) {
      const r = await api("POST", TPROXY, body)
      expect(r.status, body).toBe(400)
      expect(r.json.message, body).toContain(field)
    }
    expect(snapshot()).toEqual(before)
    expect(fs.existsSync(path.join(dataDir, "inspector", TPROXY_STATE_FILE))).toBe(false)
  })

  it("a failure at step 3 reverts steps 1 and 2, closes the listener and installs nothing: the state before", async () => {
    fs.writeFileSync(failFlag(), "")
    try {
      const r = await api("POST", TPROXY, JSON.stringify({ dport: D, onPort: P }))
      expect(r.status).toBe(409)
      expect(r.json.message).toContain("step 3")
      expect(r.json.message).toContain("injected failure")
      expect(r.json.message).toContain("nothing was left applied")
    } finally {
      fs.rmSync(failFlag())
    }
    expect(snapshot()).toEqual(before)
    expect(fs.existsSync(slotOf(gw!))).toBe(false)
    expect(fs.existsSync(path.join(dataDir, "inspector", TPROXY_STATE_FILE))).toBe(false)
    // Nothing listens on the listener's port any more.
    const probe = await runInNs(["curl", "-s", "-m", "2", "-o", "/dev/null", `http://127.0.0.1:${P}/`])
    expect(probe.code).not.toBe(0)
    const status = await api("GET", TPROXY)
    expect(status.json).toMatchObject({ running: false })
    expect(status.json.lastError).toContain("step 3")
  })

  it("a failure of the trust store's rebuild (the last step) removes the slot and reverts the rules: the state before", async () => {
    fs.writeFileSync(failTrustFlag(), "")
    try {
      const r = await api("POST", TPROXY, JSON.stringify({ dport: D, onPort: P }))
      expect(r.status).toBe(409)
      expect(r.json.message).toContain("could not be installed in the OS trust store")
      expect(r.json.message).toContain("injected failure")
    } finally {
      fs.rmSync(failTrustFlag())
    }
    expect(snapshot()).toEqual(before)
    expect(fs.existsSync(slotOf(gw!))).toBe(false)
    expect(fs.existsSync(path.join(dataDir, "inspector", TPROXY_STATE_FILE))).toBe(false)
    expect((await api("GET", TPROXY)).json).toMatchObject({ running: false })
  })

  it("starts: rules, the listener and the CA slot in the gateway's trust store (not the machine's); a second start is refused", async () => {
    const r = await api("POST", TPROXY, JSON.stringify({ dport: D, onPort: P }))
    expect(r.status, JSON.stringify(r.json)).toBe(200)
    expect(r.json).toMatchObject({
      running: true,
      available: true,
      port: P,
      interceptCount: 0,
      config: { dport: D, onPort: P, mark: 0x2333, bypassMark: 0x539, routeTable: 233 }
    })
    expect(r.json.trustStore).toMatchObject({ installed: true, path: `/usr/local/share/ca-certificates/${TRUST_SLOT}` })
    expect(r.json.commands.applied).toHaveLength(10)
    expect(tagged()).toHaveLength(3)
    expect(inNs("ip", "-4", "rule")).toContain("fwmark 0x2333 lookup 233")
    const ca = fs.readFileSync(gatewayCaPem, "utf8")
    expect(fs.readFileSync(slotOf(gw!), "utf8")).toBe(ca)
    // update-ca-certificates ran in the gateway's namespace: its bundle has the CA.
    const body = ca.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "")
    expect(fs.readFileSync(slotOf(gw!, "etc/ssl/certs/ca-certificates.crt"), "utf8").replace(/\s+/g, "")).toContain(body)
    // ...and the machine's own store was never touched.
    expect(fs.existsSync(`/usr/local/share/ca-certificates/${TRUST_SLOT}`)).toBe(false)
    expect(fs.readFileSync("/etc/ssl/certs/ca-certificates.crt", "utf8").replace(/\s+/g, "")).not.toContain(body)

    const again = await api("POST", TPROXY, "{}")
    expect(again.status).toBe(409)
    expect(again.json.message).toContain("already running")
  })

  it("curl's HTTPS call is decrypted, recorded as tproxy with LLM metadata and its process, and forwarded: the real answer comes back", async () => {
    seen.length = 0
    await api("DELETE", "/api/tools/traffic-inspector/requests")
    // A recording session keeps bodies, as a user watching would.
    const session = await api("POST", "/api/tools/traffic-inspector/sessions", JSON.stringify({ name: "tproxy" }))
    expect(session.status).toBe(201)
    const plain = await curlChat(false, gatewayCaPem)
    expect(plain.stderr).toBe("")
    expect(JSON.parse(plain.stdout)).toMatchObject({ choices: [{ message: { content: "Hi from upstream" } }] })
    const streamed = await curlChat(true, gatewayCaPem)
    expect(streamed.stdout).toContain(" from upstream")
    expect(streamed.stdout).toContain("[DONE]")

    // The upstream got the request as the client sent it (the key too: the gateway forwards, it does not replace).
    expect(seen).toHaveLength(2)
    expect(seen[0]).toMatchObject({
      method: "POST",
      url: "/v1/chat/completions",
      authorization: `Bearer ${CLIENT_KEY}`,
      host: `${HOST}:${D}`
    })
    expect(JSON.parse(seen[0]!.body)).toMatchObject({
      model: "gpt-4o-mini",
      messages: [{ role: "system" }, { role: "user", content: "say hi" }]
    })

    // Two connections diverted, no more: the gateway's own connections to the upstream carried the bypass mark.
    const status = await api("GET", TPROXY)
    expect(status.json.interceptCount).toBe(2)

    const list = await api("GET", "/api/tools/traffic-inspector/requests?source=tproxy&profile=llm")
    expect(list.status).toBe(200)
    const entries = (list.json.requests as Array<any>).sort((a, b) => Number(a.llm.streamed) - Number(b.llm.streamed))
    expect(entries).toHaveLength(2)
    for (const e of entries) {
      expect(e, JSON.stringify(e)).toMatchObject({
        source: "tproxy",
        host: HOST,
        status: 200,
        detectedKind: "llm",
        processName: "curl",
        llm: { provider: "openai", model: "gpt-4o-mini" }
      })
      expect(e.pid).toBeGreaterThan(0)
    }
    expect(entries[0].llm).toMatchObject({ streamed: false, tokensIn: 11, tokensOut: 4 })
    expect(entries[1].llm).toMatchObject({ streamed: true, tokensIn: 12, tokensOut: 3 })
    expect(entries[0].llm.costEstimateUsd).toBeGreaterThan(0)

    // The detail: the key masked, the merged answer of the stream.
    const detail = await api("GET", `/api/tools/traffic-inspector/requests/${entries[1].id}`)
    expect(JSON.stringify(detail.json)).not.toContain(CLIENT_KEY)
    expect(detail.json.conversation.response).toEqual([{ role: "assistant", blocks: [{ type: "text", text: "Hello from upstream" }] }])

    // The session exports to HAR with both calls.
    expect(
      (await api("PATCH", `/api/tools/traffic-inspector/sessions/${session.json.id}`, JSON.stringify({ action: "stop" }))).status
    ).toBe(200)
    const har = await api("GET", `/api/tools/traffic-inspector/sessions/${session.json.id}/export.har`)
    expect(har.json.log.entries.map((e: any) => e.request.url)).toEqual([
      `https://${HOST}:${D}/v1/chat/completions`,
      `https://${HOST}:${D}/v1/chat/completions`
    ])
  })

  it("the official OpenAI SDK (trusting the gateway CA through NODE_EXTRA_CA_CERTS) gets its answer through it", async () => {
    const openai = pathToFileURL(path.join(ROOT_DIR, "node_modules", "openai", "index.mjs")).href
    const script = `
      const { default: OpenAI } = await import(${JSON.stringify(openai)})
      const client = new OpenAI({ apiKey: ${JSON.stringify(CLIENT_KEY)}, baseURL: "https://${HOST}:${D}/v1", maxRetries: 0 })
      const r = await client.chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
      console.log(JSON.stringify({ content: r.choices[0].message.content, tokens: r.usage.total_tokens }))
    `
    const r = await runInNs([process.execPath, "--input-type=module", "-e", script], { NODE_EXTRA_CA_CERTS: gatewayCaPem })
    expect(r.stderr).toBe("")
    expect(JSON.parse(r.stdout)).toEqual({ content: "Hi from upstream", tokens: 15 })
    const list = await api("GET", "/api/tools/traffic-inspector/requests?source=tproxy&profile=llm")
    const sdk = (list.json.requests as Array<any>).filter((e) => e.agent !== "curl")
    expect(sdk, JSON.stringify(list.json.requests)).toHaveLength(1)
    expect(sdk[0]).toMatchObject({ processName: "node", llm: { model: "gpt-4o-mini", tokensOut: 4 } })
  })

  it("the gateway's own provider call to the intercepted port carries the bypass mark: answered, recorded as agent-bridge only", async () => {
    const before = (await api("GET", TPROXY)).json.interceptCount as number
    seen.length = 0
    const r = await runInNs([
      "curl",
      "-sS",
      "-m",
      "15",
      `http://127.0.0.1:${GW_PORT}/v1/chat/completions`,
      "-H",
      `authorization: Bearer ${ADMIN_KEY}`,
      "-H",
      "content-type: application/json",
      "-d",
      JSON.stringify({ model: "openai-compatible/gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
    ])
    // (The gateway asks its upstreams for a stream and collects it: the streamed text.)
    expect(JSON.parse(r.stdout), r.stdout).toMatchObject({ choices: [{ message: { content: "Hello from upstream" } }] })
    // The upstream was called by the gateway, with the gateway's provider key...
    expect(seen.map((s) => s.authorization)).toEqual(["Bearer sk-upstream-of-the-gateway"])
    // ...over a connection the rules left alone.
    expect((await api("GET", TPROXY)).json.interceptCount).toBe(before)
    const list = await api("GET", "/api/tools/traffic-inspector/requests")
    const mine = (list.json.requests as Array<any>).filter((e) => e.source === "tproxy" && e.agent !== "curl" && e.processName !== "node")
    expect(mine).toEqual([])
  })

  it("traffic on the port that is not TLS is relayed untouched and recorded as metadata", async () => {
    const r = await runInNs([
      process.execPath,
      "-e",
      `const s = require("node:net").connect(${D}, ${JSON.stringify(peer.hostAddress)}, () => s.write("hello")); let t = ""; s.on("data", (d) => (t += d)); s.on("close", () => console.log(t))`
    ])
    expect(r.stdout.trim()).toBe("plain:hello")
    const list = await api("GET", "/api/tools/traffic-inspector/requests?source=tproxy")
    const tcp = (list.json.requests as Array<any>).find((e) => e.method === "TCP")
    expect(tcp).toMatchObject({ source: "tproxy", host: peer.hostAddress, port: D, status: 200 })
  })

  it("a client that does not trust the CA is refused by itself, and the entry says why", async () => {
    const r = await curlChat(false, upstreamCaFile)
    expect(r.code).not.toBe(0)
    const list = await api("GET", "/api/tools/traffic-inspector/requests?source=tproxy")
    const refused = (list.json.requests as Array<any>).filter((e) => e.status === "error")
    expect(refused.length).toBeGreaterThan(0)
  })

  it("DELETE removes the rules and the CA slot: the state before; the client then reaches the upstream directly", async () => {
    const r = await api("DELETE", TPROXY)
    expect(r.status).toBe(200)
    expect(r.json).toMatchObject({ running: false, lastError: null })
    expect(snapshot()).toEqual(before)
    expect(fs.existsSync(slotOf(gw!))).toBe(false)
    expect(fs.existsSync(path.join(dataDir, "inspector", TPROXY_STATE_FILE))).toBe(false)
    seen.length = 0
    const direct = await curlChat(false, upstreamCaFile)
    expect(JSON.parse(direct.stdout)).toMatchObject({ choices: [{ message: { content: "Hi from upstream" } }] })
    expect(seen).toHaveLength(1)
    // DELETE again: nothing to do, nothing changed.
    expect((await api("DELETE", TPROXY)).status).toBe(200)
    expect(snapshot()).toEqual(before)
  })

  it("SIGTERM of the gateway reverts what it applied", async () => {
    expect((await api("POST", TPROXY, JSON.stringify({ dport: D, onPort: P }))).status).toBe(200)
    expect(tagged()).toHaveLength(3)
    expect(await stopGateway(gw!, "SIGTERM")).toBe(0)
    expect(snapshot()).toEqual(before)
    expect(fs.existsSync(path.join(dataDir, "inspector", TPROXY_STATE_FILE))).toBe(false)
  }, 60_000)

  it("after a crash (SIGKILL) the rules stay; the next start of the gateway removes them before anything else", async () => {
    gw = await startGateway()
    expect((await api("POST", TPROXY, JSON.stringify({ dport: D, onPort: P }))).status).toBe(200)
    await stopGateway(gw, "SIGKILL")
    expect(tagged()).toHaveLength(3)
    expect(inNs("ip", "-4", "rule")).toContain("lookup 233")
    gw = await startGateway()
    expect(snapshot()).toEqual(before)
    const status = await api("GET", TPROXY)
    expect(status.json).toMatchObject({ running: false, available: true })
    expect(gw.log).toContain("left running by process")
    // And it starts again cleanly.
    expect((await api("POST", TPROXY, JSON.stringify({ dport: D, onPort: P }))).status).toBe(200)
    expect((await api("DELETE", TPROXY)).status).toBe(200)
    expect(snapshot()).toEqual(before)
  }, 90_000)
})
