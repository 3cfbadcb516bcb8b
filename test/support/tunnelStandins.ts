import * as fs from "node:fs"
import * as path from "node:path"

/**
 * Stand-ins for the tunnel vendors' programs (docs/tunnels.md): small scripts that print what the
 * real tools print, keep their state in files a test can read and change, and record how they
 * were called. The vendors' servers are outside this machine: these replace them.
 */

const script = (file: string, body: string) => {
  fs.writeFileSync(file, `#!${process.execPath}\n${body}`, { mode: 0o755 })
  fs.chmodSync(file, 0o755)
  return file
}

export { alive } from "./processes.js"

export interface Run {
  readonly pid: number
  readonly args: Array<string>
  readonly authtoken?: string
  readonly uid?: number
  readonly sudoUser?: string
}

const runsIn = (state: string, prefix: string): Array<Run> =>
  fs
    .readdirSync(state)
    .filter((f) => f.startsWith(prefix))
    .sort((a, b) => Number(a.slice(prefix.length)) - Number(b.slice(prefix.length)))
    .map((f) => JSON.parse(fs.readFileSync(path.join(state, f), "utf8")) as Run)

/**
 * The token tunnel's agent (`ngrok http <addr> --log stdout --log-format json`): JSON log lines,
 * "started tunnel" with its url once the edge serves it. The authtoken comes in NGROK_AUTHTOKEN;
 * "bad-token" is refused the way the edge refuses one (and the agent keeps retrying).
 * `gated`: the edge serves only once the test calls `serve()` (a fixed delay is a race on a busy
 * machine), else after `startDelayMs`.
 */
export const tokenAgent = (dir: string, options: { startDelayMs?: number; gated?: boolean } = {}) => {
  const state = path.join(dir, "agent-state")
  fs.mkdirSync(state, { recursive: true })
  const file = script(
    path.join(dir, "fake-ngrok"),
    `const fs = require("node:fs"), path = require("node:path")
const state = ${JSON.stringify(state)}
const run = fs.readdirSync(state).filter((f) => f.startsWith("run-")).length + 1
const token = process.env.NGROK_AUTHTOKEN
fs.writeFileSync(path.join(state, ".tmp-" + process.pid), JSON.stringify({ pid: process.pid, args: process.argv.slice(2), authtoken: token }))
fs.renameSync(path.join(state, ".tmp-" + process.pid), path.join(state, "run-" + run))
const log = (o) => process.stdout.write(JSON.stringify({ t: new Date().toISOString(), ...o }) + "\\n")
log({ lvl: "info", msg: "open config file", path: "/root/.config/ngrok/ngrok.yml", err: null })
if (token === "bad-token") {
  log({ lvl: "eror", msg: "failed to reconnect session", obj: "tunnels.session", err: "authentication failed: The authtoken you specified does not look like a proper ngrok tunnel authtoken.\\nYour authtoken: " + token + "\\nInstructions to install your authtoken are on your ngrok dashboard:\\nhttps://dashboard.ngrok.com/get-started/your-authtoken\\n\\nERR_NGROK_105\\n" })
} else {
  const serve = () => {
    log({ lvl: "info", msg: "client session established", obj: "tunnels.session" })
    log({ lvl: "info", msg: "started tunnel", obj: "tunnels", name: "command_line", addr: process.argv[3], url: "https://calm-otter-" + run + ".ngrok-free.app" })
  }
  if (${options.gated === true}) {
    const gate = setInterval(() => { if (fs.existsSync(path.join(state, "serve"))) { clearInterval(gate); serve() } }, 20)
  } else setTimeout(serve, ${options.startDelayMs ?? 300})
}
setInterval(() => {}, 1000)
`
  )
  return { file, runs: () => runsIn(state, "run-"), serve: () => fs.writeFileSync(path.join(state, "serve"), "") }
}

/**
 * The mesh VPN's CLI and daemon (`tailscale`, `tailscaled`). State files in `state`: `daemon`
 * (the daemon runs), `login` (logged in), `allowed` (the network allows the funnel), `needs-root`
 * (serve config needs root: refused unless run as root or through sudo), `hostname`, and a `bg`
 * funnel set up outside the gateway. `login-done` is the browser finishing the sign-in.
 */
