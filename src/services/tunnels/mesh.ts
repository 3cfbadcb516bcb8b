/**
 * The mesh funnel: setup steps are one-shot CLI commands, the funnel is the CLI's foreground form run as a supervised
 * helper, so no public address outlives the gateway (docs/tunnels.md#mesh-funnel).
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { isLoopbackHost } from "../../platform/config/AppConfig.js"
import { killGroup, lastLines, privilegedArgv, runCommand, spawnHelper } from "./process.js"
import { HelperError, type RunLife } from "./supervisor.js"

export interface MeshSettings {
  /** The CLI (`MESH_TUNNEL_BIN`, default `tailscale` on PATH). */
  readonly bin: string
  /** Its daemon (`MESH_TUNNEL_DAEMON_BIN`, default `tailscaled` beside MESH_TUNNEL_BIN, else on PATH). */
  readonly daemonBin: string
  /** MESH_TUNNEL_DAEMON_BIN was set: that binary is started, not the init system's service. */
  readonly daemonBinSet: boolean
  /** The vendor's install script for Linux (`MESH_TUNNEL_INSTALL_URL`). */
  readonly installUrl: string
  readonly dataDir: string
}

export const DEFAULT_MESH_INSTALL_URL = "https://tailscale.com/install.sh"

/** `GET /api/tunnels/mesh/check`. */
export interface MeshCheck {
  readonly installed: boolean
  readonly version: string | null
  readonly daemonRunning: boolean
  readonly loggedIn: boolean
  /** The daemon's own word (`Running`, `NeedsLogin`, `Stopped`...), null when it does not answer. */
  readonly backendState: string | null
  /** This machine's name on the mesh network and its full DNS name (the funnel address's host). */
  readonly hostname: string | null
  readonly dnsName: string | null
  /** Funnels the daemon serves now (ours or set up outside the gateway), from `funnel status --json` (which prints `null` when none). */
  readonly funnels: ReadonlyArray<{ readonly url: string; readonly proxy: string | null }>
  /** What is wrong, in one sentence, when something is. */
  readonly problem: string | null
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text.trim() === "" ? "null" : text)
  } catch {
    return undefined
  }
}

/** Funnels in a serve config as `funnel status --json` prints it (`null`, a config, or foreground sessions' configs). */
export const funnelsOf = (json: unknown): Array<{ url: string; proxy: string | null }> => {
  const out: Array<{ url: string; proxy: string | null }> = []
  const visit = (config: unknown) => {
    if (config === null || typeof config !== "object") return
    const c = config as {
      AllowFunnel?: Record<string, boolean>
      Web?: Record<string, { Handlers?: Record<string, { Proxy?: string }> }>
      Foreground?: Record<string, unknown>
    }
    for (const [hostPort, allowed] of Object.entries(c.AllowFunnel ?? {})) {
      if (!allowed) continue
      const [host, port] = [hostPort.slice(0, hostPort.lastIndexOf(":")), hostPort.slice(hostPort.lastIndexOf(":") + 1)]
      const proxy = c.Web?.[hostPort]?.Handlers?.["/"]?.Proxy ?? null
      out.push({ url: `https://${host}${port === "443" ? "" : `:${port}`}/`, proxy })
    }
    for (const session of Object.values(c.Foreground ?? {})) visit(session)
  }
  visit(json)
  return out
}

const NOT_LOGGED_IN = new Set(["NeedsLogin", "NeedsMachineAuth", "NoState"])

/** What the check says of a daemon it cannot reach (or a CLI that is not there). */
const NO_DAEMON = { daemonRunning: false, loggedIn: false, backendState: null, hostname: null, dnsName: null, funnels: [] } as const