export const meshCli = (dir: string) => {
  const state = path.join(dir, "mesh-state")
  fs.mkdirSync(state, { recursive: true })
  fs.chmodSync(state, 0o777)
  const source = `const fs = require("node:fs"), path = require("node:path")
const state = ${JSON.stringify(state)}
const has = (f) => fs.existsSync(path.join(state, f))
// Written whole, then named: the tests read these files while a run may be starting.
const put = (f, v = "") => { const t = path.join(state, ".tmp-" + process.pid); fs.writeFileSync(t, v); fs.renameSync(t, path.join(state, f)) }
const args = process.argv.slice(2)
const root = process.getuid() === 0 || process.env.SUDO_USER !== undefined
const hostname = has("hostname") ? fs.readFileSync(path.join(state, "hostname"), "utf8") : "box"
const dns = hostname + ".tail1234.ts.net"
const noDaemon = () => { process.stderr.write("failed to connect to local tailscaled; it doesn't appear to be running (sudo systemctl start tailscaled ?)\\n"); process.exit(1) }
const cmd = args[0]
if (cmd === "version") { console.log("1.76.6\\n  tailscale commit: 0000000\\n  go version: go1.23.1"); process.exit(0) }
if (cmd === "status") {
  if (!has("daemon")) noDaemon()
  console.log(JSON.stringify(has("login") ? { Version: "1.76.6", BackendState: "Running", Self: { HostName: hostname, DNSName: dns + "." } } : { Version: "1.76.6", BackendState: "NeedsLogin", AuthURL: "", Self: { HostName: hostname, DNSName: "" } }))
  process.exit(0)
}
if (cmd === "login") {
  if (!has("daemon")) noDaemon()
  const n = fs.readdirSync(state).filter((f) => f.startsWith("login-run-")).length + 1
  put("login-run-" + n, JSON.stringify({ pid: process.pid, args }))
  for (const a of args) if (a.startsWith("--hostname=")) put("hostname", a.slice(11))
  console.log("\\nTo authenticate, visit:\\n\\n\\thttps://login.tailscale.com/a/abc" + n + "\\n")
  setInterval(() => { if (has("login-done")) { put("login"); console.log("Success."); process.exit(0) } }, 50)
  return
}
if (cmd === "set") {
  if (has("needs-root") && !root) { console.error("Access denied: prefs write access denied"); process.exit(1) }
  for (const a of args) if (a.startsWith("--hostname=")) put("hostname", a.slice(11))
  process.exit(0)
}
if (cmd === "funnel" && args[1] === "status") {
  const sessions = fs.readdirSync(state).filter((f) => f.startsWith("fg-"))
  const web = (target) => ({ TCP: { 443: { HTTPS: true } }, Web: { [dns + ":443"]: { Handlers: { "/": { Proxy: target } } } }, AllowFunnel: { [dns + ":443"]: true } })
  if (has("bg")) { console.log(JSON.stringify(web(fs.readFileSync(path.join(state, "bg"), "utf8")), null, 2)); process.exit(0) }
  if (sessions.length === 0) { console.log("null"); process.exit(0) }
  console.log(JSON.stringify({ Foreground: Object.fromEntries(sessions.map((s) => [s.slice(3), web(fs.readFileSync(path.join(state, s), "utf8"))])) }))
  process.exit(0)
}
if (cmd === "funnel" && args[2] === "off") {
  if (has("needs-root") && !root) { console.error("Access denied: serve config denied"); process.exit(1) }
  fs.rmSync(path.join(state, "bg"), { force: true })
  process.exit(0)
}
if (cmd === "funnel") {
  if (!has("daemon")) noDaemon()
  const n = fs.readdirSync(state).filter((f) => f.startsWith("funnel-run-")).length + 1
  put("funnel-run-" + n, JSON.stringify({ pid: process.pid, args, uid: process.getuid(), sudoUser: process.env.SUDO_USER }))
  if (has("needs-root") && !root) { console.error("Access denied: serve config denied"); process.exit(1) }
  const target = args[args.length - 1]
  const serve = () => {
    put("fg-" + process.pid, target)
    console.log("Available on the internet:\\n\\nhttps://" + dns + "/\\n|-- proxy " + target + "\\n\\nPress Ctrl+C to exit.")
  }
  const bye = () => { fs.rmSync(path.join(state, "fg-" + process.pid), { force: true }); process.exit(0) }
  process.on("SIGTERM", bye)
  process.on("SIGINT", bye)
  if (has("allowed")) serve()
  else {
    console.log("Funnel is not enabled on your tailnet.\\nTo enable, visit:\\n\\n         https://login.tailscale.com/f/funnel?node=n123\\n")
    const wait = setInterval(() => { if (has("allowed")) { clearInterval(wait); serve() } }, 50)
  }
  setInterval(() => {}, 1000)
  return
}
console.error("unexpected: tailscale " + args.join(" "))
process.exit(2)
`
  const daemonSource = `const fs = require("node:fs"), path = require("node:path")
const state = ${JSON.stringify(state)}
fs.writeFileSync(path.join(state, "daemon"), String(process.pid))
fs.writeFileSync(path.join(state, "daemon-args"), JSON.stringify(process.argv.slice(2)))
const bye = () => { fs.rmSync(path.join(state, "daemon"), { force: true }); process.exit(0) }
process.on("SIGTERM", bye)
setInterval(() => {}, 1000)
`
  const binDir = path.join(dir, "bin")
  fs.mkdirSync(binDir, { recursive: true })
  const bin = path.join(binDir, "tailscale")
  const daemonBin = path.join(binDir, "tailscaled")
  /** The programs as files, without installing them (the install script copies them into place). */
  const sources = { tailscale: `#!${process.execPath}\n${source}`, tailscaled: `#!${process.execPath}\n${daemonSource}` }
  return {
    state,
    bin,
    daemonBin,
    sources,
    install: () => {
      script(bin, source)
      script(daemonBin, daemonSource)
    },
    set: (file: string, on = true, value = "") =>
      on ? fs.writeFileSync(path.join(state, file), value) : fs.rmSync(path.join(state, file), { force: true }),
    has: (file: string) => fs.existsSync(path.join(state, file)),
    funnelRuns: () => runsIn(state, "funnel-run-"),
    loginRuns: () => runsIn(state, "login-run-"),
    daemonPid: () =>
      fs.existsSync(path.join(state, "daemon")) ? Number(fs.readFileSync(path.join(state, "daemon"), "utf8")) || undefined : undefined
  }
}

/**
 * A stand-in `sudo` (for a gateway that does not run as root): `-S` reads the password from
 * stdin; the right one runs the command with SUDO_USER set (signals passed on), a wrong one is
 * refused as sudo refuses it. Each call is recorded with its argv (which must never hold the
 * password).
 */
export const fakeSudo = (dir: string, password: string) => {
  const binDir = path.join(dir, "sudo-bin")
  const log = path.join(dir, "sudo-log")
  fs.mkdirSync(binDir, { recursive: true })
  fs.writeFileSync(log, "")
  fs.chmodSync(log, 0o666)
  script(
    path.join(binDir, "sudo"),
    `const fs = require("node:fs"), { spawn } = require("node:child_process")
const args = process.argv.slice(2)
const dash = args.indexOf("--")
const cmd = args.slice(dash + 1)
let input = ""
process.stdin.setEncoding("utf8")
process.stdin.on("data", (c) => (input += c))
process.stdin.on("end", () => {
  const given = input.split("\\n")[0]
  fs.appendFileSync(${JSON.stringify(log)}, JSON.stringify({ argv: process.argv.slice(2), ok: given === ${JSON.stringify(password)} }) + "\\n")
  if (given !== ${JSON.stringify(password)}) { process.stderr.write("Sorry, try again.\\nsudo: 1 incorrect password attempt\\n"); process.exit(1) }
  const child = spawn(cmd[0], cmd.slice(1), { stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, SUDO_USER: "nobody" } })
  for (const s of ["SIGTERM", "SIGINT"]) process.on(s, () => child.kill(s))
  child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
})
`
  )
  return {
    binDir,
    calls: () =>
      fs
        .readFileSync(log, "utf8")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { argv: Array<string>; ok: boolean })
  }
}