export const meshCheck = async (s: MeshSettings): Promise<MeshCheck> => {
  const version = await runCommand(s.bin, ["version"], { timeoutMs: 10_000 })
  if (version.code !== 0) {
    return {
      installed: false,
      version: null,
      ...NO_DAEMON,
      problem: `the mesh CLI (${s.bin}) is not installed${version.stderr ? ` (${lastLines(version.stderr, 1)})` : ""}: POST /api/tunnels/mesh/install, or set MESH_TUNNEL_BIN`
    }
  }
  const installed = { installed: true, version: version.stdout.trim().split("\n")[0] ?? null }
  const status = await runCommand(s.bin, ["status", "--json"], { timeoutMs: 10_000 })
  const json = status.code === 0 ? parseJson(status.stdout) : undefined
  if (json === undefined) {
    return {
      ...installed,
      ...NO_DAEMON,
      problem: `the mesh daemon does not answer (${lastLines(status.stderr || status.stdout, 1) || `exit ${status.code}`}): POST /api/tunnels/mesh/start-daemon`
    }
  }
  const st = (json ?? {}) as { BackendState?: string; Self?: { HostName?: string; DNSName?: string } }
  const backendState = st.BackendState ?? null
  const loggedIn = backendState !== null && !NOT_LOGGED_IN.has(backendState)
  const funnelStatus = await runCommand(s.bin, ["funnel", "status", "--json"], { timeoutMs: 10_000 })
  const dnsName = st.Self?.DNSName ? st.Self.DNSName.replace(/\.$/, "") : null
  return {
    ...installed,
    daemonRunning: true,
    loggedIn,
    backendState,
    hostname: st.Self?.HostName ?? null,
    dnsName: dnsName === "" ? null : dnsName,
    funnels: funnelStatus.code === 0 ? funnelsOf(parseJson(funnelStatus.stdout)) : [],
    problem: loggedIn ? null : "not logged in to the mesh network: POST /api/tunnels/mesh/login and open its authUrl"
  }
}

const SUDO_REFUSED =
  /incorrect password|Sorry, try again|a password is required|no password was provided|sudo: .*(not allowed|not in the sudoers)/i
const ACCESS_DENIED = /access denied|permission denied|must be root|requires root|run with sudo|operator/i

/** A one-shot command's failure as one sentence (the sudo password never appears: it only went to stdin). */
const failure = (what: string, r: { code: number | null; stdout: string; stderr: string }, withPassword: boolean): string => {
  const out = `${r.stderr}\n${r.stdout}`
  if (SUDO_REFUSED.test(out)) return `${what}: sudo refused the password`
  if (ACCESS_DENIED.test(out) && !withPassword)
    return `${what} needs root: send sudoPassword (used for this call only), or run \`sudo tailscale set --operator=$USER\` once`
  return `${what} failed (${r.code === null ? "could not run" : `exit ${r.code}`})${lastLines(out) ? `: ${lastLines(out)}` : ""}`
}

/** Runs `bin args` as root (sudo with the password on stdin when not root and one is given). */
export const privileged = (
  bin: string,
  args: ReadonlyArray<string>,
  sudoPassword: string | undefined,
  onLine?: (line: string) => void,
  timeoutMs = 120_000
) => {
  const argv = privilegedArgv(bin, args, sudoPassword)
  return runCommand(argv.cmd, argv.args, {
    ...(argv.stdin === undefined ? {} : { stdin: argv.stdin }),
    timeoutMs,
    ...(onLine ? { onLine } : {})
  })
}

/** Installs the CLI: Linux by the vendor's install script (as root), macOS by Homebrew. Lines go to `onLine`. */
export const meshInstall = async (
  s: MeshSettings,
  sudoPassword: string | undefined,
  onLine: (line: string) => void
): Promise<{ ok: boolean; error?: string }> => {
  if (process.platform === "darwin") {
    onLine("installing with Homebrew: brew install tailscale")
    const r = await runCommand("brew", ["install", "tailscale"], { timeoutMs: 15 * 60_000, onLine })
    return r.code === 0 ? { ok: true } : { ok: false, error: failure("brew install tailscale", r, false) }
  }
  if (process.platform !== "linux")
    return {
      ok: false,
      error: `installing the mesh CLI is supported on Linux and macOS, not ${process.platform}: install it by hand and set MESH_TUNNEL_BIN`
    }
  onLine(`downloading the install script from ${s.installUrl}`)
  let script: string
  try {
    const res = await fetch(s.installUrl, { redirect: "follow", signal: AbortSignal.timeout(60_000) })
    if (!res.ok) return { ok: false, error: `could not download the install script from ${s.installUrl}: HTTP ${res.status}` }
    script = await res.text()
  } catch (e) {
    return { ok: false, error: `could not download the install script from ${s.installUrl}: ${(e as Error).message}` }
  }
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "gw-mesh-install-")), "install.sh")
  fs.writeFileSync(file, script, { mode: 0o700 })
  try {
    onLine("running the install script")
    const r = await privileged("sh", [file], sudoPassword, onLine, 15 * 60_000)
    if (r.code !== 0) return { ok: false, error: failure("the install script", r, sudoPassword !== undefined) }
    return { ok: true }
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true, force: true })
  }
}

/** Starts the mesh daemon (systemd when it runs the machine, else the daemon binary in the background), then waits for it to answer. */
export const meshStartDaemon = async (s: MeshSettings, sudoPassword: string | undefined): Promise<{ ok: boolean; error?: string }> => {
  const withPassword = sudoPassword !== undefined
  if (process.platform === "darwin") {
    const r = await privileged("brew", ["services", "start", "tailscale"], sudoPassword)
    if (r.code !== 0) return { ok: false, error: failure("brew services start tailscale", r, withPassword) }
  } else if (!s.daemonBinSet && fs.existsSync("/run/systemd/system")) {
    const r = await privileged("systemctl", ["start", "tailscaled"], sudoPassword)
    if (r.code !== 0) return { ok: false, error: failure("systemctl start tailscaled", r, withPassword) }
  } else {
    // No init system to own it: the daemon is started in its own session and left running, like
    // a service (it is the user's mesh connection, not the gateway's tunnel).
    const argv = privilegedArgv(s.daemonBin, ["--state=/var/lib/tailscale/tailscaled.state"], sudoPassword)
    const spawned = spawnHelper(argv.cmd, argv.args, argv.stdin === undefined ? {} : { stdin: argv.stdin })
    spawned.proc.stdout?.resume()
    spawned.proc.stderr?.resume()
    spawned.proc.unref()
    const early = await Promise.race([spawned.ended, new Promise<undefined>((r) => setTimeout(() => r(undefined), 300))])
    if (early?.error) return { ok: false, error: `the mesh daemon ${s.daemonBin} could not start: ${early.error.message}` }
  }
  const end = Date.now() + 15_000
  for (;;) {
    const check = await meshCheck(s)
    if (check.daemonRunning) return { ok: true }
    if (Date.now() > end) return { ok: false, error: check.problem ?? "the mesh daemon did not come up" }
    await new Promise((r) => setTimeout(r, 250))
  }
}

/** A sign-in in progress: the CLI waits for the browser, and is stopped after LOGIN_WAIT_MS. */
export const LOGIN_WAIT_MS = 10 * 60_000
const AUTH_URL = /https:\/\/\S+/

/**
 * `login [--hostname]`: answers the address to open in a browser as soon as the CLI prints it (or
 * null when it ends without one: already logged in). The CLI keeps running until the sign-in is
 * done; `dispose` stops it.
 */
export const meshLogin = async (
  s: MeshSettings,
  hostname: string | undefined
): Promise<{ authUrl: string | null; error?: string; dispose: () => Promise<void> }> => {
  const spawned = spawnHelper(s.bin, ["login", ...(hostname ? [`--hostname=${hostname}`] : [])])
  let out = ""
  const dispose = () => killGroup(spawned.proc)
  const timer = setTimeout(() => void dispose(), LOGIN_WAIT_MS)
  timer.unref()
  void spawned.ended.then(() => clearTimeout(timer))
  return new Promise((resolve) => {
    let done = false
    const answer = (a: { authUrl: string | null; error?: string }) => {
      if (done) return
      done = true
      resolve({ ...a, dispose })
    }
    spawned.lines((line) => {
      out += `${line}\n`
      const url = AUTH_URL.exec(line)
      if (url) answer({ authUrl: url[0] })
    })
    void spawned.ended.then(({ code, error }) =>
      answer(
        error
          ? { authUrl: null, error: `the mesh CLI could not run: ${error.message}` }
          : code === 0
            ? { authUrl: null }
            : { authUrl: null, error: failure("login", { code, stdout: out, stderr: "" }, false) }
      )
    )
    setTimeout(() => answer({ authUrl: null, error: "the mesh CLI printed no sign-in address within 30 s" }), 30_000).unref()
  })
}

const NOT_ENABLED = /(Funnel|Serve|HTTPS( certificates)?) (is|are) not enabled/i
const AVAILABLE = /Available on the internet/i
const MESH_URL = /https:\/\/[^\s|]+/

/** The funnel's life: checks the mesh is ready, then runs the foreground `funnel <target>`. */
export const funnelLife =
  (s: MeshSettings, options: () => { readonly sudoPassword?: string; readonly hostname?: string }): RunLife =>
  (life, target) =>
    Effect.gen(function* () {
      const { sudoPassword, hostname } = options()
      const check = yield* Effect.promise(() => meshCheck(s))
      if (!check.installed || !check.daemonRunning)
        return yield* Effect.fail(new HelperError(check.problem ?? "the mesh is not ready", true))
      if (!check.loggedIn)
        return yield* Effect.fail(new HelperError(check.problem ?? "not logged in to the mesh network", true, "needs_auth"))
      if (hostname && hostname !== check.hostname) {
        const r = yield* Effect.promise(() => privileged(s.bin, ["set", `--hostname=${hostname}`], sudoPassword, undefined, 30_000))
        if (r.code !== 0)
          return yield* Effect.fail(
            new HelperError(failure(`setting the machine name to ${hostname}`, r, sudoPassword !== undefined), true)
          )
      }
      const argv = privilegedArgv(s.bin, ["funnel", target], sudoPassword)
      const spawned = yield* Effect.acquireRelease(
        Effect.sync(() => spawnHelper(argv.cmd, argv.args, argv.stdin === undefined ? {} : { stdin: argv.stdin })),
        // Through sudo the root funnel is signalled by sudo, which passes SIGTERM on: given longer to end.
        (sp) => Effect.promise(() => killGroup(sp.proc, argv.cmd === "sudo" ? 10_000 : 2000))
      )
      life.spawned({ pid: spawned.proc.pid, command: spawned.command })
      return yield* Effect.async<never, HelperError>((resume) => {
        let tail = ""
        let expect: "address" | "enable" | undefined
        spawned.lines((line) => {
          tail = `${tail}${line}\n`.slice(-4000)
          if (AVAILABLE.test(line)) expect = "address"
          else if (NOT_ENABLED.test(line)) expect = "enable"
          const url = MESH_URL.exec(line)?.[0]
          if (url === undefined) return
          if (expect === "address" && /\.ts\.net|^https:\/\/[^/]+\//.test(url)) {
            expect = undefined
            life.registered(url.endsWith("/") ? url : `${url}/`)
          } else if (expect === "enable") {
            expect = undefined
            life.needsAuth(
              `the funnel is not enabled for this mesh network: allow it at ${url}, the funnel starts by itself once allowed`,
              {
                funnelNotEnabled: true,
                enableUrl: url
              }
            )
          }
        })
        void spawned.ended.then(({ code, signal, error }) => {
          if (error) return resume(Effect.fail(new HelperError(`the mesh CLI could not run: ${error.message}`, true)))
          const r = { code, stdout: tail, stderr: "" }
          const text = failure("the funnel", r, sudoPassword !== undefined)
          // Refused for want of root or a password: trying again cannot help.
          const permanent = SUDO_REFUSED.test(tail) || (ACCESS_DENIED.test(tail) && !SUDO_REFUSED.test(tail)) || NOT_ENABLED.test(tail)
          resume(
            Effect.fail(
              new HelperError(
                code === 0 && signal === null ? `the funnel ended: ${lastLines(tail) || "no reason given"}` : text,
                permanent,
                NOT_ENABLED.test(tail) ? "needs_auth" : "error"
              )
            )
          )
        })
      })
    })

/** Turns off a funnel the daemon still serves to `target` (one set up with `--bg`, by an earlier version or by hand). */
export const meshFunnelOff = async (
  s: MeshSettings,
  target: string,
  sudoPassword: string | undefined
): Promise<{ ok: boolean; error?: string }> => {
  const r = await runCommand(s.bin, ["funnel", "status", "--json"], { timeoutMs: 10_000 })
  if (r.code !== 0) return { ok: true }
  const port = new URL(target).port
  /** A funnel to this machine's port `port` (`http://127.0.0.1:20128`, `localhost:20128`, `20128`): another host's funnel is not ours to
   * turn off. */
  const ours = (proxy: string): boolean => {
    if (proxy === port) return true
    try {
      const u = new URL(/^[a-z+]+:\/\//i.test(proxy) ? proxy : `http://${proxy}`)
      return u.port === port && isLoopbackHost(u.hostname.replace(/^\[(.*)\]$/, "$1"))
    } catch {
      return false
    }
  }
  for (const f of funnelsOf(parseJson(r.stdout))) {
    if (f.proxy === null || !ours(f.proxy)) continue
    const https = new URL(f.url).port || "443"
    const off = await privileged(s.bin, ["funnel", `--https=${https}`, "off"], sudoPassword, undefined, 30_000)
    if (off.code !== 0) return { ok: false, error: failure(`turning off the funnel ${f.url}`, off, sudoPassword !== undefined) }
  }
  return { ok: true }
}
